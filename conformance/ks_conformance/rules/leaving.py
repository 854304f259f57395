"""The rules of spec section 12 Consumers leaving."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance import explain
from ks_conformance.explain import (
    Explained,
    disconnected,
    evicted_at,
    message_clause,
    not_a_member,
    ticks,
)
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, Message, OpState
    from ks_conformance.checks.state import CheckerState

INACTIVE_DELIVERY = define(
    "inactive-delivery",
    "KS-MEM-3",
    Stage.EVENT,
    Scope.KEY,
    "a delivery to a consumer that is not a member, or is disconnected",
    witness="the `consumer_disconnected` (or removal), the delivery",
    exercised="a delivery while some member is disconnected",
    needs=lambda a: need("disconnect" in a.ops, "op disconnect"),
)


def inactive_delivery_to_non_member(
    key: str, offset: int, pub: int, consumer: str, ended_seq: int | None, seq: int
) -> Explained:
    """KS-MEM-3, to a consumer that is not a member (`ended_seq`: where its last incarnation ended, if any)."""
    return (
        [
            not_a_member(consumer) + (f" (its last incarnation ended at seq {ended_seq})" if ended_seq else ""),
            message_clause(offset, key, pub),
        ],
        f"m{offset} was delivered to {consumer} [seq {seq}], but only connected members receive messages (KS-MEM-3)",
        {"offset": offset, "consumer": consumer},
    )


def inactive_delivery_to_disconnected(
    key: str, offset: int, pub: int, consumer: str, disconnected_seq: int | None, seq: int
) -> Explained:
    """KS-MEM-3, to a disconnected member."""
    return (
        [disconnected(consumer, disconnected_seq), message_clause(offset, key, pub)],
        f"m{offset} was delivered to {consumer} [seq {seq}] while it is disconnected, but only connected "
        "members receive messages (KS-MEM-3)",
        {"offset": offset, "consumer": consumer},
    )


PREMATURE_EVICTION = define(
    "premature-eviction",
    "KS-MEM-2",
    Stage.EVENT,
    Scope.CONSUMER,
    (
        "a `consumer_evicted` of a connected member, of a non-member, with `evict_after` 0, or before its "
        "disconnection tick + `evict_after`"
    ),
    witness="the `consumer_disconnected`, the eviction",
    exercised="an eviction",
    needs=lambda a: need("disconnect" in a.ops and "tick" in a.ops, "op disconnect") or a.above_zero("evict_after"),
)


def premature_eviction(consumer: str, now: int, why: str, seq: int) -> Explained:
    """KS-MEM-2, an eviction before it is due."""
    return ([evicted_at(consumer, now, seq)], f"{why} (KS-MEM-2)", {"consumer": consumer})


RECONNECT_IGNORED = define(
    "reconnect-ignored",
    "KS-MEM-4",
    Stage.EVENT,
    Scope.CONSUMER,
    (
        "a `consumer_evicted` of a member, or a `held` with reason `inactive` naming a member, that "
        "reconnected and has not disconnected since"
    ),
    witness="the `consumer_disconnected`, the `consumer_reconnected`, the eviction or the `held`",
    exercised="a reconnect of a disconnected member",
    needs=lambda a: need("reconnect" in a.ops and "disconnect" in a.ops, "op reconnect"),
)


def reconnect_ignored(consumer: str, disconnected_seq: int | None, reconnected_seq: int | None, what: str) -> Explained:
    """KS-MEM-4 (`what`: the eviction or hold that treats the member as away, `evicted_at` or `held_inactive`)."""
    return (
        [
            disconnected(consumer, disconnected_seq),
            f"{consumer} reconnected at seq {reconnected_seq} and has not disconnected since",
        ],
        f"{what}, but a reconnected member is connected again with all it holds, and its eviction is off (KS-MEM-4)",
        {"consumer": consumer},
    )


MISSED_EVICTION = define(
    "missed-eviction",
    "KS-MEM-2",
    Stage.OP,
    Scope.CONSUMER,
    (
        "after phase 4 of tick t, a member disconnected at tick d with `evict_after > 0` and `d + evict_after"
        " + timer_slack <= t` is still a member (KS-GEN-9)"
    ),
    witness="the `consumer_disconnected`, the `tick`",
    exercised="a member is disconnected",
    needs=lambda a: need("disconnect" in a.ops and "tick" in a.ops, "op disconnect") or a.above_zero("evict_after"),
)


def missed_eviction(
    consumer: str,
    disconnected_at: int,
    disconnected_seq: int | None,
    evict_after: object,
    now: int,
    seq: int,
    slack: int = 0,
) -> Explained:
    """KS-MEM-2, after phase 4 of a tick (`seq`: the tick op; `slack`: timer_slack, KS-GEN-9)."""
    given = [f"timer_slack = {slack}: an eviction may come up to {ticks(slack)} late (KS-GEN-9)"] if slack else []
    return (
        [
            f"{consumer} disconnected at tick {disconnected_at} [seq {disconnected_seq}]",
            f"evict_after = {evict_after}",
            *given,
        ],
        f"it is still a member after phase 4 of tick {now} [seq {seq}], but it must be evicted then (KS-MEM-2)",
        {"consumer": consumer},
    )


LOST = define(
    "lost",
    "KS-MEM-1",
    Stage.QUIESCENT,
    Scope.KEY,
    (
        "an unresolved message whose last delivery ended because its holder left or was evicted, with no "
        "delivery since, although nothing else holds it back: no message of its key is outstanding or "
        "blocked, and every member that accepts its key is connected and has room (selector `any`: one of "
        "them); otherwise the message is pending behind a member that never frees a place or behind its "
        "blocked key (KS-POI-3), which is liveness (`stuck-key`), not loss"
    ),
    witness="its last delivery, the leave or eviction, the `quiescent`",
    exercised="a holder leaves with outstanding deliveries",
    needs=lambda a: need("remove_consumer" in a.ops or "disconnect" in a.ops, "op remove_consumer or disconnect"),
)


def lost(key: str, offset: int, pub: int, left_seq: int | None, seq: int) -> Explained:
    """KS-MEM-1."""
    return (
        [message_clause(offset, key, pub), f"its holder left or was evicted at seq {left_seq}"],
        f"m{offset} was never delivered again and is unresolved at the quiescent point [seq {seq}], "
        "but a leaving consumer's messages must be delivered again (KS-MEM-1)",
        {"offset": offset, "key": key},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def after_phase_4(st: CheckerState, op: OpState) -> None:
    """KS-MEM-2 after phase 4 of a tick: every disconnected member whose eviction was due has been evicted."""
    for incarnation in op.due_evictions:
        if st.members.get(incarnation.name) is incarnation:
            # req: KS-MEM-2
            st._report(
                "missed-eviction",
                op.seq,
                [incarnation.disconnected_seq, op.seq],
                missed_eviction(
                    incarnation.name,
                    incarnation.disconnected_at,
                    incarnation.disconnected_seq,
                    st.config["evict_after"],
                    st.now,
                    op.seq,
                    st.timer_slack,
                ),
            )


def report_reconnect_ignored(st: CheckerState, incarnation: Incarnation, seq: int, what: str) -> None:
    """`what` (an eviction or a hold at `seq`) treats a reconnected member as still away."""
    # req: KS-MEM-4
    st._report(
        "reconnect-ignored",
        seq,
        [incarnation.disconnected_seq, incarnation.reconnected_seq, seq],
        reconnect_ignored(incarnation.name, incarnation.disconnected_seq, incarnation.reconnected_seq, what),
    )


def check_inactive_delivery(
    st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None, name: str
) -> None:
    """KS-MEM-3 at a delivery: only a connected member receives anything."""
    if incarnation is None or st._offline:  # a member is disconnected
        st._exercise("inactive-delivery")
    if incarnation is None:
        ended = st.left.get(name)
        st._report(
            "inactive-delivery",
            seq,
            [ended, seq],
            inactive_delivery_to_non_member(*message.facts, name, ended, seq),
        )
    elif not incarnation.connected:
        st._report(
            "inactive-delivery",
            seq,
            [incarnation.disconnected_seq, seq],
            inactive_delivery_to_disconnected(*message.facts, name, incarnation.disconnected_seq, seq),
        )


def check_eviction(st: CheckerState, name: str, incarnation: Incarnation | None, seq: int) -> None:
    """KS-MEM-2 at a `consumer_evicted`: the member was disconnected for `evict_after` ticks (and did not reconnect,
    KS-MEM-4)."""
    evict_after = int(st.config["evict_after"])
    st._exercise_shared("premature-eviction")
    why = ""
    if incarnation is not None and incarnation.reconnected_seq is not None:
        report_reconnect_ignored(st, incarnation, seq, explain.evicted_at(name, st.now, seq))
    elif incarnation is None:
        why = explain.not_a_member(name)
    elif incarnation.connected:
        why = explain.still_connected(name)
    elif evict_after == 0:
        why = explain.EVICTION_DISABLED
    elif st.now < incarnation.disconnected_at + evict_after:
        why = explain.eviction_not_due(incarnation.disconnected_at, evict_after, st.now)
    if why:
        st._report(
            "premature-eviction",
            seq,
            [incarnation.disconnected_seq if incarnation else None, seq],
            premature_eviction(name, st.now, why, seq),
        )
