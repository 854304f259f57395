"""The rules of spec section 6 Ordering."""

from __future__ import annotations

from ks_conformance.rules.registry import NO_DELAY, Scope, Stage, define, need

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

STRICT_OVERLAP = define(
    "strict-overlap",
    "KS-ORD-2",
    Stage.EVENT,
    Scope.KEY,
    "strict profile: a delivery of m while an earlier message of m's key is unresolved",
    witness="publish of the earlier message, the delivery",
    exercised="a delivery while another message of its key is unresolved",
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
