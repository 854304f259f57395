"""The rules of spec section 11 Poison policies and operator actions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance.explain import Explained, blocked_its_key, delivered_since_restart, message_clause
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import KeyState, Message, OpState
    from ks_conformance.checks.state import CheckerState

BLOCKED_KEY_LEAK = define(
    "blocked-key-leak",
    "KS-POI-3",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of a message whose key has a blocked message",
    witness="the `key_blocked` event, the delivery",
    exercised="a key is blocked while later messages of it are unresolved",
    needs=lambda a: need(a.failures and "block" in a.policies, "poison policy block"),
)


def blocked_key_leak(
    key: str, offset: int, pub: int, blocked: int, blocked_pub: int, blocked_seq: int | None, seq: int
) -> Explained:
    """KS-POI-3."""
    return (
        [message_clause(blocked, key, blocked_pub) + blocked_its_key(blocked_seq), message_clause(offset, key, pub)],
        f"m{offset} was delivered [seq {seq}] while its key is blocked, but nothing of a blocked key "
        "may be delivered until an operator releases or skips it (KS-POI-3)",
        {"offset": offset, "key": key},
    )


UNJUSTIFIED_BLOCK = define(
    "unjustified-block",
    "KS-POI-3",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `key_blocked` of a message never released by an operator whose failures since restart do not "
        "exceed `max_redeliveries` (and would not with its returns counted: that is `return-counted`)"
    ),
    witness="the failures, the `key_blocked`",
    exercised="a `key_blocked`",
    needs=lambda a: need(a.failures and "block" in a.policies, "poison policy block"),
)


def unjustified_block(key: str, offset: int, pub: int, failures: int, maximum: int, seq: int) -> Explained:
    """KS-POI-3, a `key_blocked` of a message that is not poisoned."""
    return (
        [message_clause(offset, key, pub) + f", failed {failures} times, max_redeliveries = {maximum}"],
        f"it blocked its key [seq {seq}], but only a poisoned message (more than max_redeliveries failures) "
        "blocks its key (KS-POI-3)",
        {"offset": offset, "failures": failures},
    )


STALE_BUDGET = define(
    "stale-budget",
    "KS-POI-4",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `key_blocked` of a message an operator released, whose failures since that release do not exceed "
        "`max_redeliveries` (the release did not give a fresh budget)"
    ),
    witness="the `key_released`, the failures since, the `key_blocked`",
    exercised="a `key_blocked` of a released message",
    needs=lambda a: need(
        a.failures and "block" in a.policies and ("release" in a.ops), "poison policy block and op release"
    ),
)


def stale_budget(
    key: str, offset: int, pub: int, released_seq: int, failures: int, maximum: int, seq: int
) -> Explained:
    """KS-POI-4."""
    return (
        [
            message_clause(offset, key, pub) + f", released by the operator at seq {released_seq}",
            f"it failed {failures} times since, max_redeliveries = {maximum}",
        ],
        f"it was blocked again [seq {seq}], but a release gives a fresh budget: it is poisoned only after "
        f"more than {maximum} failures counted from the release (KS-POI-4)",
        {"offset": offset, "failures": failures},
    )


DEAD_LETTER_MISMATCH = define(
    "dead-letter-mismatch",
    "KS-POI-2",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `dead_letter` whose attempt is not the message's deliveries since restart, or whose reason is not "
        "its last failure"
    ),
    witness="the last failure, the `dead_letter`",
    exercised="a dead letter",
    needs=lambda a: need(a.failures and "dead-letter" in a.policies, "poison policy dead-letter"),
)


def dead_letter_mismatch(
    key: str,
    offset: int,
    pub: int,
    deliveries: int,
    last_failure: str | None,
    last_failure_seq: int | None,
    attempt: int,
    reason: str,
    seq: int,
) -> Explained:
    """KS-POI-2 (`attempt` and `reason`: what the dead letter says)."""
    at = f" at seq {last_failure_seq}" if last_failure_seq is not None else ""
    return (
        [
            message_clause(offset, key, pub)
            + delivered_since_restart(deliveries)
            + f", last failure {last_failure!r}{at}"
        ],
        f"its dead letter [seq {seq}] says attempt {attempt} and reason {reason!r}, but it must carry the "
        "attempt count and the reason of the last failure (KS-POI-2)",
        {"offset": offset},
    )


SKIP_IGNORED = define(
    "skip-ignored",
    "KS-POI-5",
    Stage.OP,
    Scope.KEY,
    "a `key_skipped` op whose key had a blocked message that it did not resolve",
    witness="the `key_blocked`, the `key_skipped`",
    exercised="a skip",
    needs=lambda a: need(a.failures and "block" in a.policies and ("skip" in a.ops), "poison policy block and op skip"),
)


def skip_ignored(key: str, offset: int, pub: int, blocked_seq: int | None, seq: int) -> Explained:
    """KS-POI-5 (`seq`: the `key_skipped` op)."""
    return (
        [message_clause(offset, key, pub) + blocked_its_key(blocked_seq)],
        f"the operator skipped key {key!r} [seq {seq}] but m{offset} was not resolved, "
        "and a skip resolves the blocked message as dropped (KS-POI-5)",
        {"key": key, "offset": offset},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def check_skip(st: CheckerState, op: OpState) -> None:
    """KS-POI-5 at the end of a `key_skipped` op: every blocked message of the key has been resolved."""
    for offset in op.skip_targets:
        message = st.messages[offset]
        if message.resolved:
            continue
        # req: KS-POI-5
        st._report(
            "skip-ignored",
            op.seq,
            [message.blocked_seq, op.seq],
            skip_ignored(*message.facts, message.blocked_seq, op.seq),
        )
        return


def report_early_block(st: CheckerState, message: Message, seq: int, maximum: int) -> None:
    """A key_blocked of a message that has not failed more than max_redeliveries times (since its release)."""
    if message.released_seq is not None:
        # req: KS-POI-4
        st._report(
            "stale-budget",
            seq,
            [message.released_seq, *message.failure_seqs, seq],
            stale_budget(*message.facts, message.released_seq, message.failures, maximum, seq),
        )
        return
    # req: KS-POI-3
    st._report(
        "unjustified-block",
        seq,
        [*message.failure_seqs, seq],
        unjustified_block(*message.facts, message.failures, maximum, seq),
    )


def check_blocked_key_leak(st: CheckerState, message: Message, state: KeyState, seq: int) -> None:
    """KS-POI-3 at a delivery: nothing of a blocked key is delivered."""
    if st.best_effort or not state.blocked:
        return
    blocked = st.messages[min(state.blocked)]
    st._report(
        "blocked-key-leak",
        seq,
        [blocked.blocked_seq, seq],
        blocked_key_leak(*message.facts, blocked.offset, blocked.publish_seq, blocked.blocked_seq, seq),
    )


def check_dead_letter_record(st: CheckerState, message: Message, attempt: int, reason: str, seq: int) -> None:
    """KS-POI-2 at a `dead_letter`: it records the message's last attempt and the reason of its last failure."""
    st._exercise("dead-letter-mismatch")
    # `left`: a system that counts returns names the leave that ended the last delivery (judged return-counted)
    left = reason == "left" and message.returns > 0 and message.returned_delivery_seq == message.last_delivery_seq
    if attempt != message.deliveries or (reason != message.last_failure and not left):
        last_failure = message.failure_seqs[-1] if message.failure_seqs else None
        st._report(
            "dead-letter-mismatch",
            seq,
            [last_failure, seq],
            dead_letter_mismatch(
                *message.facts, message.deliveries, message.last_failure, last_failure, attempt, reason, seq
            ),
        )
