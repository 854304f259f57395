"""The rules of spec section 18 The best-effort variant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance.explain import Explained, message_clause
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Message, OpState
    from ks_conformance.checks.state import CheckerState

BEST_EFFORT_REDELIVERY = define(
    "best-effort-redelivery",
    "KS-BEF-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "best-effort: a second outcome (delivery, drop or filter) for a message, or an outcome in another op "
        "than its `publish`"
    ),
    witness="both events",
    exercised="a best-effort publish",
)


def best_effort_redelivery_second(key: str, offset: int, pub: int, outcome_seq: int, seq: int) -> Explained:
    """KS-BEF-1, best-effort: a message's second outcome."""
    return (
        [message_clause(offset, key, pub) + f", whose outcome was seq {outcome_seq}"],
        f"it got a second outcome at seq {seq}, but in best-effort each message has exactly one (KS-BEF-1)",
        {"offset": offset},
    )


def best_effort_redelivery_late(key: str, offset: int, pub: int, seq: int) -> Explained:
    """KS-BEF-1, best-effort: an outcome in a later op than the message's publish."""
    return (
        [message_clause(offset, key, pub)],
        f"its outcome came at seq {seq}, in a later op than its publish, but in best-effort a message's "
        "outcome happens at the operation that published it (KS-BEF-1)",
        {"offset": offset},
    )


MISSING_OUTCOME = define(
    "missing-outcome",
    "KS-BEF-1",
    Stage.OP,
    Scope.KEY,
    "best-effort: a `publish` op without an outcome (delivery, drop or filter) for its message",
    witness="the `publish`",
    exercised="a best-effort publish",
)


def missing_outcome(key: str, offset: int, pub: int) -> Explained:
    """KS-BEF-1, a best-effort publish op without an outcome for its message."""
    return (
        [message_clause(offset, key, pub)],
        f"the op that published it ended without delivering, dropping or filtering m{offset}, but in "
        "best-effort each message's outcome happens at its publish (KS-BEF-1)",
        {"offset": offset},
    )


DROP_UNCOUNTED = define(
    "drop-uncounted",
    "KS-BEF-2",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "best-effort: `dropped_total` disagrees with the `drop` events",
    needs=lambda a: need(a.stats, "capability stats"),
)


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def check_outcome(st: CheckerState, op: OpState) -> None:
    """KS-BEF-1 at the end of a best-effort publish: the op reported the message's one outcome."""
    assert op.published is not None
    message = st.messages[op.published]
    if message.outcome_seq is None:
        # req: KS-BEF-1
        st._report("missing-outcome", op.seq, [message.publish_seq], missing_outcome(*message.facts))


def check_best_effort_outcome(st: CheckerState, message: Message, seq: int) -> None:
    """KS-BEF-1 at a delivery: a best-effort message is delivered at most once, in the op that published it."""
    # req: KS-BEF-1
    assert st.op is not None
    if message.outcome_seq is not None:
        st._report(
            "best-effort-redelivery",
            seq,
            [message.outcome_seq, seq],
            best_effort_redelivery_second(*message.facts, message.outcome_seq, seq),
        )
    elif st.op.index != message.publish_op:
        st._report(
            "best-effort-redelivery",
            seq,
            [message.publish_seq, seq],
            best_effort_redelivery_late(*message.facts, seq),
        )
    message.outcome_seq = seq
