"""Shrinking a scenario to a minimal witness of one anomaly kind, by a counted number of replays.

Hypothesis has no public setting that bounds shrinking by a count (its limits are engine constants), and
a budget in seconds would make one seed give different scenarios on different machines. So the kit runs
Hypothesis without its shrink phase and shrinks what it finds here: candidate scenarios (the steps with
some deleted or simplified) are replayed against the adapter exactly as `keyshared conformance replay`
replays a saved one, and a candidate is kept only if it still shows the kind and shows no kind before it
that the original did not. The passes and their order are fixed, and the budget counts replays, so the
same adapter and seed give the same witness. spec/checking.md section 3.1 describes it for readers.

A witness is of one *shape* (`Shape`): an anomaly kind with the cause before it (the failure or return among
its witness events), so that two defects of one kind (a nack requeued behind later messages, a failover that
serves new messages before the returned ones) each keep a witness. For an adapter that declares itself
nondeterministic, a candidate is replayed up to `tries` times and kept if one of them shows the shape, and
`reproduce` counts how many of n replays of a scenario show it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ks_conformance.anomalies import Anomaly
from ks_conformance.batch import AnySession
from ks_conformance.harness import Step
from ks_conformance.protocol import AdapterFault
from ks_conformance.scenario import Scenario

Replayer = Callable[[Scenario], AnySession | None]
"""Replays a scenario against the adapter; the judged session, or None if the adapter refused its config."""

CAUSES: dict[str, str] = {
    "nack": "nack",
    "timeout": "timeout",
    "consumer_removed": "leave",
    "consumer_disconnected": "disconnect",
    "consumer_evicted": "disconnect",
    "restart": "restart",
    "key_released": "release",
}
"""Trace events that make a message due again (a failure or a return), by the cause a shape names."""

TRIGGERS: dict[str, str] = {
    "config": "reset",
    "publish": "publish",
    "consumer_added": "add_consumer",
    "consumer_removed": "remove_consumer",
    "consumer_disconnected": "disconnect",
    "consumer_reconnected": "reconnect",
    "permits_granted": "flow",
    "tick": "tick",
    "restart": "restart",
    "seek": "seek",
    "quiescent": "settle",
    "key_released": "release",
    "key_skipped": "skip",
    "segment_sealed": "segment",
    "segment_created": "segment",
    "ack": "ack",
    "ack_ignored": "ack",
    "nack": "nack",
    "nack_ignored": "nack",
    "zombie_ack": "zombie_ack",
    "zombie_nack": "zombie_nack",
    "extend": "extend",
}
"""Op events (and the ack-class effects that start an ack or nack op in a trace: spec/checking.md section 3.0),
by the op they stand for."""


@dataclass(frozen=True)
class Shape:
    """What tells two witnesses of one anomaly kind apart (spec/checking.md section 3.1): the kind, and the
    cause, the kind of the last failure or return event among its witness events before the event it was found
    at (nack, timeout, leave, disconnect, restart, release; none). The op it was found in (`trigger_of`) is
    tallied per shape, not part of it: one bug shows in whichever op happens to deliver next."""

    kind: str
    cause: str

    def to_json(self) -> dict[str, str]:
        """For the report."""
        return {"kind": self.kind, "cause": self.cause}


def _event(trace: Sequence[Mapping[str, Any]], seq: int) -> str:
    """The kind of event `seq` of a trace ('' if the trace has no such event): seqs count events from 0."""
    if 0 <= seq < len(trace) and trace[seq].get("seq") == seq:
        return str(trace[seq].get("event"))
    return next((str(event.get("event")) for event in trace if event.get("seq") == seq), "")


def cause_of(anomaly: Anomaly, trace: Sequence[Mapping[str, Any]]) -> str:
    """The kind of the last failure or return event among the anomaly's witness events before its own seq."""
    causes = [CAUSES.get(_event(trace, seq), "") for seq in anomaly.witness if seq < anomaly.seq]
    return next((cause for cause in reversed(causes) if cause), "none")


