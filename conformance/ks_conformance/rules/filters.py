"""The rules of spec section 5 Key filters."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

FILTER_VIOLATION = define(
    "filter-violation",
    "KS-FLT-2",
    Stage.EVENT,
    Scope.KEY,
    "a delivery to a consumer that does not accept the key",
    witness="the `consumer_added`, the delivery",
    exercised="a delivery to a consumer with filters",
    needs=lambda a: need(a.filtering, a.no_filters),
)

UNJUSTIFIED_FILTER = define(
    "unjustified-filter",
    "KS-FLT-3",
    Stage.EVENT,
    Scope.KEY,
    "a `filter` of a message whose key some member accepts",
    witness="the `consumer_added` of that member, the `filter`",
    exercised="a filter",
    needs=lambda a: need(a.filtering, a.no_filters),
)

FILTERED_WITHOUT_MEMBERS = define(
    "filtered-without-members",
    "KS-FLT-4",
    Stage.EVENT,
    Scope.KEY,
    "a `filter` while the subscription has no member",
    witness="the `filter`",
    exercised="a filter",
    needs=lambda a: need(a.filtering and "remove_consumer" in a.ops, a.no_filters),
)

UNFILTERED_WAIT = define(
    "unfiltered-wait",
    "KS-FLT-3",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "strict and owner, selectors other than `pulsar-sticky` and `buckets`: at the end of an op, a message"
        ' m among the `window` smallest unresolved offsets (with `read_bound = "lookahead"`: a message that '
        "fewer than *L* earlier waiting messages precede, while some connected member can take a delivery), "
        "the earliest unresolved message of its key, with no message of its key outstanding, "
        "retrying-and-not-ready or blocked, is still unresolved although the subscription has members and "
        "none accepts its key"
    ),
    witness="the publish of m, the op",
    exercised="an op ends with a message in the window while some member has filters",
    needs=lambda a: need(a.filtering and a.fixed_target, a.no_filters),
)
