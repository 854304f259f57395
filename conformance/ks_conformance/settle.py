"""Settling: the one drive to quiescence behind a scenario's `settle` step (spec/scenario-format.md section 3).

`drive` is the rule of the spec text, written once. It decides in *rounds*: each round's ops are computed
from the state (spec/checking.md section 1) after the previous round, then sent in order. A live `Session`
sends them one at a time; a `BatchSession` sends a round in one replay. Either way, the settle *halts* before
the first op at which the run has diverged or shows, since the settle began, an anomaly of a kind it does not
tolerate (a batch replay judges the ops of a round one by one and drops those after that point), so both
modes send the same ops and record the same events.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from ks_spec.config import CONFIG_DEFAULTS

from ks_conformance.checker import Checker
from ks_conformance.protocol import Capabilities, Outcome

MAX_ROUNDS = 200
"""Rounds of the main loop (one tick each) before a settle gives up waiting."""
MAX_PASSES = 1000
"""Ack passes in one acking phase."""
STALE_PASSES = 3
"""Ack passes in a row that move nothing forward before an acking phase ends (and time moves instead)."""
TIMERS = ("backoff_max", "persist_interval", "persist_flush", "ack_timeout", "evict_after")
"""The configuration's delays: a settle stops ticking once nothing moved for longer than the largest."""


class Session(Protocol):
    """What a settle reads of a session (`harness.Session` is one): declared here so settling imports no harness."""

    capabilities: Capabilities
    skipped_ops: dict[str, str]
    checker: Checker
    config: dict[str, Any]

    def catch_all_ops(self, ops: set[str]) -> list[dict[str, Any]]:
        """The ops that give the subscription a member taking every key."""

    def permit_grants(self, ops: set[str]) -> list[dict[str, Any]]:
        """`flow` ops for the members out of permits."""

    def ordered_deliveries(self, order: str, shuffle: random.Random) -> list[tuple[str, int]]:
        """The outstanding deliveries (holder, offset) in the settle's order."""

    def perform(self, op: dict[str, Any], expect: str | None = None, record: bool = True) -> Outcome:
        """Send one op and judge its events."""

    def _progress(self) -> tuple[int, int]:
        """A measure that grows whenever the subscription moves forward."""

    def _quiet(self) -> bool:
        """Nothing outstanding, nothing unresolved, the cursor persisted to the end."""

    def _halted(self) -> bool:
        """True once the run diverged or this settle showed an anomaly it does not tolerate."""


class Driver(Protocol):
    """What a settle drives: a session's state after the ops sent so far, and a way to send a round."""

    @property
    def state(self) -> Session:
        """The state after every op sent so far (a live session, or the last replay's)."""

    def halted(self) -> bool:
        """True once the run diverged or an op of this settle showed an anomaly of a kind not tolerated."""

    def send(self, ops: Sequence[dict[str, Any]]) -> None:
        """Perform the round's ops in order, none from the first one at which the settle is halted."""


def drive(driver: Driver, order: str, seed: int) -> bool:
    """Drive to quiescence (spec section 19); True when it ended unhalted (the caller records `quiescent`)."""
    if driver.halted():
        return False
    state = driver.state
    ops = set(state.capabilities.ops) - set(state.skipped_ops)
    shuffle = random.Random(seed)
    if "remove_consumer" in ops:
        leaving = [m.name for m in state.checker.members.values() if not m.connected]
        driver.send([{"op": "remove_consumer", "consumer": name} for name in leaving])
    driver.send(driver.state.catch_all_ops(ops))
    config = {**CONFIG_DEFAULTS, **state.config}
    # req: KS-GEN-9 (a timer may fire up to timer_slack ticks late), KS-GEN-8 (a read waits for the next tick)
    patience = max(*(int(config[name]) for name in TIMERS), 1) + int(config["timer_slack"]) + 2
    idle = 0
    for _ in range(MAX_ROUNDS):
        if driver.halted():
            break
        before = driver.state._progress()
        driver.send(driver.state.permit_grants(ops))
        _ack_passes(driver, order, shuffle)
        if "release" in ops:
            for key in sorted(driver.state.checker.keys):
                keyed = driver.state.checker.keys.get(key)
                if driver.halted():
                    break
                if keyed is not None and keyed.blocked:
                    driver.send([{"op": "release", "key": key}])
                    _ack_passes(driver, order, shuffle)
        if driver.halted() or driver.state._quiet() or "tick" not in ops:
            break
        driver.send([{"op": "tick"}])
        # req: KS-ORD-7 (a delayed message not yet due is waited for, however far ahead its due tick is)
        idle = 0 if driver.state._progress() != before or driver.state.checker.delays_pending() else idle + 1
        if idle > patience:
            break
    return not driver.halted()


def acks(state: Session, order: str, shuffle: random.Random) -> list[dict[str, Any]]:
    """One ack pass: an ack for every delivery outstanding now, by its deliver event's seq (or shuffled)."""
    deliveries = state.ordered_deliveries(order, shuffle)
    return [{"op": "ack", "consumer": holder, "offset": offset} for holder, offset in deliveries]


def _ack_passes(driver: Driver, order: str, shuffle: random.Random) -> None:
    """Ack passes until nothing is outstanding, or STALE_PASSES passes in a row moved nothing forward."""
    stale = 0
    for _ in range(MAX_PASSES):
        planned = acks(driver.state, order, shuffle)
        if not planned or driver.halted() or stale >= STALE_PASSES:
            return
        before = driver.state._progress()
        driver.send(planned)
        stale = 0 if driver.state._progress() != before else stale + 1


class LiveDriver:
    """A live session: each op is sent on its own, the settle halting between any two."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def state(self) -> Session:
        """The session itself: it knows the state after every op."""
        return self.session

    def halted(self) -> bool:
        """The session's own halting rule."""
        return self.session._halted()

    def send(self, ops: Sequence[dict[str, Any]]) -> None:
        """Perform each op (unrecorded: the scenario keeps the `settle` step), stopping once halted."""
        for op in ops:
            if self.session._halted():
                return
            self.session.perform(op, record=False)