def trigger_of(anomaly: Anomaly, trace: Sequence[Mapping[str, Any]]) -> str:
    """The op the anomaly was found in: the nearest op event (or ack-class effect) at or before its seq."""
    for seq in range(min(anomaly.seq, len(trace) - 1), -1, -1):
        trigger = TRIGGERS.get(_event(trace, seq))
        if trigger is not None:
            return trigger
    return "none"


def trace_of(session: AnySession) -> Sequence[Mapping[str, Any]]:
    """The session's trace (a replay double may have none)."""
    return getattr(session, "trace", None) or []


def shape_of(anomaly: Anomaly, session: AnySession) -> Shape:
    """The anomaly's shape in the session that showed it."""
    return Shape(anomaly.name, cause_of(anomaly, trace_of(session)))


def first_of(session: AnySession, shape: Shape | str) -> int | None:
    """The position of the session's first anomaly of `shape` (or of a kind, given its name); None if none."""
    kind = shape if isinstance(shape, str) else shape.kind
    for position, anomaly in enumerate(session.anomalies):
        if anomaly.name == kind and (isinstance(shape, str) or cause_of(anomaly, trace_of(session)) == shape.cause):
            return position
    return None


@dataclass
class Witness:
    """What shrinking a scenario for one anomaly kind gave."""

    kind: str
    scenario: Scenario
    """The smallest scenario found that shows the kind (the original one if shrinking kept nothing)."""
    shape: Shape | None = None
    """The shape every kept candidate showed (None: any anomaly of the kind)."""
    session: AnySession | None = None
    """The replay of `scenario`; None if even the original did not show the kind when replayed."""
    attempts: int = 0
    """Replays made, the original's included: never more than the budget."""
    accepted: int = 0
    """Candidates kept."""
    stopped: str = ""
    """Why shrinking ended before its passes did: 'budget', 'cap' (the wall-clock safety cap), or ''."""
    fault: AdapterFault | None = None
    """An adapter fault during a replay, which ended shrinking (the scenario is the last one kept)."""


@dataclass
class _Search:
    """The state of one shrink: the current scenario, its replay, and what was tried."""

    kind: str | Shape
    tolerated: frozenset[str]
    allowed_before: set[str]
    replay: Replayer
    budget: int
    deadline: float | None
    clock: Callable[[], float]
    on_replay: Callable[[AnySession], None]
    witness: Witness
    tried: set[str] = field(default_factory=set)
    tries: int = 1
    """Replays per candidate (a nondeterministic adapter): kept if any of them shows the kind."""

    def exhausted(self) -> bool:
        """True once the budget, the cap or a fault ends shrinking (recorded in the witness)."""
        witness = self.witness
        if witness.fault is not None or witness.stopped:
            return True
        if witness.attempts >= self.budget:
            witness.stopped = "budget"
        elif self.deadline is not None and self.clock() > self.deadline:
            witness.stopped = "cap"
        return bool(witness.stopped)

    def attempt(self, steps: list[Step]) -> bool:
        """Replay the current scenario with `steps` instead; keep it if it still shows the kind."""
        key = json.dumps([step.to_json() for step in steps], sort_keys=True)
        if key in self.tried or self.exhausted():
            return False
        self.tried.add(key)
        current = self.witness.scenario
        candidate = Scenario(dict(current.config), steps, tolerates=list(current.tolerates))
        for turn in range(self.tries):
            if turn > 0 and self.exhausted():
                return False
            self.witness.attempts += 1
            try:
                session = self.replay(candidate)
            except AdapterFault as fault:
                self.witness.fault = fault
                return False
            if session is None:
                return False
            self.on_replay(session)
            if shows(session, self.kind, self.tolerated, self.allowed_before):
                break
        else:
            return False
        recorded = list(session.steps) if len(session.steps) == len(steps) else steps
        self.witness.scenario, self.witness.session = candidate, session
        candidate.steps = recorded
        self.witness.accepted += 1
        return True


