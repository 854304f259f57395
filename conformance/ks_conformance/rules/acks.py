"""The rules of spec section 9 Acknowledgements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance.explain import Explained, ended_delivery, holder_ignored, last_delivered, message_clause
from ks_conformance.rules import resolutions
from ks_conformance.rules.registry import NO_ENDING, Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Message
    from ks_conformance.checks.state import CheckerState, Event

STALE_ACK_ACCEPTED = define(
    "stale-ack-accepted",
    "KS-ACK-2",
    Stage.EVENT,
    Scope.KEY,
    "an `ack` from a consumer incarnation without an outstanding delivery of the message",
    witness="the last delivery of the message, the `ack`",
    exercised="an ack from a consumer that does not hold the message",
)


def stale_ack_accepted(
    key: str,
    offset: int,
    pub: int,
    last_delivery: int | None,
    holder: str | None,
    holder_seq: int | None,
    consumer: str,
    seq: int,
) -> Explained:
    """KS-ACK-2 (`holder`: who holds its outstanding delivery, at `holder_seq`, or None)."""
    held_by = f"{holder} [seq {holder_seq}]" if holder is not None else "nobody"
    return (
        [
            message_clause(offset, key, pub) + last_delivered(last_delivery),
            f"its outstanding delivery is held by {held_by}",
        ],
        f"an ack from {consumer} [seq {seq}], which does not hold it, resolved m{offset}, but such an ack "
        "must be ignored and recorded (KS-ACK-2)",
        {"offset": offset, "consumer": consumer},
    )


HOLDER_ACK_IGNORED = define(
    "holder-ack-ignored",
    "KS-ACK-1",
    Stage.EVENT,
    Scope.KEY,
    "an `ack_ignored` from the incarnation that holds the outstanding delivery",
    witness="the delivery, the `ack_ignored`",
    exercised="an ack from the holder",
)


def holder_ack_ignored(key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int) -> Explained:
    """KS-ACK-1."""
    return holder_ignored("ack", "KS-ACK-1", key, offset, pub, holder, delivery_seq, seq)


ZOMBIE_ACCEPTED = define(
    "zombie-accepted",
    "KS-ACK-3",
    Stage.EVENT,
    Scope.KEY,
    (
        "in a `zombie_ack` or `zombie_nack` op, an `ack` or `nack` effect (with `ack_by_id`, a `zombie_ack`'s"
        " `ack` excepted: it is judged as a resolution, `double-resolution` if the message is resolved "
        "already)"
    ),
    witness="the zombie op, the ack or nack",
    exercised="a `zombie_ack` or `zombie_nack`",
    needs=lambda a: (
        need(bool({"zombie_ack", "zombie_nack"} & a.ops), "op zombie_ack or zombie_nack") or need(a.ended, NO_ENDING)
    ),
)


def zombie_accepted(
    key: str,
    offset: int,
    pub: int,
    op: str,
    consumer: str,
    attempt: int,
    op_seq: int,
    holder: str | None,
    holder_seq: int | None,
    effect: str,
    seq: int,
) -> Explained:
    """KS-ACK-3 (`effect`: the `ack` or `nack` the late result caused; `holder`: who holds m's current delivery)."""
    held_by = f"{holder} [seq {holder_seq}]" if holder is not None else "nobody"
    did = "resolved" if effect == "ack" else "failed the current delivery of"
    return (
        [
            message_clause(offset, key, pub),
            ended_delivery(consumer, offset, attempt, op, op_seq),
            f"m{offset}'s current delivery is held by {held_by}",
        ],
        f"the {effect} at seq {seq} {did} m{offset} on that result, but a result for a delivery that ended must be "
        "ignored and recorded, with no other effect (KS-ACK-3)",
        {"offset": offset, "consumer": consumer, "attempt": attempt},
    )


ZOMBIE_ACK_IGNORED = define(
    "zombie-ack-ignored",
    "KS-ACK-3",
    Stage.EVENT,
    Scope.KEY,
    "with `ack_by_id = true`, an `ack_ignored` answering a `zombie_ack` of an unresolved message",
    witness="the `zombie_ack`, the `ack_ignored`",
    exercised="a `zombie_ack` of an unresolved message with `ack_by_id = true`",
    needs=lambda a: (
        need("zombie_ack" in a.ops, "op zombie_ack")
        or need(a.ended, NO_ENDING)
        or need(True in a.forms("ack_by_id"), "ack_by_id = true (declared in config_values)")
    ),
)


def zombie_ack_ignored(
    key: str, offset: int, pub: int, consumer: str, attempt: int, op_seq: int, seq: int
) -> Explained:
    """KS-ACK-3 under `ack_by_id`: a zombie ack of an unresolved message that was ignored."""
    return (
        [
            message_clause(offset, key, pub) + ", unresolved",
            ended_delivery(consumer, offset, attempt, "zombie_ack", op_seq),
            "the configuration declares ack_by_id = true",
        ],
        f"the ack_ignored at seq {seq} left m{offset} unresolved, but with ack_by_id an ack names the message, so "
        "it must resolve it (KS-ACK-3)",
        {"offset": offset, "consumer": consumer, "attempt": attempt},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def zombie_op(st: CheckerState, event: Event) -> None:
    """A late result for an ended delivery: its ack-class effect belongs to this op (KS-ACK-3)."""
    op = st.op
    assert op is not None
    st._expect_ack_class = True
    message = st._message_of(event)
    if message is None or st.best_effort:
        return
    name, attempt = str(event["consumer"]), int(event["attempt"])
    if st.ended_deliveries(message).get(attempt) != name:
        st._problem(
            int(event["seq"]),
            f"{event['event']} names a delivery of offset {message.offset} to {name!r} (attempt {attempt}) that "
            "has not ended, or was never made, since the last restart",
        )
        return
    op.zombie = (name, attempt)
    # req: KS-ACK-3
    st._exercise("zombie-accepted")
    if op.kind == "zombie_ack" and st.config.get("ack_by_id") and not message.resolved:
        st._exercise("zombie-ack-ignored")


def zombie_answered(st: CheckerState, message: Message, event: Event, accepted: bool) -> bool:
    """Judge an ack-class effect of a zombie op (KS-ACK-3); True if it was one (the caller then stops)."""
    op = st.op
    if op is None or op.zombie is None or st.best_effort:
        return False
    name, attempt = op.zombie
    seq = int(event["seq"])
    by_id = op.kind == "zombie_ack" and bool(st.config.get("ack_by_id"))
    kind = str(event["event"])
    if kind == "ack" and by_id:
        # req: KS-ACK-3 (ack_by_id: the ack names the message and ends its outstanding delivery; a second
        # resolution of it is double-resolution, KS-RES-1)
        resolutions.resolve(st, message, "acked", seq)
        return True
    if not accepted:
        if by_id and kind == "ack_ignored" and not message.resolved:
            # req: KS-ACK-3 (ack_by_id)
            st._report(
                "zombie-ack-ignored",
                seq,
                [op.seq, seq],
                zombie_ack_ignored(*message.facts, name, attempt, op.seq, seq),
            )
        return True
    delivery = message.outstanding
    holder, holder_seq = (delivery.holder.name, delivery.seq) if delivery is not None else (None, None)
    # req: KS-ACK-3
    st._report(
        "zombie-accepted",
        seq,
        [op.seq, seq],
        zombie_accepted(*message.facts, op.kind, name, attempt, op.seq, holder, holder_seq, kind, seq),
    )
    if kind == "ack":
        resolutions.resolve(st, message, "acked", seq)
    elif not message.resolved:
        st._fail(message, "nack", seq)
    else:
        st._end_delivery(message)
    return True


def check_ack_by_holder(st: CheckerState, message: Message, name: str, holds: bool, seq: int) -> None:
    """KS-ACK-2 and KS-GEN-3 at an accepted `ack`: it came from the consumer that holds the delivery (the handler
    sends an answer a seek cut to KS-CUR-11's check instead)."""
    if holds:
        st._exercise("holder-ack-ignored")
    else:
        st._exercise("stale-ack-accepted")
        delivery = message.outstanding
        holder, holder_seq = (delivery.holder.name, delivery.seq) if delivery is not None else (None, None)
        st._report(
            "stale-ack-accepted",
            seq,
            [message.last_delivery_seq, seq],
            stale_ack_accepted(*message.facts, message.last_delivery_seq, holder, holder_seq, name, seq),
        )
