"""The rules of spec section 10 Negative acks, ack timeouts and retries.

Long because the section has many rules (answers, timeouts, extensions, back-off, attempts, the failure budget,
returns) and each brings its explanation and its check; splitting it would part a rule from its section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ks_conformance import explain
from ks_conformance.explain import (
    POISONED_AS,
    Explained,
    PoisonEvent,
    delivered_since_restart,
    extension_clause,
    failed,
    holder_ignored,
    last_delivered,
    message_clause,
)
from ks_conformance.rules.registry import NO_REDELIVERY, Abilities, Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Delivery, Message, OpState
    from ks_conformance.checks.state import CheckerState


def extending(a: Abilities) -> str | None:
    """An extension moves a timeout: it needs the op and timeouts (KS-RTY-8, KS-RTY-9)."""
    return need("extend" in a.ops, "op extend") or a.timeouts_drawn()


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


def attempt_miscount(key: str, offset: int, pub: int, deliveries: int, attempt: int, seq: int) -> Explained:
    """KS-RTY-5."""
    return (
        [message_clause(offset, key, pub) + delivered_since_restart(deliveries)],
        f"its delivery at seq {seq} carries attempt {attempt}, but attempts count deliveries: it must be "
        f"{deliveries + 1} (KS-RTY-5)",
        {"offset": offset, "attempt": attempt, "expected": deliveries + 1},
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
        need(a.failures and "tick" in a.ops, "op nack or capability ack_timeout") or a.above_zero("backoff_base")
    ),
)


def early_retry(
    key: str, offset: int, pub: int, failures: int, failure_seq: int | None, ends: int, now: int, seq: int
) -> Explained:
    """KS-RTY-4 (`ends`: the tick its back-off ends)."""
    return (
        [
            message_clause(offset, key, pub) + f", failure {failures} at seq {failure_seq}",
            f"its back-off ends at tick {ends}",
        ],
        f"m{offset} was delivered again at tick {now} [seq {seq}] before a phase 3 at or "
        "after the end of its back-off made it pending (KS-RTY-4)",
        {"offset": offset},
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


def retry_overrun(
    key: str,
    offset: int,
    pub: int,
    failures: int,
    failure_seqs: Sequence[int],
    maximum: int,
    seq: int,
    returns: int = 0,
) -> Explained:
    """KS-RTY-6, at a delivery (`returns`: the returns counted as failures under returns_as_failures)."""
    return (
        [message_clause(offset, key, pub) + failed(failures, failure_seqs, returns)],
        f"it was delivered again [seq {seq}], but after more than max_redeliveries = {maximum} failures a "
        "message is poisoned, not delivered (KS-RTY-6)",
        {"offset": offset, "failures": failures},
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


def stale_nack_accepted(
    key: str, offset: int, pub: int, last_delivery: int | None, consumer: str, seq: int
) -> Explained:
    """KS-RTY-1, a nack from a consumer that does not hold the message."""
    return (
        [message_clause(offset, key, pub) + last_delivered(last_delivery)],
        f"a nack from {consumer} [seq {seq}], which does not hold it, failed its delivery, but such a nack must "
        "change nothing (KS-RTY-1)",
        {"offset": offset, "consumer": consumer},
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


def holder_nack_ignored(key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int) -> Explained:
    """KS-RTY-1, a nack from the holder ignored."""
    return holder_ignored("nack", "KS-RTY-1", key, offset, pub, holder, delivery_seq, seq)


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
    needs=Abilities.timeouts_drawn,
)


def premature_timeout(
    key: str,
    offset: int,
    pub: int,
    holder: str | None,
    delivery_seq: int | None,
    consumer: str,
    now: int,
    why: str,
    seq: int,
) -> Explained:
    """KS-RTY-2 (`holder`: who holds its outstanding delivery, made at `delivery_seq`, or None)."""
    return (
        [
            message_clause(offset, key, pub)
            + (f", delivered to {holder} at seq {delivery_seq}" if holder is not None else "")
        ],
        f"it timed out at {consumer} at tick {now} [seq {seq}], but {why} (KS-RTY-2)",
        {"offset": offset, "consumer": consumer},
    )


EXTENDED_TIMEOUT_EARLY = define(
    "extended-timeout-early",
    "KS-RTY-8",
    Stage.EVENT,
    Scope.KEY,
    "a `timeout` of a delivery whose deadline an `extended` event moved to tick D, at a tick before D",
    witness="the delivery, the `extended` event, the `timeout`",
    exercised="a timeout of an extended delivery",
    needs=extending,
)


def extended_timeout_early(
    key: str,
    offset: int,
    pub: int,
    consumer: str,
    delivery_seq: int,
    extended_seq: int | None,
    deadline: int,
    now: int,
    seq: int,
) -> Explained:
    """KS-RTY-8, a timeout before the deadline an extension set."""
    return (
        [message_clause(offset, key, pub), extension_clause(offset, consumer, delivery_seq, extended_seq, deadline)],
        f"it timed out at tick {now} [seq {seq}], but an extended delivery must not time out before its new "
        "deadline (KS-RTY-8)",
        {"offset": offset, "consumer": consumer},
    )


ZOMBIE_EXTENSION = define(
    "zombie-extension",
    "KS-RTY-9",
    Stage.EVENT,
    Scope.KEY,
    "an `extended` event answering an `extend` op whose consumer does not hold the offset's outstanding delivery",
    witness="the `extend` op, the `extended` event",
    exercised="an `extend` from a consumer that does not hold the delivery",
    needs=extending,
)


def zombie_extension(
    key: str,
    offset: int,
    pub: int,
    consumer: str,
    op_seq: int,
    holder: str | None,
    holder_seq: int | None,
    seq: int,
) -> Explained:
    """KS-RTY-9, an extension applied for a consumer that does not hold the delivery (`holder`: who does, or None)."""
    held_by = f"{holder} [seq {holder_seq}]" if holder is not None else "nobody"
    return (
        [
            message_clause(offset, key, pub),
            f"{consumer} asks for more time with extend [seq {op_seq}], but m{offset}'s outstanding delivery is held "
            f"by {held_by}",
        ],
        f"the extension was applied (extended [seq {seq}]), but an extension from a consumer that does not hold "
        "the delivery must change nothing and be recorded as extend_ignored: applied, it keeps another consumer's "
        "delivery alive past its deadline (KS-RTY-9)",
        {"offset": offset, "consumer": consumer},
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


def return_counted(
    key: str,
    offset: int,
    pub: int,
    failures: int,
    returns: int,
    return_seq: int | None,
    maximum: int,
    event: PoisonEvent,
    seq: int,
) -> Explained:
    """KS-RTY-7 (`event`: what poisoned the message at `seq`)."""
    return (
        [
            message_clause(offset, key, pub) + f", failed {failures} times and returned {returns} times by a "
            f"leaving or evicted holder (last at seq {return_seq})",
            f"max_redeliveries = {maximum}",
        ],
        f"it was {POISONED_AS[event]} [seq {seq}], which only counting its returns as failures explains, but a "
        "returned message is pending at once without adding to its failure count (KS-RTY-7)",
        {"offset": offset, "returns": returns, "failures": failures},
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
    needs=Abilities.timeouts_drawn,
)


def missed_timeout(
    offset: int, holder: str, tick: int, delivery_seq: int, timeout: int, now: int, seq: int, slack: int = 0
) -> Explained:
    """KS-RTY-3 (the delivery to `holder` at `tick`; `seq`: the tick op; `slack`: timer_slack, KS-GEN-9)."""
    given = [f"timer_slack = {slack}"] if slack else []
    deadline = f"when tick {tick + timeout} begins" if not slack else f"by tick {tick + timeout + slack} at the latest"
    rule = "(KS-RTY-3)" if not slack else "(KS-RTY-3, KS-GEN-9)"
    return (
        [
            f"d = deliver(offset={offset}) to {holder} at tick {tick} [seq {delivery_seq}]",
            f"ack_timeout = {timeout}",
            *given,
        ],
        f"d is still outstanding after phase 1 of tick {now} [seq {seq}], but a delivery times out {deadline} {rule}",
        {"offset": offset, "consumer": holder},
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
    needs=extending,
)


def extended_timeout_missed(
    offset: int,
    holder: str,
    delivery_seq: int,
    extended_seq: int | None,
    deadline: int,
    now: int,
    seq: int,
    slack: int = 0,
) -> Explained:
    """KS-RTY-8, an extended delivery still outstanding after phase 1 of the tick its new deadline (plus slack) is."""
    given = [f"timer_slack = {slack}"] if slack else []
    when = f"when tick {deadline} begins" if not slack else f"by tick {deadline + slack} at the latest"
    rule = "(KS-RTY-8)" if not slack else "(KS-RTY-8, KS-GEN-9)"
    return (
        [extension_clause(offset, holder, delivery_seq, extended_seq, deadline), *given],
        f"the delivery is still outstanding after phase 1 of tick {now} [seq {seq}], but an extended delivery "
        f"times out at its new deadline, {when} {rule}",
        {"offset": offset, "consumer": holder},
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
    needs=extending,
)


def extension_lost(
    key: str, offset: int, pub: int, consumer: str, delivery_seq: int, op_seq: int, ignored_seq: int | None
) -> Explained:
    """KS-RTY-8, the holder's extension recorded as ignored (`ignored_seq`) or not answered at all (None)."""
    what = f"was recorded as extend_ignored [seq {ignored_seq}]" if ignored_seq is not None else "was not answered"
    return (
        [
            message_clause(offset, key, pub),
            f"{consumer} holds m{offset}'s outstanding delivery [seq {delivery_seq}] and asks for more time with "
            f"extend [seq {op_seq}]",
        ],
        f"the extension {what}, but an extension from the holder must move its delivery's timeout to now + ticks, "
        "recorded as an extended event (KS-RTY-8)",
        {"offset": offset, "consumer": consumer},
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


def poison_ignored(
    key: str,
    offset: int,
    pub: int,
    failures: int,
    failure_seqs: Sequence[int],
    maximum: int,
    policy: object,
    now: int,
    seq: int,
    returns: int = 0,
) -> Explained:
    """KS-RTY-6, after phase 2 of a tick (`seq`: the tick op; `returns` as for retry_overrun)."""
    return (
        [
            message_clause(offset, key, pub) + failed(failures, failure_seqs, returns),
            f"max_redeliveries = {maximum}, policy {policy!r}",
        ],
        f"after phase 2 of tick {now} [seq {seq}] it is neither resolved nor blocked, but a message "
        "that failed too often is poisoned in the first phase 2 after its failure (KS-RTY-6)",
        {"offset": offset},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def check_extension_answered(st: CheckerState, op: OpState) -> None:
    """The holder's `extend` must be answered by an `extended` event (KS-RTY-8): one answered by `extend_ignored`,
    or not at all, lost it."""
    assert op.extension is not None
    name, _, delivery = op.extension
    ignored = op.extension_ignored_seq
    if (op.extension_answered and ignored is None) or delivery is None:
        return
    message = st.messages.peek(delivery.offset)
    if message is None:
        return
    witness = [delivery.seq, op.seq] + ([ignored] if ignored is not None else [])
    # req: KS-RTY-8
    st._report(
        "extension-lost",
        st.last_seq,
        witness,
        extension_lost(*message.facts, name, delivery.seq, op.seq, ignored),
    )


def after_phase_1(st: CheckerState, op: OpState) -> None:
    """KS-RTY-3 and KS-RTY-8 after phase 1 of a tick: every delivery whose timeout (or extended deadline) was due
    has timed out."""
    timeout = int(st.config["ack_timeout"])
    for delivery in op.due_timeouts:
        message = st.messages.peek(delivery.offset)  # an archived message is not outstanding
        due = message is not None and message.outstanding is delivery and timeout > 0
        if due and delivery.deadline is not None:
            # req: KS-RTY-8
            st._report(
                "extended-timeout-missed",
                op.seq,
                [delivery.seq, delivery.extended_seq or delivery.seq, op.seq],
                extended_timeout_missed(
                    delivery.offset,
                    delivery.holder.name,
                    delivery.seq,
                    delivery.extended_seq,
                    delivery.deadline,
                    st.now,
                    op.seq,
                    st.timer_slack,
                ),
            )
        elif due:
            # req: KS-RTY-3
            st._report(
                "missed-timeout",
                op.seq,
                [delivery.seq, op.seq],
                missed_timeout(
                    delivery.offset,
                    delivery.holder.name,
                    delivery.tick,
                    delivery.seq,
                    timeout,
                    st.now,
                    op.seq,
                    st.timer_slack,
                ),
            )


def after_phase_2(st: CheckerState, op: OpState) -> None:
    """KS-RTY-6 after phase 2 of a tick: a message whose counted failures exceed the budget was dealt with as poison."""
    maximum = int(st.config["max_redeliveries"])
    for offset in sorted(st._over_budget):
        message = st.messages[offset]
        if message.resolved or message.blocked or st.counted_failures(message) <= maximum:
            continue
        marker = (offset, st.counted_failures(message))
        if marker in st._poison_reported:
            continue
        st._poison_reported.add(marker)
        # req: KS-RTY-6
        returns = message.returns if st.returns_as_failures else 0
        st._report(
            "poison-ignored",
            op.seq,
            [*message.failure_seqs, *([message.return_seq] if returns else []), op.seq],
            poison_ignored(
                *message.facts,
                message.failures,
                message.failure_seqs,
                maximum,
                st.config["poison_policy"],
                st.now,
                op.seq,
                returns=returns,
            ),
        )


def check_attempt(st: CheckerState, message: Message, seq: int, attempt: int) -> None:
    """KS-RTY-5 at a delivery: its attempt number counts every delivery of the message so far."""
    if st.best_effort:
        return
    # req: KS-RTY-5
    if message.deliveries > 0:
        st._exercise("attempt-miscount")
    if attempt != message.deliveries + 1:
        st._report(
            "attempt-miscount",
            seq,
            [message.last_delivery_seq, seq],
            attempt_miscount(*message.facts, message.deliveries, attempt, seq),
        )


def check_retry(st: CheckerState, message: Message, seq: int) -> None:
    """KS-RTY-4 at a delivery: a retry goes only once its back-off has passed."""
    if st.best_effort:
        return
    if message.retrying:
        # req: KS-RTY-4
        st._exercise("early-retry")
        # With a back-off of 0 the retry may also go at once, in the op that failed it (KS-RTY-4).
        immediate = st._retry_due(message) == message.failure_tick
        if not message.ready and not immediate:
            st._report(
                "early-retry",
                seq,
                [message.awaiting_seq, seq],
                early_retry(
                    *message.facts, message.failures, message.awaiting_seq, st._retry_due(message), st.now, seq
                ),
            )
    maximum = int(st.config["max_redeliveries"])
    # With returns_as_failures a message a return took over its budget may go again (a return is no failure):
    # its next failure poisons it (KS-RTY-6).
    counted = message.failures if st.ended_by_return(message) else st.counted_failures(message)
    if counted > maximum:
        # req: KS-RTY-6
        returns = message.returns if st.returns_as_failures else 0
        st._report(
            "retry-overrun",
            seq,
            [*message.failure_seqs, *([message.return_seq] if returns else []), seq],
            retry_overrun(*message.facts, message.failures, message.failure_seqs, maximum, seq, returns=returns),
        )


def returns_counted(st: CheckerState, message: Message, seq: int, event: explain.PoisonEvent) -> bool:
    """True (and `return-counted` reported) if a message was poisoned only because its returns counted."""
    maximum = int(st.config["max_redeliveries"])
    # req: KS-RTY-7
    if message.returns == 0 or message.failures > maximum or message.failures + message.returns <= maximum:
        return False
    if st.returns_as_failures:
        return True  # req: KS-RTY-6 (declared: the returns count, so the message is over its budget)
    st._report(
        "return-counted",
        seq,
        [message.returned_delivery_seq, message.return_seq, seq],
        return_counted(*message.facts, message.failures, message.returns, message.return_seq, maximum, event, seq),
    )
    return True


def check_zombie_extension(
    st: CheckerState, message: Message, name: str, delivery: Delivery | None, op: OpState, seq: int
) -> bool:
    """KS-RTY-9 at an `extended`: only the delivery the consumer holds now is extended. True if the extension
    answered a delivery that already ended (reported; the state is left as it was)."""
    current = message.outstanding
    if delivery is not None and current is delivery:
        return False
    holder, holder_seq = (current.holder.name, current.seq) if current is not None else (None, None)
    st._report(
        "zombie-extension",
        seq,
        [op.seq, seq],
        zombie_extension(*message.facts, name, op.seq, holder, holder_seq, seq),
    )
    return True


def check_nack_by_holder(st: CheckerState, message: Message, name: str, holds: bool, seq: int) -> None:
    """KS-RTY-1 at an accepted `nack`: it came from the consumer that holds the delivery (the handler sends an
    answer a seek cut to KS-CUR-11's check instead)."""
    if holds:
        st._exercise("holder-nack-ignored")
    else:
        st._exercise("stale-nack-accepted")
        st._report(
            "stale-nack-accepted",
            seq,
            [message.last_delivery_seq, seq],
            stale_nack_accepted(*message.facts, message.last_delivery_seq, name, seq),
        )


def check_timeout(st: CheckerState, message: Message, name: str, seq: int) -> None:
    """KS-RTY-2 and KS-RTY-8 at a `timeout`: the consumer held the delivery and its timeout (or the deadline an
    extension moved it to) was due."""
    timeout = int(st.config["ack_timeout"])
    delivery = message.outstanding
    at_consumer = delivery is not None and delivery.holder.name == name
    if at_consumer and delivery is not None and delivery.deadline is not None and timeout > 0:
        # req: KS-RTY-8 (an extended delivery times out at its new deadline, not before)
        if delivery.deadline != delivery.tick + timeout:
            st._exercise("extended-timeout-early")  # the extension really moved it
        if st.now < delivery.deadline:
            st._report(
                "extended-timeout-early",
                seq,
                [delivery.seq, delivery.extended_seq or delivery.seq, seq],
                extended_timeout_early(
                    *message.facts, name, delivery.seq, delivery.extended_seq, delivery.deadline, st.now, seq
                ),
            )
        return
    # req: KS-RTY-2
    st._exercise("premature-timeout")
    why = ""
    if timeout == 0:
        why = explain.TIMEOUTS_DISABLED
    elif not at_consumer:
        why = explain.not_outstanding_at(message.offset, name)
    elif delivery is not None and st.now < delivery.tick + timeout:
        why = explain.timeout_not_due(delivery.tick, timeout)
    if why:
        holder, holder_seq = (delivery.holder.name, delivery.seq) if delivery is not None else (None, None)
        st._report(
            "premature-timeout",
            seq,
            [holder_seq, seq],
            premature_timeout(*message.facts, holder, holder_seq, name, st.now, why, seq),
        )