def untolerated_before(session: AnySession, kind: str | Shape, tolerated: Collection[str]) -> set[str] | None:
    """The kinds outside `tolerated` that the session showed before its first `kind` (or first anomaly of that
    shape; anomalies of its kind with another cause are not counted); None if it never did."""
    position = first_of(session, kind)
    if position is None:
        return None
    name = kind if isinstance(kind, str) else kind.kind
    return {a.name for a in session.anomalies[:position] if a.name not in tolerated and a.name != name}


def shows(session: AnySession, kind: str | Shape, tolerated: Collection[str], allowed_before: Collection[str]) -> bool:
    """True if the session shows `kind`, preceded by no kind outside `tolerated` and `allowed_before`."""
    before = untolerated_before(session, kind, tolerated)
    return before is not None and before <= set(allowed_before)


def shrink(
    scenario: Scenario,
    kind: str,
    replay: Replayer,
    budget: int,
    *,
    cap_seconds: float | None = None,
    on_replay: Callable[[AnySession], None] = lambda session: None,
    clock: Callable[[], float] = time.monotonic,
    shape: Shape | None = None,
    tries: int = 1,
) -> Witness:
    """Shrink `scenario` to a small one that still shows `kind`, in at most `budget` replays.

    The original is replayed first: the kinds outside `scenario.tolerates` it shows before `kind` are the
    only ones a candidate may show before it (so the witness is not a consequence of a new kind). Every
    replay is passed to `on_replay` (the run records what it shows). `cap_seconds` is a safety net only:
    when it ends shrinking, `stopped` says so and the caller reports it.

    With a `shape`, a candidate must show that shape of the kind (not just the kind). With `tries` above 1 (an
    adapter that declares itself nondeterministic), the original and every candidate are replayed up to `tries`
    times and count as showing the kind if one replay does; every replay counts against the budget.
    """
    witness = Witness(kind, scenario, shape)
    tolerated = frozenset(scenario.tolerates)
    deadline = clock() + cap_seconds if cap_seconds is not None else None
    wanted: str | Shape = shape if shape is not None else kind
    search = _Search(wanted, tolerated, set(), replay, max(budget, 1), deadline, clock, on_replay, witness)
    search.tries = max(tries, 1)
    search.tried.add(json.dumps([step.to_json() for step in scenario.steps], sort_keys=True))
    before: set[str] | None = None
    original: AnySession | None = None
    for _ in range(search.tries):
        witness.attempts += 1
        try:
            original = replay(scenario)
        except AdapterFault as fault:
            witness.fault = fault
            return witness
        if original is None:
            return witness
        on_replay(original)
        before = untolerated_before(original, wanted, tolerated)
        if before is not None:
            break
    if before is None or original is None:
        return witness
    search.allowed_before = before
    witness.session = original
    _run_passes(search)
    return witness


def reproduce(
    scenario: Scenario,
    shape: Shape,
    replay: Replayer,
    times: int,
    *,
    on_replay: Callable[[AnySession], None] = lambda session: None,
) -> tuple[int, int, AnySession | None]:
    """Replay `scenario` `times` times: (replays that showed the shape, replays made, the first that did).

    Stops early at a refused configuration or an adapter fault (which propagates); the count is then of the
    replays made."""
    shown, made, first = 0, 0, None
    tolerated = frozenset(scenario.tolerates)
    for _ in range(times):
        session = replay(scenario)
        if session is None:
            break
        made += 1
        on_replay(session)
        if untolerated_before(session, shape, tolerated) is not None:
            shown += 1
            first = session if first is None else first
    return shown, made, first


def _run_passes(search: _Search) -> None:
    """Deletion passes from coarse to fine, then simplifications, repeated while they make progress."""
    while not search.exhausted():
        before = search.witness.accepted
        _delete_groups(search)
        _delete_chunks(search)
        _simplify(search)
        if search.witness.accepted == before:
            return


