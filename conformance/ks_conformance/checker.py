"""The trace checker: events in, anomalies out (spec/checking.md).

`Checker` reconstructs the abstract state of checking.md section 1 from the events alone and reports
an `Anomaly` whenever an event, or the state at the end of an op, a phase of a tick or a quiescent
point, contradicts a requirement. It is incremental: feed it one event at a time (the conformance
harness does, after every operation) or a whole trace file (`check_trace`). It never consults a
reference implementation: where the spec leaves a choice (which consumer gets a key), any allowed
outcome passes.

Op boundaries. A trace records the ops `ack` and `nack` only through their effects; the checker
treats an `ack`, `ack_ignored`, `nack` or `nack_ignored` event as the start of an implicit op (an
ack op's first effect is always one of these), so that a tick's phases and the end-of-op checks are
not smeared over the acks that follow it. A harness that knows the boundaries calls `begin_op` and
`end_op` itself.

Exercised counts. A check counts as exercised when the situation of checking.md's last column occurs.
Some of those situations cannot occur with a correct implementation (they are the violation itself, as
for retry-overtaken, or key-reorder in the strict profile) or hardly ever do. For the ordering and
exclusivity checks an op that ends where the dispatcher could have broken the rule counts as well: a
later message of a key waiting behind an earlier undelivered, held, awaiting or blocked one, or a key
(or bucket) with deliveries outstanding from an earlier epoch and messages still to deliver.

Blocked keys. In the owner profile several prefetched messages of one key can be poisoned in the same
phase 2, so a key may have more than one blocked message; a `release` makes all of them pending again
with a fresh budget and a `skip` must resolve all of them (the spec speaks of "its blocked message").

Layout changes. With selector `buckets`, a rollover or split changes which bucket, and so which
member, a key maps to while the membership stays the same; the checker counts a `segment_created`
with a predecessor as the start of a new epoch, or KS-ASN-1 would contradict KS-BKT-3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from inspect import isfunction

from ks_spec.trace import OP_EVENTS

from ks_conformance import rules
from ks_conformance.checks import buckets, delivery, end_of_op, membership, quiescence, resolution
from ks_conformance.checks.changes import SHOWN
from ks_conformance.checks.end_of_op import close_op, open_op, tick_phase
from ks_conformance.checks.hooks import EVENT_CHECKS
from ks_conformance.checks.records import Incarnation, Message, Problem
from ks_conformance.checks.state import ACK_CLASS, DANUBE_PHASE_3, CheckerState, Event, phase_of


class Checker(CheckerState):
    """The incremental trace checker of spec/checking.md: `feed` events, read `anomalies` and `exercised`."""

    def begin_op(self, kind: str) -> None:
        """Open an op that has no op event (`ack`, `nack`): its ack-class effect will not open another."""
        end_of_op.close_op(self)
        rules.buckets.check_layout(self)
        end_of_op.open_op(self, kind, self.last_seq + 1)
        self._expect_ack_class = kind in ("ack", "nack")

    def end_op(self) -> None:
        """Close the open op and run the end-of-op checks (the harness calls this after every op)."""
        end_of_op.close_op(self)
        rules.buckets.check_layout(self)

    def finish(self) -> None:
        """Close the last op (call once, after the last event)."""
        end_of_op.close_op(self)
        rules.buckets.check_layout(self)

    def abandon(self) -> None:
        """Drop the open op without its end-of-op checks: the history was cut off in the middle of it."""
        self.op = None
        self.batch_run = None
        self._batch_findings = []
        self._expect_ack_class = False

    def feed(self, event: Event) -> None:
        """Judge one well-formed event (trace format v1) and update the state."""
        # Written for speed (it runs once per event): each attribute read once, the rare cases behind one test.
        self.events_seen += 1
        kind = event["event"]
        seq = int(event["seq"])
        if self.created_in_op or self.layout_findings:
            if (self.created_in_op and kind != "segment_created") or (
                self.layout_findings and kind not in LAYOUT_EVENTS
            ):
                # req: KS-BKT-11 (a layout change's segment events have ended; a seal begins the next)
                rules.buckets.check_layout(self)
        if kind in OP_EVENTS:
            close_op(self)
            self.now = int(event["tick"])
            open_op(self, kind, seq)
        elif kind in ACK_CLASS:
            if (self._expect_ack_class or self.explicit_ops) and self.op is not None:
                self._expect_ack_class = False
                self.now = int(event["tick"])
            else:
                close_op(self)
                self.now = int(event["tick"])
                open_op(self, kind, seq)
        else:
            self.now = int(event["tick"])
            op = self.op
            if op is not None and op.kind == "tick":
                phase = phase_of(event)
                if phase is not None:
                    if phase == 5 and op.phase <= 3 and kind in DANUBE_PHASE_3 and self.danube_ticks:
                        phase = 3  # req: KS-GEN-7 (tick_order danube: phase 3 ends with a deliver step)
                    tick_phase(self, event, phase)
        self.last_seq = seq
        if self.heartbeat_reads and kind in DANUBE_PHASE_3:
            offset = int(event["offset"])
            if self.delta_log is not None and kind != "deliver":
                self.delta_log.append((seq, SHOWN, offset, None))
            if offset >= self.read_below:
                self.read_below = offset + 1  # req: KS-GEN-8 (a message named was read, and all before it)
        handler = HANDLERS.get(kind)
        if handler is None:
            self._problem(seq, f"event kind {kind!r} is unknown to the checker")
            return
        checks = EVENT_CHECKS.get(kind)
        if checks:
            for check in checks:
                check(self, event)
        handler(self, event)


HANDLERS: dict[str, Callable[[CheckerState, Event], None]] = {
    name.removeprefix("on_"): function
    for module in (membership, quiescence, buckets, delivery, resolution)
    for name, function in vars(module).items()
    if name.startswith("on_") and isfunction(function)
}
"""Event kind -> the function that judges it and updates the state (`on_<kind>` in the checks' modules)."""
if set(EVENT_CHECKS) - set(HANDLERS):  # a rule hooked to a kind no event has would never run
    raise ValueError(f"checks registered for unknown event kinds: {sorted(set(EVENT_CHECKS) - set(HANDLERS))}")

LAYOUT_EVENTS = ("segment_sealed", "segment_created")
"""The op events of one layout change, which a reported layout is judged after (KS-BKT-11)."""


def check_events(events: Iterable[Event]) -> Checker:
    """Feed a whole history to a fresh checker and close it."""
    checker = Checker()
    for event in events:
        checker.feed(event)
    checker.finish()
    return checker


__all__ = [
    "ACK_CLASS",
    "Checker",
    "Event",
    "Incarnation",
    "Message",
    "Problem",
    "check_events",
    "phase_of",
]
