"""Batch mode: drive an adapter that only answers `replay` (a Spark job, a log replayer) like a live one.

Between two requests the kit cannot see a batch engine's state, so a `BatchSession` collects the ops
it is given and sends the whole run so far as one `replay` every `chunk` ops, and whenever it must know
the state (settling, the end of an example). The answers are fed through a fresh `Session` exactly as
live answers would be, so the checker, the refusal checks and the saved scenario are the same as in
live mode; only the moments at which the kit learns the state differ. Each replay starts from a reset,
so the answers for ops already replayed must come back unchanged (KS-GEN-5): a change is reported as
`nondeterministic`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ks_conformance import settle as settling
from ks_conformance.anomalies import Anomaly
from ks_conformance.harness import FILTER_SELECTORS_REFUSED, Session, Step, halts
from ks_conformance.protocol import AdapterFault, Capabilities, Connection, Outcome

DEFAULT_CHUNK = 12
"""Ops per replay while an example is drawn: fewer means better-informed draws and more jobs."""


@dataclass
class PlanItem:
    """One line of the run so far: an op (with the refusal the caller intends), a settle mark, or `quiescent`."""

    kind: str
    op: dict[str, Any] = field(default_factory=dict)
    expect: str | None = None
    record: bool = True
    order: str = "oldest"


class ScriptedConnection(Connection):
    """Answers ops from one replay's outcomes, in order; a session fed from it sees what the engine did."""

    transport = "scripted"

    def __init__(self, adapter: str, ops: Sequence[Mapping[str, Any]], outcomes: Sequence[Outcome]) -> None:
        super().__init__()
        self.adapter = adapter
        self._ops = [dict(op) for op in ops]
        self._outcomes = list(outcomes)
        self._next = 0

    def request(self, message: dict[str, Any]) -> Any:
        """Never used: every answer was given by the replay."""
        raise AdapterFault("internal", f"a scripted connection cannot send {message.get('cmd')!r}")

    def close(self) -> None:
        """Nothing to release."""

    def reset(self, config: Mapping[str, Any]) -> Outcome:
        """The replay's reset was accepted, or there would be no outcomes."""
        return Outcome("ok")

    def op(self, op: Mapping[str, Any]) -> Outcome:
        """The replay's answer to this op (the ops must come in the order they were replayed)."""
        index = self._next
        if index >= len(self._outcomes) or dict(op) != self._ops[index]:
            raise AdapterFault("internal", f"batch mode: op {index} {dict(op)} was not replayed in this position")
        self._next += 1
        return self._outcomes[index]

    def stats(self) -> dict[str, Any]:
        """Stats describe the engine's state at one moment, which a replay does not stop at."""
        raise AdapterFault("internal", "stats are not queried in batch mode")


