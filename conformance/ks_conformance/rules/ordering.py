"""The rules of spec section 6 Ordering."""

from __future__ import annotations

from itertools import takewhile
from typing import TYPE_CHECKING

from ks_conformance.explain import Explained, delayed_clause, message_clause
from ks_conformance.rules.registry import NO_DELAY, Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import KeyState, Message, OrderedOffsets
    from ks_conformance.checks.state import CheckerState

KEY_REORDER = define(
    "key-reorder",
    "KS-ORD-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "a first delivery (deliveries since restart = 0) of m while an earlier message of m's key is "
        "unresolved and has no delivery since restart"
    ),
    witness="publish of the earlier message, publish of m, the delivery",
    exercised="a first delivery while an earlier message of its key is unresolved",
)


def key_reorder(key: str, offset: int, pub: int, earlier: int, earlier_pub: int, seq: int) -> Explained:
    """KS-ORD-1."""
    return (
        [message_clause(earlier, key, earlier_pub), message_clause(offset, key, pub)],
        f"m{earlier} precedes m{offset} in key {key!r} and was never delivered, yet m{offset} was "
        f"delivered for the first time [seq {seq}] while m{earlier} is unresolved (KS-ORD-1)",
        {"offset": offset, "key": key, "earlier": earlier},
    )


STRICT_OVERLAP = define(
    "strict-overlap",
    "KS-ORD-2",
    Stage.EVENT,
    Scope.KEY,
    "strict profile: a delivery of m while an earlier message of m's key is unresolved",
    witness="publish of the earlier message, the delivery",
    exercised="a delivery while another message of its key is unresolved",
)


def strict_overlap(key: str, offset: int, pub: int, earlier: int, earlier_pub: int, seq: int) -> Explained:
    """KS-ORD-2."""
    return (
        [message_clause(earlier, key, earlier_pub), message_clause(offset, key, pub)],
        f"m{earlier} precedes m{offset} in key {key!r} and is unresolved, yet "
        f"m{offset} was delivered [seq {seq}]; the strict profile delivers nothing of a key while an "
        "earlier message of it is unresolved (KS-ORD-2)",
        {"offset": offset, "key": key, "earlier": earlier},
    )


RETRY_OVERTAKEN = define(
    "retry-overtaken",
    "KS-ORD-3",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of m while an earlier message of its key is retrying or returned",
    witness="the failure (nack, timeout, or the holder leaving) of the earlier message, the delivery",
    exercised="a delivery while an earlier message of its key awaits redelivery",
    needs=lambda a: need(a.failures or "remove_consumer" in a.ops, "op nack, ack_timeout or remove_consumer"),
)


def retry_overtaken(
    key: str, offset: int, pub: int, waiting: int, waiting_pub: int, awaiting_seq: int | None, seq: int
) -> Explained:
    """KS-ORD-3."""
    return (
        [
            message_clause(waiting, key, waiting_pub) + f", awaiting redelivery since seq {awaiting_seq}",
            message_clause(offset, key, pub),
        ],
        f"m{offset} was delivered [seq {seq}] before m{waiting}, an earlier message of its key that "
        "awaits redelivery (KS-ORD-3)",
        {"offset": offset, "key": key, "earlier": waiting},
    )


DELIVERED_BEFORE_DUE = define(
    "delivered-before-due",
    "KS-ORD-5",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of a delayed message (a `publish` with `deliver_at`) at a tick before its `deliver_at`",
    witness="the `publish`, the delivery",
    exercised="a delayed message is published with a due tick ahead",
    needs=lambda a: need(a.delaying, NO_DELAY),
)


def delivered_before_due(key: str, offset: int, pub: int, deliver_at: int, now: int, seq: int) -> Explained:
    """KS-ORD-5."""
    return (
        [delayed_clause(offset, key, pub, deliver_at)],
        f"m{offset} was delivered [seq {seq}] at tick {now}, before its due tick {deliver_at}, but a delayed "
        "message must not be delivered before it is due (KS-ORD-5)",
        {"offset": offset, "key": key, "deliver_at": deliver_at, "tick": now},
    )


BLOCKED_BEHIND_DELAYED = define(
    "blocked-behind-delayed",
    "KS-ORD-6",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "where `idle-while-ready` would report an ordinary message m (no `deliver_at`) if the delayed "
        "messages of m's key not yet due were left out of its key (with `timer_slack = s`: not yet due or "
        "fewer than s ticks past due; a key with an undelivered delayed message past due but within the slack"
        " is not judged), and at least one earlier such message was; reported instead of `idle-while-ready`"
    ),
    witness="the publish of the first such delayed message, the publish of m, the op",
    exercised="a message is published while an earlier delayed message of its key is not yet due",
    needs=lambda a: need(a.delaying, NO_DELAY),
)


def blocked_behind_delayed(
    key: str, offset: int, pub: int, delayed: int, delayed_pub: int, deliver_at: int, seq: int
) -> Explained:
    """KS-ORD-6 (`delayed`: the earlier message of the key, not yet due)."""
    return (
        [delayed_clause(delayed, key, delayed_pub, deliver_at), message_clause(offset, key, pub)],
        f"at the end of the op [seq {seq}] m{offset} is ready, within the read bound, and every member that could "
        f"take it has room, yet it waits behind m{delayed}, which is not due yet; a message not yet due holds back "
        "no later message of its key (KS-ORD-6)",
        {"offset": offset, "key": key, "delayed": delayed, "deliver_at": deliver_at},
    )


