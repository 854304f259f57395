"""The rules of spec section 5 Key filters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ks_conformance.explain import Explained, joined_with_filters, message_clause
from ks_conformance.glob import accepts
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, Message, OpState
    from ks_conformance.checks.state import CheckerState

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


def filter_violation(
    key: str, offset: int, pub: int, consumer: str, filters: Sequence[str], added_seq: int, seq: int
) -> Explained:
    """KS-FLT-2."""
    return (
        [joined_with_filters(consumer, filters, added_seq), message_clause(offset, key, pub)],
        f"no filter of {consumer} matches {key!r}, yet m{offset} was delivered to {consumer} [seq {seq}] (KS-FLT-2)",
        {"offset": offset, "consumer": consumer},
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


def unjustified_filter(
    key: str, offset: int, pub: int, taker: str, filters: Sequence[str], added_seq: int, seq: int
) -> Explained:
    """KS-FLT-3, a `filter` of a key that the member `taker` accepts."""
    return (
        [message_clause(offset, key, pub), joined_with_filters(taker, filters, added_seq) + ", accepting it"],
        f"m{offset} was resolved as filtered [seq {seq}], but only keys nobody accepts are filtered (KS-FLT-3)",
        {"offset": offset, "consumer": taker},
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


def filtered_without_members(key: str, offset: int, pub: int, seq: int) -> Explained:
    """KS-FLT-4."""
    return (
        [message_clause(offset, key, pub), "the subscription has no member"],
        f"m{offset} was resolved as filtered [seq {seq}], but with no member at all messages wait (KS-FLT-4)",
        {"offset": offset},
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


def unfiltered_wait(
    key: str, offset: int, pub: int, members: Sequence[tuple[str, Sequence[str]]], seq: int
) -> Explained:
    """KS-FLT-3, at the end of an op (`members`: each member's name and filters, none accepting the key)."""
    filters = "; ".join(f"{name} {list(patterns)}" for name, patterns in members)
    return (
        [
            message_clause(offset, key, pub) + ", the earliest unresolved message of its key, within the window",
            f"no member accepts key {key!r}: {filters}",
        ],
        f"the op at seq {seq} ended with m{offset} still waiting, but a message whose key no member "
        "accepts is resolved as filtered when the dispatch pass reaches it (KS-FLT-3)",
        {"offset": offset, "key": key},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def report_unfiltered(st: CheckerState, message: Message, op: OpState) -> None:
    """KS-FLT-3: a message no member's filters accept waits while a member without filters could take it."""
    # req: KS-FLT-3
    filters = [(m.name, m.filters) for m in st.members.values()]
    st._report(
        "unfiltered-wait",
        op.seq,
        [message.publish_seq, op.seq],
        unfiltered_wait(*message.facts, filters, op.seq),
    )


def check_filter_violation(st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None) -> None:
    """KS-FLT-2 at a delivery: a consumer with filters receives only keys they accept."""
    if incarnation is None or not incarnation.filters:
        return
    st._exercise("filter-violation")
    if not accepts(incarnation.filters, message.key):
        st._report(
            "filter-violation",
            seq,
            [incarnation.added_seq, seq],
            filter_violation(*message.facts, incarnation.name, incarnation.filters, incarnation.added_seq, seq),
        )


def check_filtered(st: CheckerState, message: Message, seq: int) -> None:
    """KS-FLT-3 and KS-FLT-4 at a `filter`: a message is resolved as filtered only when no member's filters accept
    its key, and only while the subscription has members."""
    st._exercise("unjustified-filter")
    st._exercise("filtered-without-members")
    if not st.members:
        # req: KS-FLT-4
        st._report("filtered-without-members", seq, [seq], filtered_without_members(*message.facts, seq))
        return
    # req: KS-FLT-3
    taker = next((m for m in st.members.values() if accepts(m.filters, message.key)), None)
    if taker is not None:
        st._report(
            "unjustified-filter",
            seq,
            [taker.added_seq, seq],
            unjustified_filter(*message.facts, taker.name, taker.filters, taker.added_seq, seq),
        )
