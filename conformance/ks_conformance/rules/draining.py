"""The rules of spec section 7 Draining on reassignment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_spec.slots import SLOT_SELECTORS, slot_of

from ks_conformance.explain import Explained, message_clause
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, KeyState, Message
    from ks_conformance.checks.state import CheckerState

SPLIT_OWNER = define(
    "split-owner",
    "KS-DRN-1",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of m to c while another incarnation holds an outstanding delivery of a message of m's key",
    witness="that other delivery, the delivery",
    exercised=(
        "a delivery while a membership change moved its key (the key has outstanding deliveries from an earlier epoch)"
    ),
    needs=lambda a: need(len(a.profiles) > 0, ""),
)


def split_owner(
    key: str, offset: int, pub: int, other_offset: int, other_holder: str, other_seq: int, consumer: str, seq: int
) -> Explained:
    """KS-DRN-1."""
    return (
        [
            f"d = deliver(offset={other_offset}, key={key!r}) to {other_holder} [seq {other_seq}], still outstanding",
            message_clause(offset, key, pub),
        ],
        f"m{offset} of the same key was delivered to {consumer} [seq {seq}] while "
        f"{other_holder} holds d, but a key has one holder at a time (KS-DRN-1)",
        {"offset": offset, "key": key, "consumer": consumer, "other": other_holder},
    )


UNJUSTIFIED_HOLD = define(
    "unjustified-hold",
    "KS-DRN-2",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        'with `drain_granularity = "hash"`: a `held` with reason `draining` (naming target T, or no target) '
        "while no key of its slot (its own included) holds an outstanding delivery that may sit at an old "
        "owner (one at a consumer other than T made before the last membership change, or any one at a "
        "consumer other than T while members have filters), and no key of its slot awaits redelivery or is "
        "blocked: the slot's target did not move, so nothing drains (KS-DRN-3 allows a hold only for a "
        "slot-mate at another consumer than the target, awaiting or blocked; a delivery made in the current "
        "epoch without filters is at the slot's target, whatever target the hold names; PIP-379 holds only "
        "hashes whose owner changed)"
    ),
    witness="the latest outstanding delivery of the slot at T or of the current epoch, if any, the `held`",
    exercised="a hold for draining, with hash-granularity draining",
    needs=lambda a: (
        need(a.held_events, "held events (capability held_events); a needless hold shows as idle-while-ready")
        or need(
            "hash" in a.forms("drain_granularity") and bool(a.selectors & set(SLOT_SELECTORS)),
            "drain_granularity hash declared in config_values, with a slot selector (KS-DRN-3)",
        )
    ),
)


def unjustified_hold(
    key: str, offset: int, pub: int, slot: int, target: str | None, unmoved: int | None, seq: int
) -> Explained:
    """KS-DRN-2 with KS-DRN-3, a hold for draining of a slot whose target did not move (`target`: the one the hold
    names, if any; `unmoved`: the latest outstanding delivery of the slot, at the target or of the current epoch)."""
    where = f"at {target} or delivered" if target is not None else "delivered"
    holds = (
        f"what is outstanding of slot {slot} sits at its target ({where} since the last membership change; the "
        f"latest at seq {unmoved})"
        if unmoved is not None
        else f"nothing of slot {slot} is outstanding"
    )
    toward = f"toward its target {target}" if target is not None else "without naming a target"
    facts: dict[str, object] = {"key": key, "offset": offset, "slot": slot}
    if target is not None:
        facts["consumer"] = target
    return (
        [message_clause(offset, key, pub), f"m{offset} was held [seq {seq}] for draining {toward}"],
        f"{holds}, and no key of the slot awaits redelivery or is blocked: no old owner holds the slot, so "
        "nothing drains (KS-DRN-3), and a hold for draining stops when nothing drains (KS-DRN-2)",
        facts,
    )


DRAIN_STUCK = define(
    "drain-stuck",
    "KS-DRN-2",
    Stage.QUIESCENT,
    Scope.KEY,
    "an unresolved message whose last hold had reason `draining`",
    witness="the `held`, the `quiescent`",
    exercised="a message is held for draining",
    needs=lambda a: (
        need(
            a.held_events,
            "held events (capability held_events); a drain that never clears shows as stuck-key (KS-LIV-1)",
        )
        or need(
            bool(a.selectors - {"any"}), "a selector with key affinity (with any, a held key never moves: no drain)"
        )
        or need(
            "owner" in a.profiles and bool(a.selectors - {"any", "buckets", "partitions"}),
            "the owner profile with a selector other than any, buckets and partitions (in strict a key's next "
            "message waits for the previous one, under buckets a moving bucket is withheld instead, KS-BKT-4, and"
            " under partitions a key moves only away from a leaver, whose deliveries return with it: no key "
            "drains)",
        )
    ),
)


def drain_stuck(key: str, offset: int, pub: int, hold_seq: int | None, seq: int) -> Explained:
    """KS-DRN-2."""
    return (
        [message_clause(offset, key, pub), f"m{offset} was held for draining at seq {hold_seq}"],
        f"it is still unresolved at the quiescent point [seq {seq}], but draining always clears (KS-DRN-2)",
        {"offset": offset, "key": key},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def check_draining_hold(st: CheckerState, message: Message, target_name: str | None, seq: int) -> None:
    """KS-DRN-3 allows a hold for draining only while a key of its slot may sit at an old owner (a delivery at
    another consumer than the target from an earlier epoch, or any while members have filters), awaits
    redelivery or is blocked; otherwise the slot's target did not move (PIP-379 drains only hashes whose owner
    changed) and the hold must stop (KS-DRN-2). A hold that names no target is judged the same way."""
    target = None
    if target_name is not None:
        target = st.members.get(target_name)
        if target is None:
            return  # a hold naming a non-member is judged elsewhere (its delivery, or idle-while-ready)
    # req: KS-DRN-2, KS-DRN-3
    st._exercise("unjustified-hold")
    slot = slot_of(str(st.config["selector"]), message.key)
    filtered = any(m.filters for m in st.members.values())
    unmoved: list[int] = []
    for other in st._keys_of_slot.get(slot, [message.key]):
        state = st.keys.get(other)
        if state is None:
            continue  # at rest: nothing blocked, awaiting or outstanding
        if state.blocked or state.awaiting:
            return
        for delivery in state.outstanding.values():
            if delivery.holder is not target and (filtered or delivery.epoch < st.epoch):
                return  # may sit at an old owner: it may drain
            unmoved.append(delivery.seq)  # at the target, or delivered in this epoch: at the slot's target
    latest = max(unmoved, default=None)
    st._report(
        "unjustified-hold",
        seq,
        [latest, seq],
        unjustified_hold(*message.facts, slot, target_name, latest, seq),
    )


def check_split_owner(
    st: CheckerState, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
) -> None:
    """KS-DRN-1 at a delivery: no other consumer holds a delivery of the same key."""
    if st.best_effort:
        return
    if any(d.epoch < st.epoch for d in state.outstanding.values()):
        st._exercise("split-owner")
    other = next((d for d in state.outstanding.values() if d.holder is not incarnation), None)
    if other is not None:
        st._report(
            "split-owner",
            seq,
            [other.seq, seq],
            split_owner(*message.facts, other.offset, other.holder.name, other.seq, name, seq),
        )