DUE_LEFT_WAITING = define(
    "due-left-waiting",
    "KS-ORD-7",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "where `idle-while-ready` would report m (earlier delayed messages of its key not yet due left out, "
        "as for `blocked-behind-delayed`), m a delayed message at least `timer_slack` ticks past its "
        "`deliver_at`; reported instead of `idle-while-ready`"
    ),
    witness="the publish of m, the op",
    exercised="an op ends with a delayed message unresolved and due (past its `deliver_at` and the slack)",
    needs=lambda a: need(a.delaying, NO_DELAY),
)


def due_left_waiting(key: str, offset: int, pub: int, deliver_at: int, slack: int, now: int, seq: int) -> Explained:
    """KS-ORD-7 (`slack`: the declared timer_slack, KS-GEN-9)."""
    late = f" and the timer slack of {slack}" if slack else ""
    return (
        [delayed_clause(offset, key, pub, deliver_at)],
        f"at the end of the op [seq {seq}], at tick {now}, past its due tick{late}, m{offset} is ready, within the "
        "read bound, and every member that could take it has room, yet it was not delivered; once due a delayed "
        "message is as ready as any other (KS-ORD-7)",
        {"offset": offset, "key": key, "deliver_at": deliver_at, "tick": now},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def report_delay_wait(st: CheckerState, message: Message, delayed_before: int | None, seq: int) -> None:
    """An idle message a delayed one explains: it is a delayed message past its due tick, and the slack, that
    nobody got (KS-ORD-7), or an ordinary one waiting behind a delayed message not yet due (KS-ORD-6). A due
    delayed message behind another not yet due is the first: its own falling due is the missing step."""
    if delayed_before is not None and message.deliver_at is None:
        # req: KS-ORD-6
        delayed = st.messages[delayed_before]
        assert delayed.deliver_at is not None
        st._report(
            "blocked-behind-delayed",
            seq,
            [delayed.publish_seq, message.publish_seq, seq],
            blocked_behind_delayed(*message.facts, delayed.offset, delayed.publish_seq, delayed.deliver_at, seq),
        )
        return
    # req: KS-ORD-7
    assert message.deliver_at is not None
    st._report(
        "due-left-waiting",
        seq,
        [message.publish_seq, seq],
        due_left_waiting(*message.facts, message.deliver_at, st.timer_slack, st.now, seq),
    )


def check_due(st: CheckerState, message: Message, seq: int) -> None:
    """A delayed message is not delivered before its due tick (KS-ORD-5); late by the slack at most is the
    idle checks' business (KS-ORD-7)."""
    deliver_at = message.deliver_at
    assert deliver_at is not None
    if st.now < deliver_at:
        # req: KS-ORD-5
        st._report(
            "delivered-before-due",
            seq,
            [message.publish_seq, seq],
            delivered_before_due(*message.facts, deliver_at, st.now, seq),
        )


def first_in_order(st: CheckerState, offsets: OrderedOffsets, before: int) -> int | None:
    """The first of `offsets` below `before` that holds its place in its key's order (KS-ORD-6): a delayed
    message not yet due is left out (an ordinary one always counts, so without delays this is `first()`)."""
    if not st.delays_seen:
        return offsets.first()
    return next((o for o in takewhile(lambda o: o < before, offsets) if st.counts_for_order(o)), None)


def earlier_in_order(st: CheckerState, offsets: OrderedOffsets, offset: int) -> int | None:
    """The first of `offsets` that holds its place before `offset` in its key's order, if any."""
    earlier = first_in_order(st, offsets, offset)
    return earlier if earlier is not None and earlier < offset else None


def check_key_reorder(st: CheckerState, message: Message, state: KeyState, seq: int, first: bool) -> None:
    """KS-ORD-1 at a first delivery: no earlier message of its key is still undelivered."""
    if not first or earlier_in_order(st, state.unresolved, message.offset) is None:
        return
    st._exercise("key-reorder")
    earlier = earlier_in_order(st, state.undelivered, message.offset)
    if earlier is not None:
        previous = st.messages[earlier]
        st._report(
            "key-reorder",
            seq,
            [previous.publish_seq, message.publish_seq, seq],
            key_reorder(*message.facts, earlier, previous.publish_seq, seq),
        )


def check_strict_overlap(st: CheckerState, message: Message, state: KeyState, seq: int) -> None:
    """KS-ORD-2 (strict profile) at a delivery: no earlier message of its key is unresolved."""
    if st.profile != "strict":
        return
    offset = message.offset
    others = len(state.unresolved) - (1 if offset in state.unresolved else 0)
    if others > 0:
        st._exercise("strict-overlap")
    earliest = earlier_in_order(st, state.unresolved, offset)
    if earliest is not None:
        previous = st.messages[earliest]
        st._report(
            "strict-overlap",
            seq,
            [previous.publish_seq, seq],
            strict_overlap(*message.facts, earliest, previous.publish_seq, seq),
        )


def check_retry_overtaken(st: CheckerState, message: Message, state: KeyState, seq: int) -> None:
    """KS-ORD-3 at a delivery: no earlier message of its key is awaiting its retry."""
    if st.best_effort:
        return
    awaiting = [o for o in state.awaiting if o < message.offset]
    if awaiting:
        st._exercise("retry-overtaken")
        waiting = st.messages[min(awaiting)]
        st._report(
            "retry-overtaken",
            seq,
            [waiting.awaiting_seq, seq],
            retry_overtaken(*message.facts, waiting.offset, waiting.publish_seq, waiting.awaiting_seq, seq),
        )
