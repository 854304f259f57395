"""The rules of spec section 10 Negative acks, ack timeouts and retries."""

from __future__ import annotations

from ks_conformance.rules.registry import NO_REDELIVERY, Scope, Stage, define, extension, need

ATTEMPT_MISCOUNT = define(
    "attempt-miscount",
    "KS-RTY-5",
    Stage.EVENT,
    Scope.KEY,
    "a delivery whose attempt is not 1 + deliveries since restart",
    witness="the previous delivery, the delivery",
    exercised="a redelivery",
    needs=lambda a: need(a.redelivery, NO_REDELIVERY),
)

EARLY_RETRY = define(
    "early-retry",
    "KS-RTY-4",
    Stage.EVENT,
    Scope.KEY,
    (
        "a delivery of a retrying message that is not yet ready, unless its back-off is 0 (then a retry at "
        "once is allowed)"
    ),
    witness="the failure, the delivery",
    exercised="a redelivery after a failure",
    needs=lambda a: (
        need(a.failures and "tick" in a.ops, "op nack or capability ack_timeout")
        or need(a.positive("backoff_base"), a.supported("backoff_base"))
    ),
)

RETRY_OVERRUN = define(
    "retry-overrun",
    "KS-RTY-6",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of a message whose failures exceed `max_redeliveries`",
    witness="the failures, the delivery",
    exercised="a message fails `max_redeliveries + 1` times",
    needs=lambda a: need(a.failures and bool(a.policies), "failures and a poison policy"),
)

STALE_NACK_ACCEPTED = define(
    "stale-nack-accepted",
    "KS-RTY-1",
    Stage.EVENT,
    Scope.KEY,
    "a `nack` from an incarnation without an outstanding delivery of the message",
    witness="the last delivery, the `nack`",
    exercised="a nack from a consumer that does not hold the message",
    needs=lambda a: need("nack" in a.ops, "op nack"),
)

HOLDER_NACK_IGNORED = define(
    "holder-nack-ignored",
    "KS-RTY-1",
    Stage.EVENT,
    Scope.KEY,
    "a `nack_ignored` from the incarnation that holds the outstanding delivery",
    witness="the delivery, the `nack_ignored`",
    exercised="a nack from the holder",
    needs=lambda a: need("nack" in a.ops, "op nack"),
)

PREMATURE_TIMEOUT = define(
    "premature-timeout",
    "KS-RTY-2",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `timeout` of a delivery that is not outstanding at that consumer, or at a tick before its delivery"
        " tick + `ack_timeout`, or with `ack_timeout` 0 (a delivery an extension moved is judged by "
        "`extended-timeout-early`)"
    ),
    witness="the delivery, the `timeout`",
    exercised="a timeout",
    needs=lambda a: (
        need(a.ack_timeout and "tick" in a.ops, "capability ack_timeout")
        or need(a.positive("ack_timeout"), a.supported("ack_timeout"))
    ),
)

EXTENDED_TIMEOUT_EARLY = define(
    "extended-timeout-early",
    "KS-RTY-8",
    Stage.EVENT,
    Scope.KEY,
    "a `timeout` of a delivery whose deadline an `extended` event moved to tick D, at a tick before D",
    witness="the delivery, the `extended` event, the `timeout`",
    exercised="a timeout of an extended delivery",
    needs=lambda a: need("extend" in a.ops, "op extend") or extension(a),
)

ZOMBIE_EXTENSION = define(
    "zombie-extension",
    "KS-RTY-9",
    Stage.EVENT,
    Scope.KEY,
    "an `extended` event answering an `extend` op whose consumer does not hold the offset's outstanding delivery",
    witness="the `extend` op, the `extended` event",
    exercised="an `extend` from a consumer that does not hold the delivery",
    needs=lambda a: need("extend" in a.ops, "op extend") or extension(a),
)

RETURN_COUNTED = define(
    "return-counted",
    "KS-RTY-7",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `drop` with reason `poison`, a `dead_letter` or a `key_blocked` of a message whose failures since "
        "restart do not exceed `max_redeliveries` but whose failures plus returns (deliveries ended by its "
        "holder's leave or eviction) do; reported instead of `unjustified-resolution`"
    ),
    witness="the returned delivery, the leave or eviction, the event",
    exercised="a message is poisoned",
    needs=lambda a: (
        need(a.failures and bool(a.policies) and ("tick" in a.ops), "failures and a poison policy")
        or need("remove_consumer" in a.ops or "disconnect" in a.ops, "op remove_consumer or disconnect")
    ),
)

MISSED_TIMEOUT = define(
    "missed-timeout",
    "KS-RTY-3",
    Stage.OP,
    Scope.KEY,
    (
        "after phase 1 of tick t, a delivery made at tick d is still outstanding with `ack_timeout > 0` and "
        "`d + ack_timeout + timer_slack <= t` (KS-GEN-9; a delivery an extension moved is judged by "
        "`extended-timeout-missed`)"
    ),
    witness="the delivery, the `tick`",
    exercised="a delivery is outstanding when its timeout is due",
    needs=lambda a: (
        need(a.ack_timeout and "tick" in a.ops, "capability ack_timeout")
        or need(a.positive("ack_timeout"), a.supported("ack_timeout"))
    ),
)

EXTENDED_TIMEOUT_MISSED = define(
    "extended-timeout-missed",
    "KS-RTY-8",
    Stage.OP,
    Scope.KEY,
    (
        "after phase 1 of tick t, a delivery whose deadline an `extended` event moved to tick D is still "
        "outstanding and `D + timer_slack <= t` (KS-GEN-9)"
    ),
    witness="the delivery, the `extended` event, the `tick`",
    exercised="an extended delivery is outstanding when its new deadline is due",
    needs=lambda a: need("extend" in a.ops, "op extend") or extension(a),
)

EXTENSION_LOST = define(
    "extension-lost",
    "KS-RTY-8",
    Stage.OP,
    Scope.KEY,
    (
        "at the end of an `extend` op from the consumer that holds the offset's outstanding delivery, no "
        "`extended` event answered it (an `extend_ignored` did, or nothing)"
    ),
    witness="the delivery, the `extend` op, the `extend_ignored`",
    exercised="an `extend` from the holder",
    needs=lambda a: need("extend" in a.ops, "op extend") or extension(a),
)

POISON_IGNORED = define(
    "poison-ignored",
    "KS-RTY-6",
    Stage.OP,
    Scope.KEY,
    "after phase 2 of a tick, a message whose failures exceed `max_redeliveries` is neither resolved nor blocked",
    witness="the failures, the `tick`",
    exercised="a message fails `max_redeliveries + 1` times",
    needs=lambda a: need(a.failures and bool(a.policies) and ("tick" in a.ops), "failures and a poison policy"),
)