class BatchSession:
    """A `Session` for a batch engine: the same interface, ops sent in replays of the whole run so far.

    Reads (`checker`, `trace`, `anomalies`, `steps`, ...) show the state after the last replay; `perform`
    queues an op, `flush` replays, `settle` replays as often as quiescence needs.
    """

    def __init__(
        self,
        connection: Connection,
        capabilities: Capabilities,
        config: Mapping[str, Any],
        *,
        implementation: Mapping[str, Any] | None = None,
        chunk: int = DEFAULT_CHUNK,
        tolerated: Collection[str] = (),
    ) -> None:
        self.connection = connection
        self.capabilities = capabilities
        self.config = dict(config)
        self.tolerated = frozenset(tolerated)
        self.implementation = dict(implementation or {})
        self.chunk = max(1, chunk)
        self.plan: list[PlanItem] = []
        self.replays = 0
        """How many replays (engine jobs) this session sent."""
        self._unsent = 0
        self._stale = False
        self._settling = False
        self._halt_from: int | None = None
        self._settle_mark = 0
        self._reported = 0
        self._signature: list[str] = []
        self._outcomes: list[Outcome] = []
        self.current = self._session([])

    def __getattr__(self, name: str) -> Any:
        """Everything not batch-specific is the current session's (the state after the last replay)."""
        if name == "current":
            raise AttributeError(name)
        return getattr(self.current, name)

    # --- the Session interface ---------------------------------------------------------------------

    def begin(self) -> Outcome:
        """Check the configuration with a `reset` (no engine job), then write the trace's first events."""
        outcome = self.connection.reset(self.config)
        if outcome.ok:
            self.current = self._session([])
            self.current.begin()
        return outcome

    def perform(self, op: Mapping[str, Any], expect: str | None = None, record: bool = True) -> Outcome:
        """Queue an op; replay once `chunk` ops are waiting. The op's own outcome is known after the replay."""
        self.plan.append(PlanItem("op", dict(op), expect, record))
        self._unsent += 1
        if self._unsent >= self.chunk and not self._settling:
            self.flush()
        return Outcome("deferred")

    def next_offset(self) -> int:
        """The offset the next publish must carry, counting the publishes not replayed yet."""
        offset = self.current.next_offset()
        for item in self._queued():
            if item.op.get("op") in ("publish", "publish_delayed") and item.op.get("offset") == offset:
                offset += 1
        return offset

    def known_members(self) -> list[str]:
        """The member names as the kit knows them: the last replay's, with the queued joins and leaves."""
        names = dict.fromkeys(self.current.known_members())
        for item in self._queued():
            name, consumer = item.op.get("op"), item.op.get("consumer")
            if name == "add_consumer" and isinstance(consumer, str) and self._joins(item.op):
                names.setdefault(consumer)
            elif name == "remove_consumer":
                names.pop(str(consumer), None)
            elif name == "restart":
                names.clear()
        return sorted(names)

    def _joins(self, op: Mapping[str, Any]) -> bool:
        """Whether a queued join will be accepted, as far as the kit can tell without the replay."""
        refuses_filters = self.config.get("selector") in FILTER_SELECTORS_REFUSED
        return int(op.get("capacity", 0)) >= 1 and not (refuses_filters and op.get("filters"))

    def _queued(self) -> list[PlanItem]:
        """The ops not replayed yet (the tail of the plan)."""
        if not self._unsent:
            return []
        return [item for item in self.plan[len(self.plan) - self._unsent :] if item.kind == "op"]

    def new_anomalies(self) -> list[Anomaly]:
        """Anomalies found since the last call (they appear when a replay is judged)."""
        found = self.current.anomalies[self._reported :]
        self._reported = len(self.current.anomalies)
        return found

    def flush(self) -> None:
        """Replay the whole run so far in one request and judge it; AdapterFault if the engine fails.

        Marks alone (a settle step, `quiescent`) need no replay: the last replay's answers are judged again.
        """
        if not self._unsent and not self._stale:
            return
        ops = [item.op for item in self.plan if item.kind == "op"]
        if self._unsent:
            answer = self.connection.replay(self.config, ops)
            self.replays += 1
            if isinstance(answer, Outcome):
                raise AdapterFault(
                    "protocol",
                    f"replay refused the configuration that reset accepted: {answer.code} ({answer.message})",
                )
            self._outcomes = answer
        session = self._session(ops, self._outcomes)
        session.begin()
        for index, item in enumerate(self.plan):
            if self._halt_from is not None and index >= self._halt_from and self._halts_in(session):
                del self.plan[index:]  # a live settle would not have sent these: the run ends before them
                break
            if item.kind == "op":
                session.perform(item.op, expect=item.expect, record=item.record)
            elif item.kind == "settle":
                session.steps.append(Step(settle=item.order))
            else:
                session.mark_quiescent()
        if self._unsent:
            self._compare_prefix(session)
        self.current = session
        self._unsent = 0
        self._stale = False

    def settle(self, order: str = "oldest", seed: int = 0, record: bool = True) -> None:
        """Drive to quiescence by the rule of `Session.settle` (ks_conformance.settle), one replay per round.

        A round's ops are replayed together, then judged one by one as a live session would: the ops from the
        first at which the settle is halted are dropped from the run, so the run is the live one.
        """
        if record:
            self.plan.append(PlanItem("settle", order=order))
            self._stale = True
        self._settling = True
        try:
            self.flush()
            self._halt_from = len(self.plan)
            self._settle_mark = len(self.current.anomalies)
            if settling.drive(_BatchDriver(self), order, seed):
                self.plan.append(PlanItem("quiescent"))
                self._stale = True
                self.flush()
        finally:
            self._settling = False
            self._halt_from = None

    def _halts_in(self, session: Session) -> bool:
        """The settle's halting rule on a session judged from the replays."""
        return session.diverged or halts(session.anomalies[self._settle_mark :], self.tolerated)

    # --- helpers -----------------------------------------------------------------------------------

    def _session(self, ops: Sequence[Mapping[str, Any]], outcomes: Sequence[Outcome] = ()) -> Session:
        scripted = ScriptedConnection(self.connection.adapter, ops, outcomes)
        return Session(
            scripted,
            self.capabilities,
            self.config,
            check_stats=False,
            implementation=self.implementation,
            tolerated=self.tolerated,
        )

    def _compare_prefix(self, session: Session) -> None:
        """The events of ops replayed before must come back the same (a batch engine replays from a reset)."""
        from ks_conformance.tracefile import events_signature

        signature = events_signature(session.trace)
        previous = self._signature
        differs = next((i for i, (a, b) in enumerate(zip(previous, signature, strict=False)) if a != b), None)
        if differs is None and len(signature) < len(previous):
            differs = len(signature)
        if differs is not None:
            session.harness_exercised["nondeterministic"] += 1
            session.harness_anomaly(
                "nondeterministic",
                [f"the same ops replayed twice from a reset, {self.replays - 1} and {self.replays} replays in"],
                f"the events differ from event {differs + 1} on, but the same operations give the same events "
                "(KS-GEN-5)",
            )
        else:
            session.harness_exercised["nondeterministic"] += 1
        self._signature = signature


class _BatchDriver:
    """A batch session as a settle sees it: each round is one replay of the run so far."""

    def __init__(self, batch: BatchSession) -> None:
        self.batch = batch

    @property
    def state(self) -> Session:
        """The state after the last replay."""
        return self.batch.current

    def halted(self) -> bool:
        """The halting rule, on the last replay's judgement."""
        return self.batch._halts_in(self.batch.current)

    def send(self, ops: Sequence[dict[str, Any]]) -> None:
        """Replay the run with the round's ops (unrecorded) appended; `flush` drops those after a halt."""
        if not ops or self.halted():
            return
        for op in ops:
            self.batch.perform(op, record=False)
        self.batch.flush()


AnySession = Session | BatchSession
"""What the state machine and replays drive: a live session or a batch one (the same interface)."""


def open_session(
    connection: Connection,
    capabilities: Capabilities,
    config: Mapping[str, Any],
    *,
    batch: bool,
    check_stats: bool = True,
    implementation: Mapping[str, Any] | None = None,
    chunk: int = DEFAULT_CHUNK,
    tolerated: Collection[str] = (),
) -> AnySession:
    """A live `Session`, or a `BatchSession` for an engine driven by replays; `tolerated` kinds never stop a settle."""
    if batch:
        return BatchSession(
            connection, capabilities, config, implementation=implementation, chunk=chunk, tolerated=tolerated
        )
    return Session(
        connection, capabilities, config, check_stats=check_stats, implementation=implementation, tolerated=tolerated
    )
