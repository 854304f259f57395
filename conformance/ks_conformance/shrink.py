"""Shrinking a scenario to a minimal witness of one anomaly kind, by a counted number of replays.

Hypothesis has no public setting that bounds shrinking by a count (its limits are engine constants), and
a budget in seconds would make one seed give different scenarios on different machines. So the kit runs
Hypothesis without its shrink phase and shrinks what it finds here: candidate scenarios (the steps with
some deleted or simplified) are replayed against the adapter exactly as `keyshared conformance replay`
replays a saved one, and a candidate is kept only if it still shows the kind and shows no kind before it
that the original did not. The passes and their order are fixed, and the budget counts replays, so the
same adapter and seed give the same witness. spec/checking.md section 3.1 describes it for readers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

from ks_conformance.batch import AnySession
from ks_conformance.harness import Step
from ks_conformance.protocol import AdapterFault
from ks_conformance.scenario import Scenario

Replayer = Callable[[Scenario], AnySession | None]
"""Replays a scenario against the adapter; the judged session, or None if the adapter refused its config."""


@dataclass
class Witness:
    """What shrinking a scenario for one anomaly kind gave."""

    kind: str
    scenario: Scenario
    """The smallest scenario found that shows the kind (the original one if shrinking kept nothing)."""
    session: AnySession | None
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

    kind: str
    tolerated: frozenset[str]
    allowed_before: set[str]
    replay: Replayer
    budget: int
    deadline: float | None
    clock: Callable[[], float]
    on_replay: Callable[[AnySession], None]
    witness: Witness
    tried: set[str] = field(default_factory=set)

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
        self.witness.attempts += 1
        try:
            session = self.replay(candidate)
        except AdapterFault as fault:
            self.witness.fault = fault
            return False
        if session is None:
            return False
        self.on_replay(session)
        if not shows(session, self.kind, self.tolerated, self.allowed_before):
            return False
        recorded = list(session.steps) if len(session.steps) == len(steps) else steps
        self.witness.scenario, self.witness.session = candidate, session
        candidate.steps = recorded
        self.witness.accepted += 1
        return True


def untolerated_before(session: AnySession, kind: str, tolerated: Collection[str]) -> set[str] | None:
    """The kinds outside `tolerated` that the session showed before its first `kind`; None if it never did."""
    before: set[str] = set()
    for anomaly in session.anomalies:
        if anomaly.name == kind:
            return before
        if anomaly.name not in tolerated:
            before.add(anomaly.name)
    return None


def shows(session: AnySession, kind: str, tolerated: Collection[str], allowed_before: Collection[str]) -> bool:
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
) -> Witness:
    """Shrink `scenario` to a small one that still shows `kind`, in at most `budget` replays.

    The original is replayed first: the kinds outside `scenario.tolerates` it shows before `kind` are the
    only ones a candidate may show before it (so the witness is not a consequence of a new kind). Every
    replay is passed to `on_replay` (the run records what it shows). `cap_seconds` is a safety net only:
    when it ends shrinking, `stopped` says so and the caller reports it.
    """
    witness = Witness(kind, scenario, None)
    tolerated = frozenset(scenario.tolerates)
    deadline = clock() + cap_seconds if cap_seconds is not None else None
    search = _Search(kind, tolerated, set(), replay, max(budget, 1), deadline, clock, on_replay, witness)
    witness.attempts = 1
    search.tried.add(json.dumps([step.to_json() for step in scenario.steps], sort_keys=True))
    try:
        original = replay(scenario)
    except AdapterFault as fault:
        witness.fault = fault
        return witness
    if original is None:
        return witness
    on_replay(original)
    before = untolerated_before(original, kind, tolerated)
    if before is None:
        return witness
    search.allowed_before = before
    witness.session = original
    _run_passes(search)
    return witness


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
    """Settle in the simplest order (oldest first); consumers without filters; one tick instead of several."""
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


def without(steps: Sequence[Step], drop: Collection[int]) -> list[Step]:
    """The steps without those at the indexes in `drop`, publish offsets kept contiguous.

    A deleted publish leaves no gap: later offsets move down, and the acks and nacks of a deleted message
    go with it, so that what follows still names the messages it named before.
    """
    gone: list[int] = []
    for index in sorted(drop):
        if index < len(steps):
            op = steps[index].op
            if op is not None and op.get("op") == "publish" and steps[index].expect is None:
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
    return list(dict.fromkeys(str(s.op["key"]) for s in steps if s.op is not None and s.op.get("op") == "publish"))
