"""The rules of spec section 8 Flow control."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import takewhile
from typing import TYPE_CHECKING

from ks_conformance.explain import Explained, message_clause, unacked_overrun
from ks_conformance.rules import ordering
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, KeyState, Message, OrderedOffsets
    from ks_conformance.checks.state import CheckerState

OVERTAKEN_HOLD = define(
    "overtaken-hold",
    "KS-FLW-3",
    Stage.EVENT,
    Scope.KEY,
    "as `key-reorder`, and the earlier message had been reported `held`",
    witness="the `held` event, publish of m, the delivery",
    exercised="a first delivery while an earlier message of its key has been held",
    needs=lambda a: need(
        a.held_events, "held events (capability held_events); a held message overtaken shows as key-reorder (KS-ORD-1)"
    ),
)


def overtaken_hold(
    key: str, offset: int, pub: int, held: int, held_pub: int, held_seq: int | None, seq: int
) -> Explained:
    """KS-FLW-3."""
    return (
        [message_clause(held, key, held_pub) + f", held at seq {held_seq}", message_clause(offset, key, pub)],
        f"m{offset} was delivered for the first time [seq {seq}] while the held m{held} of the same "
        "key is unresolved and undelivered, but a held message keeps its place (KS-FLW-3)",
        {"offset": offset, "key": key, "earlier": held},
    )


CAPACITY_OVERRUN = define(
    "capacity-overrun",
    "KS-FLW-1",
    Stage.EVENT,
    Scope.CONSUMER,
    (
        "a delivery that leaves its consumer holding more outstanding deliveries than its capacity "
        "(best-effort: delivered minus received)"
    ),
    witness="the `consumer_added`, the outstanding deliveries, the delivery",
    exercised="a delivery to a consumer at capacity minus one",
    needs=lambda a: (
        need(a.capacity, "capability capacity (capacity never binds)")
        or need("capacity" in a.forms("flow_control"), "flow_control capacity (the adapter declares only permits)")
    ),
)


def capacity_overrun(
    offset: int, consumer: str, capacity: int, added_seq: int, outstanding: Sequence[int], seq: int
) -> Explained:
    """KS-FLW-1 (`outstanding`: the seqs of the consumer's outstanding deliveries, ascending)."""
    held = len(outstanding)
    return (
        [
            f"{consumer} joined with capacity {capacity} [seq {added_seq}]",
            f"{consumer} holds {held} outstanding deliveries (seqs {', '.join(map(str, outstanding))})",
        ],
        f"m{offset} was delivered to {consumer} [seq {seq}], leaving it {held + 1} outstanding "
        f"deliveries, more than its capacity (KS-FLW-1)",
        {"offset": offset, "consumer": consumer},
    )


PERMIT_OVERRUN = define(
    "permit-overrun",
    "KS-FLW-4",
    Stage.EVENT,
    Scope.CONSUMER,
    (
        'with `flow_control = "permits"`, a delivery to a consumer whose deliveries since it joined already '
        "equal or exceed its grants (its `capacity`, then every `permits_granted`), other than of a batch's "
        "message that follows its first (KS-BKT-10)"
    ),
    witness="the `consumer_added`, the grants, the delivery",
    exercised="a delivery to a consumer with one permit left",
    needs=lambda a: (
        need("permits" in a.forms("flow_control"), "flow_control permits declared in config_values")
        or need("flow" in a.ops, "op flow (permits nobody can grant are not drawn)")
    ),
)


def permit_overrun(
    offset: int, consumer: str, capacity: int, added_seq: int, grants: Sequence[int], seq: int
) -> Explained:
    """KS-FLW-4 (`grants`: the seqs of the consumer's permits_granted events, ascending)."""
    granted = f", then granted more permits at seqs {', '.join(map(str, grants))}" if grants else ""
    return (
        [f"{consumer} joined with capacity {capacity} [seq {added_seq}]: its first {capacity} permits{granted}"],
        f"m{offset} was delivered to {consumer} [seq {seq}] after its deliveries had used every permit it granted: "
        "a delivery needs a permit (KS-FLW-4)",
        {"offset": offset, "consumer": consumer},
    )


WINDOW_OVERRUN = define(
    "window-overrun",
    "KS-FLW-2",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        "a first delivery of offset o while `window` or more offsets below o are unresolved (with "
        "`park_after` set: unresolved and not parked, KS-ISO-4)"
    ),
    witness="the delivery",
    exercised="a first delivery while at least `window - 1` earlier offsets are unresolved",
    needs=lambda a: (
        need(a.window, "capability window (no read-ahead window)")
        or need("window" in a.forms("read_bound"), "read_bound window (the adapter declares only lookahead)")
    ),
)


