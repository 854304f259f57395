"""The rules of spec section 9 Acknowledgements."""

from __future__ import annotations

from ks_conformance.rules.registry import NO_ENDING, Scope, Stage, define, need

STALE_ACK_ACCEPTED = define(
    "stale-ack-accepted",
    "KS-ACK-2",
    Stage.EVENT,
    Scope.KEY,
    "an `ack` from a consumer incarnation without an outstanding delivery of the message",
    witness="the last delivery of the message, the `ack`",
    exercised="an ack from a consumer that does not hold the message",
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
