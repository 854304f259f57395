"""The rules of spec section 4 Assignment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance.checks.selectors import STABLE_SELECTORS
from ks_conformance.explain import Explained, message_clause, only_changed
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, KeyState, Message
    from ks_conformance.checks.state import CheckerState

KEY_MOVED = define(
    "key-moved",
    "KS-ASN-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "a delivery of key k to c when k was delivered to another consumer in the same membership epoch "
        "(selector `buckets`: a message of the same segment)"
    ),
    witness="the earlier delivery, the delivery",
    exercised="a second delivery of a key within one epoch",
    needs=lambda a: need(bool(a.selectors - {"any"}), "a selector with key affinity (not any)"),
)


def key_moved(key: str, offset: int, pub: int, previous: str, previous_seq: int, consumer: str, seq: int) -> Explained:
    """KS-ASN-1."""
    return (
        [f"key {key!r} was delivered to {previous} at seq {previous_seq}", message_clause(offset, key, pub)],
        f"m{offset} was delivered to {consumer} [seq {seq}] with no membership change since, but a key "
        "has one target per membership epoch (KS-ASN-1)",
        {"key": key, "consumer": consumer, "other": previous},
    )


UNSTABLE_ASSIGNMENT = define(
    "unstable-assignment",
    "KS-ASN-2",
    Stage.EVENT,
    Scope.KEY,
    (
        "selectors other than `buckets` and `any`: key k was last delivered in epoch e to c1 and is delivered"
        " in epoch e + 1 to c2 ≠ c1, and the change between them was neither the join of c2 (under "
        "`partitions`, not even that) nor the leave of c1"
    ),
    witness="both deliveries, the membership event",
    exercised="a key delivered in two consecutive epochs",
    needs=lambda a: need(bool(a.selectors - {"buckets", "any"}), "a selector other than buckets and any"),
)


def unstable_assignment(
    key: str,
    offset: int,
    previous: str,
    previous_seq: int,
    changed: str,
    change: str,
    change_seq: int,
    consumer: str,
    selector: object,
    seq: int,
) -> Explained:
    """KS-ASN-2 (`change`: "join" or "leave", by `changed`)."""
    rule = (
        "a membership change moves a key only away from a leaving consumer: a joiner takes no partition from a "
        "present consumer (KS-ASN-2)"
        if selector == "partitions"
        else "a membership change moves a key only to a joining consumer or away from a leaving one (KS-ASN-2)"
    )
    return (
        [
            f"key {key!r} was delivered to {previous} at seq {previous_seq}",
            "then " + only_changed(changed, change, change_seq),
        ],
        f"m{offset} went to {consumer} [seq {seq}], but with selector {selector!r} {rule}",
        {"key": key, "consumer": consumer, "other": previous},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def seeks_only(st: CheckerState, epoch: int) -> bool:
    """Whether every epoch begun since `epoch` was begun by a seek: the membership epoch is still `epoch`'s."""
    return all(st.epoch_change.get(later, ("",))[0] == "seek" for later in range(epoch + 1, st.epoch + 1))


def check_assignment(
    st: CheckerState, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
) -> None:
    """KS-ASN-1 and KS-ASN-2 at a delivery: within an epoch a key stays with its consumer; across a membership
    change a stable selector moves it only to a joiner or away from a leaver."""
    last = state.last_delivery
    if last is None:
        return
    epoch, previous, previous_seq, segment = last
    if segment != message.segment:
        return  # selector `buckets`: each segment has its own N, so its own bucket and target (KS-BKT-3)
    if epoch == st.epoch or seeks_only(st, epoch):
        # req: KS-ASN-1 (a seek starts a new epoch for draining but keeps the membership, spec section 14)
        st._exercise("key-moved")
        if previous.name != name and not st.controller_moved(message.segment, message.bucket, name, previous_seq):
            st._report(
                "key-moved",
                seq,
                [previous_seq, seq],
                key_moved(*message.facts, previous.name, previous_seq, name, seq),
            )
    elif epoch == st.epoch - 1 and st.config["selector"] in STABLE_SELECTORS:
        change, changed, change_seq = st.epoch_change[st.epoch]
        if change == "restart":
            return
        # req: KS-ASN-2 (under `partitions` a joiner takes no key from a present member)
        st._exercise("unstable-assignment")
        moved = previous is not incarnation and previous.name != name
        to_joiner = change == "join" and changed is incarnation and st.config["selector"] != "partitions"
        allowed = to_joiner or (change == "leave" and changed is previous)
        if moved and not allowed:
            assert changed is not None
            st._report(
                "unstable-assignment",
                seq,
                [previous_seq, change_seq, seq],
                unstable_assignment(
                    message.key,
                    message.offset,
                    previous.name,
                    previous_seq,
                    changed.name,
                    change,
                    change_seq,
                    name,
                    st.config["selector"],
                    seq,
                ),
            )
