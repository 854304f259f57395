"""The rules of spec section 4 Assignment."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

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