def _delete_groups(search: _Search) -> None:
    """Delete every step about one consumer, or every message of one key (with the answers to them)."""
    for name in _names(search.witness.scenario.steps):
        steps = search.witness.scenario.steps
        drop = {i for i, step in enumerate(steps) if step.op is not None and step.op.get("consumer") == name}
        search.attempt(without(steps, drop))
    for key in _keys(search.witness.scenario.steps):
        steps = search.witness.scenario.steps
        drop = {i for i, step in enumerate(steps) if step.op is not None and step.op.get("key") == key}
        search.attempt(without(steps, drop))


def _delete_chunks(search: _Search) -> None:
    """Delete runs of consecutive steps, halving their length down to single steps (as delta debugging does)."""
    size = max(len(search.witness.scenario.steps) // 2, 1)
    while size >= 1 and not search.exhausted():
        start = 0
        while start < len(search.witness.scenario.steps) and not search.exhausted():
            steps = search.witness.scenario.steps
            if not search.attempt(without(steps, set(range(start, start + size)))):
                start += size
        size //= 2


def _simplify(search: _Search) -> None:
    """Settle in the simplest order (oldest first); consumers without filters; one tick instead of several; a
    delayed message due sooner."""
    for index in range(len(search.witness.scenario.steps)):
        steps = search.witness.scenario.steps
        if index >= len(steps):
            return
        step = steps[index]
        for simpler in _simpler(step):
            if search.attempt([*steps[:index], simpler, *steps[index + 1 :]]):
                break


def _simpler(step: Step) -> Iterator[Step]:
    """Simpler versions of one step, simplest first."""
    if step.settle is not None and step.settle != "oldest":
        yield Step(settle="oldest")
    op = step.op
    if op is not None and op.get("op") == "add_consumer" and op.get("filters"):
        yield Step(op={**op, "filters": []}, expect=step.expect)
    if op is not None and op.get("op") == "publish_delayed" and int(op.get("deliver_at", 0)) > 1:
        due = int(op["deliver_at"])
        for sooner in sorted({1, due // 2}):  # a due tick nearer the start: fewer ticks to wait for it (KS-ORD-5)
            yield Step(op={**op, "deliver_at": sooner}, expect=step.expect)


def without(steps: Sequence[Step], drop: Collection[int]) -> list[Step]:
    """The steps without those at the indexes in `drop`, publish offsets kept contiguous.

    A deleted publish leaves no gap: later offsets move down, and the acks and nacks of a deleted message
    go with it, so that what follows still names the messages it named before.
    """
    gone: list[int] = []
    for index in sorted(drop):
        if index < len(steps):
            op = steps[index].op
            if op is not None and op.get("op") in ("publish", "publish_delayed") and steps[index].expect is None:
                gone.append(int(op["offset"]))
    kept: list[Step] = []
    for index, step in enumerate(steps):
        if index in drop:
            continue
        op = step.op
        if op is None or "offset" not in op or not gone:
            kept.append(step)
            continue
        offset = int(op["offset"])
        if offset in gone and op.get("op") in ("ack", "nack"):
            continue
        moved = offset - sum(1 for g in gone if g < offset)
        kept.append(Step(op={**op, "offset": moved}, expect=step.expect))
    return kept


def _names(steps: Sequence[Step]) -> list[str]:
    """The consumers the steps name, in order of first mention."""
    return list(dict.fromkeys(str(s.op["consumer"]) for s in steps if s.op is not None and "consumer" in s.op))


def _keys(steps: Sequence[Step]) -> list[str]:
    """The keys the steps publish to, in order of first mention."""
    return list(
        dict.fromkeys(
            str(s.op["key"]) for s in steps if s.op is not None and s.op.get("op") in ("publish", "publish_delayed")
        )
    )
