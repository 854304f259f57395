"""The rules of spec section 13 Resolutions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance import explain
from ks_conformance.checks.selectors import BEST_EFFORT_DROPS
from ks_conformance.explain import Explained, message_clause, resolved_as
from ks_conformance.rules import retries
from ks_conformance.rules.registry import NO_REDELIVERY, Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Message
    from ks_conformance.checks.state import CheckerState

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


def duplicate_resolved(
    key: str, offset: int, pub: int, resolution: str | None, resolution_seq: int | None, seq: int
) -> Explained:
    """KS-RES-2, after a resolution."""
    return (
        [message_clause(offset, key, pub) + resolved_as(resolution, resolution_seq)],
        f"m{offset} was delivered again [seq {seq}] after it was resolved, with no restart that "
        "lost the resolution (KS-RES-2)",
        {"offset": offset},
    )


def duplicate_outstanding(key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int) -> Explained:
    """KS-RES-2, while a delivery is outstanding."""
    return (
        [message_clause(offset, key, pub) + f", delivered to {holder} at seq {delivery_seq} and still outstanding"],
        f"m{offset} was delivered again [seq {seq}] while that delivery is outstanding (KS-RES-2)",
        {"offset": offset},
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


def double_resolution(
    key: str, offset: int, pub: int, resolution: str | None, resolution_seq: int | None, again: str, seq: int
) -> Explained:
    """KS-RES-1, a second resolution (`again`) of a resolved message."""
    return (
        [message_clause(offset, key, pub) + resolved_as(resolution, resolution_seq)],
        f"it was resolved again as {again} [seq {seq}], but a message leaves the subscription at most "
        "once between restarts (KS-RES-1)",
        {"offset": offset},
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


def unjustified_resolution_drop(key: str, offset: int, pub: int, reason: str, why: str, seq: int) -> Explained:
    """KS-RES-1, a `drop` no rule allows."""
    return (
        [message_clause(offset, key, pub)],
        f"it was dropped with reason {reason!r} [seq {seq}], but {why}; no rule allows that resolution (KS-RES-1)",
        {"offset": offset, "reason": reason},
    )


def unjustified_resolution_dead_letter(key: str, offset: int, pub: int, why: str, seq: int) -> Explained:
    """KS-RES-1, a `dead_letter` no rule allows."""
    return (
        [message_clause(offset, key, pub)],
        f"it was dead-lettered [seq {seq}], but {why}; no rule allows that resolution (KS-RES-1)",
        {"offset": offset},
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


def unjustified_outcome(key: str, offset: int, pub: int, outcome: str, declared: bool, seq: int) -> Explained:
    """KS-RES-1, an implementation's outcome declared as no resolution (`declared`) or not declared."""
    how = "declared as standing for no resolution" if declared else "not declared"
    return (
        [message_clause(offset, key, pub)],
        f"it ended with the implementation's outcome {outcome!r} [seq {seq}], {how} in terminal_outcomes; "
        "a message resolved by no rule of the spec is lost (KS-RES-1)",
        {"offset": offset, "outcome": outcome},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def resolve(st: CheckerState, message: Message, resolution: str, seq: int) -> None:
    """Resolve a message (KS-RES-1): a second resolution of a resolved message is reported, and still ends the
    delivery it answers."""
    # req: KS-RES-1
    st._exercise("double-resolution")
    if message.resolved and message.resolution != "delivered":
        st._end_delivery(message)  # it still ends the delivery it answers (a resurrected one, KS-CUR-4)
        st._report(
            "double-resolution",
            seq,
            [message.resolution_seq, seq],
            double_resolution(*message.facts, message.resolution, message.resolution_seq, resolution, seq),
        )
        return
    if message.resolved:
        message.resolution = resolution
        return
    st._end_delivery(message)
    st._resolve_silently(message, resolution, seq)


def check_duplicate(st: CheckerState, message: Message, seq: int) -> None:
    """KS-RES-2 at a delivery: a resolved message, or one still outstanding, is not delivered again."""
    if message.delivered_ever:
        st._exercise("duplicate")
    if message.resolved:
        st._report(
            "duplicate",
            seq,
            [message.resolution_seq, seq],
            duplicate_resolved(*message.facts, message.resolution, message.resolution_seq, seq),
        )
    elif message.outstanding is not None:
        d = message.outstanding
        st._report(
            "duplicate",
            seq,
            [d.seq, seq],
            duplicate_outstanding(*message.facts, d.holder.name, d.seq, seq),
        )


def poison_why(st: CheckerState, message: Message, policy: str) -> str:
    """Why resolving a message as poison the `policy` way is unjustified (KS-RES-1), or "" if it is not."""
    maximum = int(st.config["max_redeliveries"])
    if st.config["poison_policy"] != policy:
        return explain.wrong_poison_policy(st.config["poison_policy"], policy)
    if message.failures <= maximum:
        return explain.not_over_budget(message.failures, maximum)
    return ""


def check_drop(st: CheckerState, message: Message, reason: str, seq: int) -> None:
    """KS-RES-1 at a `drop`: its reason holds (poison over budget under the drop policy, an operator's skip of its
    key, a best-effort reason under best effort), and nobody holds the message."""
    st._exercise("unjustified-resolution")
    why = ""
    if reason == "poison":
        why = poison_why(st, message, "drop")
    elif reason == "operator":
        op = st.op
        if op is None or op.kind != "key_skipped" or op.key != message.key:
            why = explain.NO_OPERATOR_SKIP
    elif reason in BEST_EFFORT_DROPS and not st.best_effort:
        why = explain.best_effort_reason(reason)
    if not why and message.outstanding is not None and not st.best_effort:
        why = explain.delivery_outstanding(message.outstanding.holder.name, message.outstanding.seq)
    if reason == "poison":
        st._exercise("return-counted")
    if why and reason == "poison" and retries.returns_counted(st, message, seq, "drop"):
        why = ""
    if why:
        st._report(
            "unjustified-resolution",
            seq,
            [seq],
            unjustified_resolution_drop(*message.facts, reason, why, seq),
        )


def check_dead_letter(st: CheckerState, message: Message, seq: int) -> None:
    """KS-RES-1 at a `dead_letter`: the poison policy is dead-letter, the message is over its budget, and nobody
    holds it."""
    maximum = int(st.config["max_redeliveries"])
    st._exercise("unjustified-resolution")
    why = poison_why(st, message, "dead-letter")
    if not why and message.outstanding is not None:
        why = explain.delivery_outstanding(message.outstanding.holder.name, message.outstanding.seq)
    st._exercise("return-counted")
    if why and message.failures <= maximum and retries.returns_counted(st, message, seq, "dead_letter"):
        why = ""
    if why:
        st._report(
            "unjustified-resolution",
            seq,
            [seq],
            unjustified_resolution_dead_letter(*message.facts, why, seq),
        )


def report_undeclared_outcome(st: CheckerState, message: Message, name: str, declared: bool, seq: int) -> None:
    """KS-RES-1 at an `outcome` the adapter did not declare as one of the spec's resolutions: a loss."""
    st._report(
        "unjustified-outcome",
        seq,
        [message.publish_seq, seq],
        unjustified_outcome(*message.facts, name, declared, seq),
    )
