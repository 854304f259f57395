"""The rules of spec section 13 Resolutions."""

from __future__ import annotations

from ks_conformance.rules.registry import NO_REDELIVERY, Scope, Stage, define, need

DUPLICATE = define(
    "duplicate",
    "KS-RES-2",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of a message that is resolved or has an outstanding delivery",
    witness="the resolution or the outstanding delivery, the delivery",
    exercised="a delivery of a message that was delivered before",
    needs=lambda a: need(a.redelivery, NO_REDELIVERY),
)

DOUBLE_RESOLUTION = define(
    "double-resolution",
    "KS-RES-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "a resolution event for a message that is already resolved (an ack still ends the delivery it "
        'answers: "Answers end deliveries" in section 1)'
    ),
    witness="both resolutions",
    exercised="a resolution",
)

UNJUSTIFIED_RESOLUTION = define(
    "unjustified-resolution",
    "KS-RES-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `drop` or `dead_letter` that no rule allows: reason `poison` or a dead letter for a message whose "
        "failures do not exceed `max_redeliveries` or under another policy; reason `operator` without a "
        "`key_skipped` of its key in the same op; a best-effort reason outside best-effort; a resolution of a"
        " message with an outstanding delivery"
    ),
    witness="the event",
    exercised="a drop or dead letter",
    needs=lambda a: need(
        (a.failures and bool(a.policies & {"drop", "dead-letter"})) or "skip" in a.ops, "a poison policy that resolves"
    ),
)

UNJUSTIFIED_OUTCOME = define(
    "unjustified-outcome",
    "KS-RES-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "an `outcome` event whose name the implementation declares as standing for no spec resolution (`null`"
        " in `terminal_outcomes`, adapter protocol v2), or does not declare; a declared name is judged as the"
        " event of its resolution (`ack`, `drop` with reason `poison`, `dead_letter` carrying the message's "
        "attempts and last failure, `filter`)"
    ),
    witness="the publish of m, the `outcome`",
    exercised="an implementation-defined outcome",
)
