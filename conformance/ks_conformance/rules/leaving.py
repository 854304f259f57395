"""The rules of spec section 12 Consumers leaving."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

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
    needs=lambda a: (
        need("disconnect" in a.ops and "tick" in a.ops, "op disconnect")
        or need(a.positive("evict_after"), a.supported("evict_after"))
    ),
)

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
    needs=lambda a: (
        need("disconnect" in a.ops and "tick" in a.ops, "op disconnect")
        or need(a.positive("evict_after"), a.supported("evict_after"))
    ),
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