def window_overrun(
    key: str, offset: int, pub: int, window: int, below: int, seq: int, parked: int | None = None
) -> Explained:
    """KS-FLW-2 (`parked`: with park_after set, the earlier parked offsets left out of `below`, KS-ISO-4)."""
    unparked = "" if parked is None else f" and not parked ({parked} more are parked, KS-ISO-4)"
    return (
        [message_clause(offset, key, pub), f"window = {window}"],
        f"m{offset} was delivered for the first time [seq {seq}] while {below} earlier offsets are "
        f"unresolved{unparked}, but a first delivery needs fewer than window of them (KS-FLW-2)",
        {"offset": offset, "unresolved_below": below},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def check_flow(st: CheckerState, message: Message, seq: int, first: bool) -> None:
    """KS-FLW-2 at a first delivery: fewer than `window` earlier offsets are unresolved (parked ones left out)."""
    if st.best_effort or not first:
        return
    # req: KS-FLW-2, KS-ISO-4 (parked messages left out of the count)
    window = st.window
    parked = st._parked_below(message.offset)
    below = (st.unresolved_rank(message.offset - 1) if message.offset > 0 else 0) - parked
    if below >= window - 1:
        st._exercise("window-overrun")
    if below >= window and not st._continuing_batch:  # KS-BKT-10: a batch is read and delivered whole
        shown = parked if st.park_after else None
        st._report("window-overrun", seq, [seq], window_overrun(*message.facts, window, below, seq, shown))


def check_overtaken_hold(st: CheckerState, message: Message, state: KeyState, seq: int, first: bool) -> None:
    """KS-FLW-3 at a first delivery: it overtook no earlier message of its key that had been reported `held`
    (judged where key-reorder is: the overtaken message is still undelivered)."""
    offset = message.offset
    if not first or ordering.earlier_in_order(st, state.unresolved, offset) is None:
        return

    def held_before(offsets: OrderedOffsets) -> int | None:
        return next(
            (o for o in takewhile(lambda o: o < offset, offsets) if st.messages[o].held and st.counts_for_order(o)),
            None,
        )

    if held_before(state.unresolved) is not None:
        st._exercise("overtaken-hold")
    if ordering.earlier_in_order(st, state.undelivered, offset) is None:
        return
    held = held_before(state.undelivered)
    if held is not None:
        overtaken = st.messages[held]
        st._report(
            "overtaken-hold",
            seq,
            [overtaken.held_seq, message.publish_seq, seq],
            overtaken_hold(*message.facts, held, overtaken.publish_seq, overtaken.held_seq, seq),
        )


def check_unacked_limit(st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None) -> None:
    """KS-FLW-1 with `max_unacked`: a consumer that reached the limit gets nothing until half of it is acked."""
    if incarnation is None or not st.max_unacked:
        return
    if st.holding(incarnation) >= st.max_unacked - 1 or incarnation.unacked_blocked_seq is not None:
        st._exercise("capacity-overrun")
    if incarnation.unacked_blocked_seq is not None and not st._continuing_batch:
        st._report(
            "capacity-overrun",
            seq,
            [incarnation.unacked_blocked_seq, seq],
            unacked_overrun(
                message.offset,
                incarnation.name,
                st.max_unacked,
                incarnation.unacked_blocked_seq,
                st.holding(incarnation),
                seq,
            ),
        )


def check_capacity(st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None) -> None:
    """KS-FLW-1 and KS-FLW-4 at a delivery: the consumer had a permit (and is charged one), or, without permits,
    room under its capacity. A batch's later messages follow its first (KS-BKT-10)."""
    if incarnation is None:
        return
    name = incarnation.name
    if incarnation.permits is not None:
        if incarnation.permits == 1:
            st._exercise("permit-overrun")
        if incarnation.permits < 1 and not st._continuing_batch:
            st._report(
                "permit-overrun",
                seq,
                [incarnation.added_seq, *incarnation.grants, seq],
                permit_overrun(
                    message.offset, name, incarnation.capacity, incarnation.added_seq, incarnation.grants, seq
                ),
            )
        incarnation.permits -= 1
        return
    held = st.holding(incarnation)
    if held >= incarnation.capacity - 1:
        st._exercise("capacity-overrun")
    if held + 1 > incarnation.capacity and not st._continuing_batch:
        seqs = st.holding_seqs(incarnation)
        st._report(
            "capacity-overrun",
            seq,
            [incarnation.added_seq, *seqs, seq],
            capacity_overrun(message.offset, name, incarnation.capacity, incarnation.added_seq, seqs, seq),
        )
