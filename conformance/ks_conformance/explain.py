"""The wording of every anomaly's explanation: its "Let" clauses, its "Then" sentence and its details.

One function per anomaly kind that a trace checker reports, in the order of the catalogue
(spec/checking.md section 2), each taking plain facts and returning `(let, then, details)`. The Python
checker (`ks_conformance.checks`) and the Spark validator (`ks_spark`) both call these functions, so
one violation reads the same in both. A kind whose texts differ with the situation has one function
per situation (`duplicate_resolved`, `duplicate_outstanding`); a "why" that a check chooses among
several has a phrase function beside its kind (`timeout_not_due`). Standard library only: Spark tasks
import it.

Long because the catalogue is: one function per kind and situation (60 kinds), kept in one
file so that each kind's wording reads beside its neighbours'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

Explained = tuple[list[str], str, dict[str, Any]]
"""An anomaly's "Let" clauses, its "Then" sentence, and its details."""

PoisonEvent = Literal["drop", "dead_letter", "key_blocked"]
"""The events that resolve or block a poisoned message (`return-counted` names which one)."""


# --- shared clauses -------------------------------------------------------------------------------------


def message_clause(offset: int, key: str, publish_seq: int) -> str:
    """How explanations name a message: m3 = publish(offset=3, key='k') [seq 7]."""
    return f"m{offset} = publish(offset={offset}, key={key!r}) [seq {publish_seq}]"


def ranges_text(offsets: Iterable[int] | None) -> str:
    """A set of offsets (iterated in increasing order) as at most five ranges, for explanations: `{3, 5-9, ...}`."""
    ranges: list[str] = []
    start = previous = -2
    for value in offsets or ():
        if value != previous + 1:
            if start >= 0:
                ranges.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = value
        previous = value
    if start >= 0:
        ranges.append(f"{start}" if start == previous else f"{start}-{previous}")
    shown = ranges[:5] + (["..."] if len(ranges) > 5 else [])
    return "{" + ", ".join(shown) + "}"


def _last_delivered(last_delivery: int | None) -> str:
    return f", last delivered at seq {last_delivery}" if last_delivery else ""


def _resolved_as(resolution: str | None, resolution_seq: int | None) -> str:
    return f", resolved as {resolution} at seq {resolution_seq}"


def _delivered_since_restart(deliveries: int) -> str:
    return f", delivered {deliveries} times since the last restart"


def _failed(failures: int, failure_seqs: Sequence[int], returns: int = 0) -> str:
    failed = f", failed {failures} times (seqs {', '.join(map(str, failure_seqs))})"
    if returns:
        failed += (
            f" and returned {returns} times by a holder that left, each counted as a failure (returns_as_failures)"
        )
    return failed


def _blocked_its_key(blocked_seq: int | None) -> str:
    return f", which blocked its key at seq {blocked_seq}"


def _joined_with_filters(consumer: str, filters: Sequence[str], added_seq: int) -> str:
    return f"{consumer} joined with filters {list(filters)} [seq {added_seq}]"


def _disconnected(consumer: str, disconnected_seq: int | None) -> str:
    return f"{consumer} disconnected at seq {disconnected_seq}"


def _only_changed(changed: str, change: str, change_seq: int) -> str:
    what = "joined" if change == "join" else "left"
    return f"only {changed} {what} [seq {change_seq}]"


def _bucket_of(bucket: int, segment: int) -> str:
    return f"bucket {bucket} of segment {segment}"


# --- 2.1 checked at each event ---------------------------------------------------------------------------


def key_reorder(key: str, offset: int, pub: int, earlier: int, earlier_pub: int, seq: int) -> Explained:
    """KS-ORD-1."""
    return (
        [message_clause(earlier, key, earlier_pub), message_clause(offset, key, pub)],
        f"m{earlier} precedes m{offset} in key {key!r} and was never delivered, yet m{offset} was "
        f"delivered for the first time [seq {seq}] while m{earlier} is unresolved (KS-ORD-1)",
        {"offset": offset, "key": key, "earlier": earlier},
    )


def overtaken_hold(
    key: str, offset: int, pub: int, held: int, held_pub: int, held_seq: int | None, seq: int
) -> Explained:
    """KS-FLW-3."""
    return (
        [message_clause(held, key, held_pub) + f", held at seq {held_seq}", message_clause(offset, key, pub)],
        f"m{offset} was delivered for the first time [seq {seq}] while the held m{held} of the same "
        "key is unresolved and undelivered, but a held message keeps its place (KS-FLW-3)",
        {"offset": offset, "key": key, "earlier": held},
    )


def strict_overlap(key: str, offset: int, pub: int, earlier: int, earlier_pub: int, seq: int) -> Explained:
    """KS-ORD-2."""
    return (
        [message_clause(earlier, key, earlier_pub), message_clause(offset, key, pub)],
        f"m{earlier} precedes m{offset} in key {key!r} and is unresolved, yet "
        f"m{offset} was delivered [seq {seq}]; the strict profile delivers nothing of a key while an "
        "earlier message of it is unresolved (KS-ORD-2)",
        {"offset": offset, "key": key, "earlier": earlier},
    )


def retry_overtaken(
    key: str, offset: int, pub: int, waiting: int, waiting_pub: int, awaiting_seq: int | None, seq: int
) -> Explained:
    """KS-ORD-3."""
    return (
        [
            message_clause(waiting, key, waiting_pub) + f", awaiting redelivery since seq {awaiting_seq}",
            message_clause(offset, key, pub),
        ],
        f"m{offset} was delivered [seq {seq}] before m{waiting}, an earlier message of its key that "
        "awaits redelivery (KS-ORD-3)",
        {"offset": offset, "key": key, "earlier": waiting},
    )


def split_owner(
    key: str, offset: int, pub: int, other_offset: int, other_holder: str, other_seq: int, consumer: str, seq: int
) -> Explained:
    """KS-DRN-1."""
    return (
        [
            f"d = deliver(offset={other_offset}, key={key!r}) to {other_holder} [seq {other_seq}], still outstanding",
            message_clause(offset, key, pub),
        ],
        f"m{offset} of the same key was delivered to {consumer} [seq {seq}] while "
        f"{other_holder} holds d, but a key has one holder at a time (KS-DRN-1)",
        {"offset": offset, "key": key, "consumer": consumer, "other": other_holder},
    )


def blocked_key_leak(
    key: str, offset: int, pub: int, blocked: int, blocked_pub: int, blocked_seq: int | None, seq: int
) -> Explained:
    """KS-POI-3."""
    return (
        [message_clause(blocked, key, blocked_pub) + _blocked_its_key(blocked_seq), message_clause(offset, key, pub)],
        f"m{offset} was delivered [seq {seq}] while its key is blocked, but nothing of a blocked key "
        "may be delivered until an operator releases or skips it (KS-POI-3)",
        {"offset": offset, "key": key},
    )


def duplicate_resolved(
    key: str, offset: int, pub: int, resolution: str | None, resolution_seq: int | None, seq: int
) -> Explained:
    """KS-RES-2, after a resolution."""
    return (
        [message_clause(offset, key, pub) + _resolved_as(resolution, resolution_seq)],
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


def resurrected(
    key: str, offset: int, pub: int, cursor: int, persist_seq: int | None, restart_seq: int, seq: int
) -> Explained:
    """KS-CUR-4: an offset below the persisted cursor, or else in its holes, delivered after a restart."""
    where = f"below the persisted cursor {cursor}" if offset < cursor else "a persisted ack hole"
    return (
        [message_clause(offset, key, pub), f"the store recorded cursor {cursor} at seq {persist_seq}"],
        f"after the restart [seq {restart_seq}] m{offset}, {where}, was delivered [seq {seq}], but "
        "what the store recorded is not delivered again (KS-CUR-4)",
        {"offset": offset},
    )


def seek_resurrected(
    key: str, offset: int, pub: int, target: int, seek_seq: int, resolution: str | None, seq: int
) -> Explained:
    """KS-CUR-9: an offset below a seek's target delivered after the seek."""
    given_up = "given up by it" if resolution == "seeked" else "resolved"
    return (
        [message_clause(offset, key, pub), f"the seek at seq {seek_seq} moved the cursor to {target}"],
        f"m{offset} lies below the target ({given_up}), yet it was delivered [seq {seq}] after the seek, but a seek "
        "gives up everything below its target (KS-CUR-9)",
        {"offset": offset},
    )


def seek_stale_ack(key: str, offset: int, pub: int, consumer: str, seek_seq: int, what: str, seq: int) -> Explained:
    """KS-CUR-11: a result for a delivery the seek cut was accepted."""
    return (
        [
            message_clause(offset, key, pub),
            f"{consumer} held a delivery of m{offset} that the seek at seq {seek_seq} ended, and holds none since",
        ],
        f"the {what} at seq {seq} from {consumer} was accepted, but a result for a delivery made before a seek "
        "changes nothing: the replayed message waits for its new delivery's result (KS-CUR-11)",
        {"offset": offset, "consumer": consumer},
    )


def filter_violation(
    key: str, offset: int, pub: int, consumer: str, filters: Sequence[str], added_seq: int, seq: int
) -> Explained:
    """KS-FLT-2."""
    return (
        [_joined_with_filters(consumer, filters, added_seq), message_clause(offset, key, pub)],
        f"no filter of {consumer} matches {key!r}, yet m{offset} was delivered to {consumer} [seq {seq}] (KS-FLT-2)",
        {"offset": offset, "consumer": consumer},
    )


def inactive_delivery_to_non_member(
    key: str, offset: int, pub: int, consumer: str, ended_seq: int | None, seq: int
) -> Explained:
    """KS-MEM-3, to a consumer that is not a member (`ended_seq`: where its last incarnation ended, if any)."""
    return (
        [
            not_a_member(consumer) + (f" (its last incarnation ended at seq {ended_seq})" if ended_seq else ""),
            message_clause(offset, key, pub),
        ],
        f"m{offset} was delivered to {consumer} [seq {seq}], but only connected members receive messages (KS-MEM-3)",
        {"offset": offset, "consumer": consumer},
    )


def inactive_delivery_to_disconnected(
    key: str, offset: int, pub: int, consumer: str, disconnected_seq: int | None, seq: int
) -> Explained:
    """KS-MEM-3, to a disconnected member."""
    return (
        [_disconnected(consumer, disconnected_seq), message_clause(offset, key, pub)],
        f"m{offset} was delivered to {consumer} [seq {seq}] while it is disconnected, but only connected "
        "members receive messages (KS-MEM-3)",
        {"offset": offset, "consumer": consumer},
    )


def capacity_overrun(
    offset: int, consumer: str, capacity: int, added_seq: int, outstanding: Sequence[int], seq: int
) -> Explained:
    """KS-FLW-1 (`outstanding`: the seqs of the consumer's outstanding deliveries, ascending)."""
    held = len(outstanding)
    return (
        [
            f"{consumer} joined with capacity {capacity} [seq {added_seq}]",
            f"{consumer} holds {held} outstanding deliveries (seqs {', '.join(map(str, outstanding))})",
        ],
        f"m{offset} was delivered to {consumer} [seq {seq}], leaving it {held + 1} outstanding "
        f"deliveries, more than its capacity (KS-FLW-1)",
        {"offset": offset, "consumer": consumer},
    )


def permit_overrun(
    offset: int, consumer: str, capacity: int, added_seq: int, grants: Sequence[int], seq: int
) -> Explained:
    """KS-FLW-4 (`grants`: the seqs of the consumer's permits_granted events, ascending)."""
    granted = f", then granted more permits at seqs {', '.join(map(str, grants))}" if grants else ""
    return (
        [f"{consumer} joined with capacity {capacity} [seq {added_seq}]: its first {capacity} permits{granted}"],
        f"m{offset} was delivered to {consumer} [seq {seq}] after its deliveries had used every permit it granted: "
        "a delivery needs a permit (KS-FLW-4)",
        {"offset": offset, "consumer": consumer},
    )


def window_overrun(
    key: str, offset: int, pub: int, window: int, below: int, seq: int, parked: int | None = None
) -> Explained:
    """KS-FLW-2 (`parked`: with park_after set, the earlier parked offsets left out of `below`, KS-ISO-4)."""
    unparked = "" if parked is None else f" and not parked ({parked} more are parked, KS-ISO-4)"
    return (
        [message_clause(offset, key, pub), f"window = {window}"],
        f"m{offset} was delivered for the first time [seq {seq}] while {below} earlier offsets are "
        f"unresolved{unparked}, but a first delivery needs fewer than window of them (KS-FLW-2)",
        {"offset": offset, "unresolved_below": below},
    )


def attempt_miscount(key: str, offset: int, pub: int, deliveries: int, attempt: int, seq: int) -> Explained:
    """KS-RTY-5."""
    return (
        [message_clause(offset, key, pub) + _delivered_since_restart(deliveries)],
        f"its delivery at seq {seq} carries attempt {attempt}, but attempts count deliveries: it must be "
        f"{deliveries + 1} (KS-RTY-5)",
        {"offset": offset, "attempt": attempt, "expected": deliveries + 1},
    )


def key_moved(key: str, offset: int, pub: int, previous: str, previous_seq: int, consumer: str, seq: int) -> Explained:
    """KS-ASN-1."""
    return (
        [f"key {key!r} was delivered to {previous} at seq {previous_seq}", message_clause(offset, key, pub)],
        f"m{offset} was delivered to {consumer} [seq {seq}] with no membership change since, but a key "
        "has one target per membership epoch (KS-ASN-1)",
        {"key": key, "consumer": consumer, "other": previous},
    )


def unstable_assignment(
    key: str,
    offset: int,
    previous: str,
    previous_seq: int,
    changed: str,
    change: str,
    change_seq: int,
    consumer: str,
    selector: object,
    seq: int,
) -> Explained:
    """KS-ASN-2 (`change`: "join" or "leave", by `changed`)."""
    rule = (
        "a membership change moves a key only away from a leaving consumer: a joiner takes no partition from a "
        "present consumer (KS-ASN-2)"
        if selector == "partitions"
        else "a membership change moves a key only to a joining consumer or away from a leaving one (KS-ASN-2)"
    )
    return (
        [
            f"key {key!r} was delivered to {previous} at seq {previous_seq}",
            "then " + _only_changed(changed, change, change_seq),
        ],
        f"m{offset} went to {consumer} [seq {seq}], but with selector {selector!r} {rule}",
        {"key": key, "consumer": consumer, "other": previous},
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
        [message_clause(offset, key, pub) + _failed(failures, failure_seqs, returns)],
        f"it was delivered again [seq {seq}], but after more than max_redeliveries = {maximum} failures a "
        "message is poisoned, not delivered (KS-RTY-6)",
        {"offset": offset, "failures": failures},
    )


def stale_ack_accepted(
    key: str,
    offset: int,
    pub: int,
    last_delivery: int | None,
    holder: str | None,
    holder_seq: int | None,
    consumer: str,
    seq: int,
) -> Explained:
    """KS-ACK-2 (`holder`: who holds its outstanding delivery, at `holder_seq`, or None)."""
    held_by = f"{holder} [seq {holder_seq}]" if holder is not None else "nobody"
    return (
        [
            message_clause(offset, key, pub) + _last_delivered(last_delivery),
            f"its outstanding delivery is held by {held_by}",
        ],
        f"an ack from {consumer} [seq {seq}], which does not hold it, resolved m{offset}, but such an ack "
        "must be ignored and recorded (KS-ACK-2)",
        {"offset": offset, "consumer": consumer},
    )


def _holder_ignored(
    what: str, requirement: str, key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int
) -> Explained:
    return (
        [message_clause(offset, key, pub) + f", delivered to {holder} at seq {delivery_seq} and outstanding there"],
        f"the {what} from its holder {holder} was ignored [seq {seq}], but a {what} from the holder "
        f"must end the delivery ({requirement})",
        {"offset": offset, "consumer": holder},
    )


def holder_ack_ignored(key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int) -> Explained:
    """KS-ACK-1."""
    return _holder_ignored("ack", "KS-ACK-1", key, offset, pub, holder, delivery_seq, seq)


def stale_nack_accepted(
    key: str, offset: int, pub: int, last_delivery: int | None, consumer: str, seq: int
) -> Explained:
    """KS-RTY-1, a nack from a consumer that does not hold the message."""
    return (
        [message_clause(offset, key, pub) + _last_delivered(last_delivery)],
        f"a nack from {consumer} [seq {seq}], which does not hold it, failed its delivery, but such a nack must "
        "change nothing (KS-RTY-1)",
        {"offset": offset, "consumer": consumer},
    )


def holder_nack_ignored(key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int) -> Explained:
    """KS-RTY-1, a nack from the holder ignored."""
    return _holder_ignored("nack", "KS-RTY-1", key, offset, pub, holder, delivery_seq, seq)


def _ended_delivery(consumer: str, offset: int, attempt: int, op: str, op_seq: int) -> str:
    return (
        f"the delivery of m{offset} to {consumer} (attempt {attempt}) had ended, and {op} [seq {op_seq}] reports "
        f"{consumer}'s result for it late"
    )


def zombie_accepted(
    key: str,
    offset: int,
    pub: int,
    op: str,
    consumer: str,
    attempt: int,
    op_seq: int,
    holder: str | None,
    holder_seq: int | None,
    effect: str,
    seq: int,
) -> Explained:
    """KS-ACK-3 (`effect`: the `ack` or `nack` the late result caused; `holder`: who holds m's current delivery)."""
    held_by = f"{holder} [seq {holder_seq}]" if holder is not None else "nobody"
    did = "resolved" if effect == "ack" else "failed the current delivery of"
    return (
        [
            message_clause(offset, key, pub),
            _ended_delivery(consumer, offset, attempt, op, op_seq),
            f"m{offset}'s current delivery is held by {held_by}",
        ],
        f"the {effect} at seq {seq} {did} m{offset} on that result, but a result for a delivery that ended must be "
        "ignored and recorded, with no other effect (KS-ACK-3)",
        {"offset": offset, "consumer": consumer, "attempt": attempt},
    )


def zombie_ack_ignored(
    key: str, offset: int, pub: int, consumer: str, attempt: int, op_seq: int, seq: int
) -> Explained:
    """KS-ACK-3 under `ack_by_id`: a zombie ack of an unresolved message that was ignored."""
    return (
        [
            message_clause(offset, key, pub) + ", unresolved",
            _ended_delivery(consumer, offset, attempt, "zombie_ack", op_seq),
            "the configuration declares ack_by_id = true",
        ],
        f"the ack_ignored at seq {seq} left m{offset} unresolved, but with ack_by_id an ack names the message, so "
        "it must resolve it (KS-ACK-3)",
        {"offset": offset, "consumer": consumer, "attempt": attempt},
    )


TIMEOUTS_DISABLED = "ack_timeout is 0, which disables timeouts"
"""Why a timeout is premature (KS-RTY-2): there are no timeouts."""


def not_outstanding_at(offset: int, consumer: str) -> str:
    """Why a timeout is premature (KS-RTY-2): the consumer does not hold the message."""
    return f"m{offset} has no outstanding delivery at {consumer}"


def timeout_not_due(tick: int, timeout: int) -> str:
    """Why a timeout is premature (KS-RTY-2): the delivery at `tick` is not due yet."""
    return f"it was delivered at tick {tick} and the ack timeout is {timeout}: no timeout before tick {tick + timeout}"


def _extension_clause(offset: int, consumer: str, delivery_seq: int, extended_seq: int | None, deadline: int) -> str:
    moved = f"an extension [seq {extended_seq}] moved" if extended_seq is not None else "an extension moved"
    return f"m{offset} was delivered to {consumer} [seq {delivery_seq}], and {moved} its timeout to tick {deadline}"


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
        [message_clause(offset, key, pub), _extension_clause(offset, consumer, delivery_seq, extended_seq, deadline)],
        f"it timed out at tick {now} [seq {seq}], but an extended delivery must not time out before its new "
        "deadline (KS-RTY-8)",
        {"offset": offset, "consumer": consumer},
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


def double_resolution(
    key: str, offset: int, pub: int, resolution: str | None, resolution_seq: int | None, again: str, seq: int
) -> Explained:
    """KS-RES-1, a second resolution (`again`) of a resolved message."""
    return (
        [message_clause(offset, key, pub) + _resolved_as(resolution, resolution_seq)],
        f"it was resolved again as {again} [seq {seq}], but a message leaves the subscription at most "
        "once between restarts (KS-RES-1)",
        {"offset": offset},
    )


def wrong_poison_policy(policy: object, wanted: str) -> str:
    """Why a resolution is unjustified (KS-RES-1): the configured poison policy does not resolve this way."""
    return f"the poison policy is {policy!r}, not {wanted!r}"


def not_over_budget(failures: int, maximum: int) -> str:
    """Why a poison resolution is unjustified (KS-RES-1): the message did not fail often enough."""
    return f"it failed {failures} times, not more than max_redeliveries = {maximum}"


NO_OPERATOR_SKIP = "no operator skip of its key happened in this op"
"""Why a drop with reason `operator` is unjustified (KS-RES-1)."""


def best_effort_reason(reason: str) -> str:
    """Why a drop is unjustified (KS-RES-1): its reason exists only in best-effort."""
    return f"reason {reason!r} exists only in the best-effort profile"


def delivery_outstanding(holder: str, delivery_seq: int) -> str:
    """Why a resolution is unjustified (KS-RES-1): the message is still out at a consumer."""
    return f"its delivery to {holder} [seq {delivery_seq}] is outstanding"


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


def unjustified_filter(
    key: str, offset: int, pub: int, taker: str, filters: Sequence[str], added_seq: int, seq: int
) -> Explained:
    """KS-FLT-3, a `filter` of a key that the member `taker` accepts."""
    return (
        [message_clause(offset, key, pub), _joined_with_filters(taker, filters, added_seq) + ", accepting it"],
        f"m{offset} was resolved as filtered [seq {seq}], but only keys nobody accepts are filtered (KS-FLT-3)",
        {"offset": offset, "consumer": taker},
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


def filtered_without_members(key: str, offset: int, pub: int, seq: int) -> Explained:
    """KS-FLT-4."""
    return (
        [message_clause(offset, key, pub), "the subscription has no member"],
        f"m{offset} was resolved as filtered [seq {seq}], but with no member at all messages wait (KS-FLT-4)",
        {"offset": offset},
    )


_POISONED_AS: dict[str, str] = {
    "drop": "dropped as poison",
    "dead_letter": "dead-lettered",
    "key_blocked": "blocked as poison",
}


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
        f"it was {_POISONED_AS[event]} [seq {seq}], which only counting its returns as failures explains, but a "
        "returned message is pending at once without adding to its failure count (KS-RTY-7)",
        {"offset": offset, "returns": returns, "failures": failures},
    )


def unjustified_block(key: str, offset: int, pub: int, failures: int, maximum: int, seq: int) -> Explained:
    """KS-POI-3, a `key_blocked` of a message that is not poisoned."""
    return (
        [message_clause(offset, key, pub) + f", failed {failures} times, max_redeliveries = {maximum}"],
        f"it blocked its key [seq {seq}], but only a poisoned message (more than max_redeliveries failures) "
        "blocks its key (KS-POI-3)",
        {"offset": offset, "failures": failures},
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
            + _delivered_since_restart(deliveries)
            + f", last failure {last_failure!r}{at}"
        ],
        f"its dead letter [seq {seq}] says attempt {attempt} and reason {reason!r}, but it must carry the "
        "attempt count and the reason of the last failure (KS-POI-2)",
        {"offset": offset},
    )


def cursor_skip(key: str, offset: int, pub: int, cursor: int, passes: bool, seq: int) -> Explained:
    """KS-CUR-1 (`passes`: the cursor passes the offset; else the persisted holes include it)."""
    where = f"cursor {cursor} passes it" if passes else "the persisted holes include it"
    return (
        [message_clause(offset, key, pub) + ", unresolved"],
        f"the persisted cursor [seq {seq}]: {where}, but a persisted cursor never passes an unresolved "
        "offset (KS-CUR-1)",
        {"offset": offset, "cursor": cursor},
    )


def cursor_regress(cursor: int, previous: int, previous_seq: int, seq: int) -> Explained:
    """KS-CUR-2."""
    return (
        [f"the cursor was persisted as {previous} at seq {previous_seq}"],
        f"it was persisted as {cursor} [seq {seq}], lower, but a persisted cursor never moves backwards (KS-CUR-2)",
        {"cursor": cursor, "previous": previous},
    )


def phase_order(tick_seq: int, phase: int, effect: str, seq: int, after_phase: int, after_seq: int | None) -> Explained:
    """KS-GEN-7: an `effect` of `phase` after an effect of the later `after_phase` in one tick."""
    return (
        [f"t = the tick at seq {tick_seq}"],
        f"an effect of phase {phase} ({effect}, seq {seq}) came after an effect of phase "
        f"{after_phase} (seq {after_seq}) within t, but the phases of a tick run in order (KS-GEN-7)",
        {"phase": phase, "after_phase": after_phase},
    )


def evicted_at(consumer: str, now: int, seq: int) -> str:
    """An eviction, as `premature_eviction` and `reconnect_ignored` name it."""
    return f"{consumer} was evicted at tick {now} [seq {seq}]"


def not_a_member(consumer: str) -> str:
    """Why an eviction is premature (KS-MEM-2), or a delivery inactive (KS-MEM-3)."""
    return f"{consumer} is not a member"


def still_connected(consumer: str) -> str:
    """Why an eviction is premature (KS-MEM-2): the member is connected."""
    return f"{consumer} is connected"


EVICTION_DISABLED = "evict_after is 0, which disables eviction"
"""Why an eviction is premature (KS-MEM-2): there are no evictions."""


def eviction_not_due(disconnected_at: int, evict_after: int, now: int) -> str:
    """Why an eviction is premature (KS-MEM-2): the member has not been away long enough."""
    return (
        f"it disconnected at tick {disconnected_at}, so its eviction is due at tick "
        f"{disconnected_at + evict_after}, not {now}"
    )


def premature_eviction(consumer: str, now: int, why: str, seq: int) -> Explained:
    """KS-MEM-2, an eviction before it is due."""
    return ([evicted_at(consumer, now, seq)], f"{why} (KS-MEM-2)", {"consumer": consumer})


def held_inactive(offset: int, consumer: str, seq: int) -> str:
    """A hold for an inactive member, as `reconnect_ignored` names it."""
    return f"m{offset} was held [seq {seq}] because {consumer} is inactive"


def reconnect_ignored(consumer: str, disconnected_seq: int | None, reconnected_seq: int | None, what: str) -> Explained:
    """KS-MEM-4 (`what`: the eviction or hold that treats the member as away, `evicted_at` or `held_inactive`)."""
    return (
        [
            _disconnected(consumer, disconnected_seq),
            f"{consumer} reconnected at seq {reconnected_seq} and has not disconnected since",
        ],
        f"{what}, but a reconnected member is connected again with all it holds, and its eviction is off (KS-MEM-4)",
        {"consumer": consumer},
    )


def unjustified_hold(
    key: str, offset: int, pub: int, slot: int, target: str | None, unmoved: int | None, seq: int
) -> Explained:
    """KS-DRN-2 with KS-DRN-3, a hold for draining of a slot whose target did not move (`target`: the one the hold
    names, if any; `unmoved`: the latest outstanding delivery of the slot, at the target or of the current epoch)."""
    where = f"at {target} or delivered" if target is not None else "delivered"
    holds = (
        f"what is outstanding of slot {slot} sits at its target ({where} since the last membership change; the "
        f"latest at seq {unmoved})"
        if unmoved is not None
        else f"nothing of slot {slot} is outstanding"
    )
    toward = f"toward its target {target}" if target is not None else "without naming a target"
    facts: dict[str, object] = {"key": key, "offset": offset, "slot": slot}
    if target is not None:
        facts["consumer"] = target
    return (
        [message_clause(offset, key, pub), f"m{offset} was held [seq {seq}] for draining {toward}"],
        f"{holds}, and no key of the slot awaits redelivery or is blocked: no old owner holds the slot, so "
        "nothing drains (KS-DRN-3), and a hold for draining stops when nothing drains (KS-DRN-2)",
        facts,
    )


def misrouted_bucket_wrong_segment(
    key: str, offset: int, pub: int, hash_: int, right: int, right_seq: int, placed: int
) -> Explained:
    """KS-BKT-1, a publish placed in another segment than the active one `right`, created at `right_seq`."""
    high = hash_ >> 16
    return (
        [message_clause(offset, key, pub) + f" with hash {hash_} (hash >> 16 = {high})"],
        f"the active segment containing {high} is {right} [seq {right_seq}], yet "
        f"m{offset} was placed in segment {placed} (KS-BKT-1)",
        {"offset": offset},
    )


def misrouted_bucket_wrong_bucket(
    key: str, offset: int, pub: int, hash_: int, buckets: int, created_seq: int, placed: int
) -> Explained:
    """KS-BKT-1, a publish placed in another bucket of its segment (of `buckets`, created at `created_seq`)."""
    low = hash_ & 0xFFFF
    return (
        [
            message_clause(offset, key, pub) + f" with hashB = hash & 0xFFFF = {low}",
            f"N = {buckets} [seq {created_seq}]",
        ],
        f"its bucket must be floor({low} * {buckets} / 65536) = {low * buckets // 65536}, yet "
        f"it was placed in bucket {placed} (KS-BKT-1)",
        {"offset": offset},
    )


def bucket_misassigned_sorted(
    key: str,
    offset: int,
    pub: int,
    segment: int,
    buckets: int,
    bucket: int,
    names: list[str],
    owner: str,
    consumer: str,
    seq: int,
) -> Explained:
    """KS-BKT-3 with `bucket_assignment = "sorted"`: the bucket went to another member than its `owner`."""
    return (
        [
            message_clause(offset, key, pub) + f" in segment {segment} (N = {buckets}), bucket {bucket}",
            f"the members sorted by name are {names}, rotated by {segment % max(1, len(names))} for segment {segment}",
        ],
        f"bucket {bucket} belongs to {owner}, yet m{offset} was delivered to {consumer} [seq {seq}] (KS-BKT-3)",
        {"offset": offset, "consumer": consumer, "owner": owner},
    )


def bucket_misassigned_moved(
    offset: int, bucket: int, segment: int, previous: str, previous_seq: int, consumer: str, seq: int
) -> Explained:
    """KS-BKT-3 with another policy: the bucket went to two consumers within one epoch."""
    return (
        [
            f"{_bucket_of(bucket, segment)} was delivered to {previous} at seq {previous_seq}",
            "no membership change since",
        ],
        f"m{offset} of it went to {consumer} [seq {seq}], but a bucket has one target at a time (KS-BKT-3)",
        {"offset": offset, "consumer": consumer, "owner": previous},
    )


def unacked_overrun(offset: int, consumer: str, limit: int, blocked_seq: int, held: int, seq: int) -> Explained:
    """KS-FLW-1 with `max_unacked`: a delivery to a consumer blocked at the limit, not yet down to half of it."""
    return (
        [
            f"{consumer} reached max_unacked = {limit} outstanding deliveries at seq {blocked_seq}",
            f"it holds {held} now, above half the limit ({limit // 2})",
        ],
        f"m{offset} was delivered to it [seq {seq}], but a consumer blocked at max_unacked gets nothing until it "
        "holds half the limit or less (KS-FLW-1)",
        {"offset": offset, "consumer": consumer, "max_unacked": limit},
    )


def bucket_move_unannounced(
    offset: int, bucket: int, segment: int, target: str, decided_seq: int, consumer: str, seq: int
) -> Explained:
    """KS-BKT-3 with `controller_moves`: a delivery to a consumer the bucket's last announcement does not name."""
    return (
        [
            f"{_bucket_of(bucket, segment)} was last announced to {target} at seq {decided_seq}",
            "controller_moves: every move of a bucket is announced before its first delivery to the new target",
        ],
        f"m{offset} of it went to {consumer} [seq {seq}], but a bucket has one target at a time, the one "
        "announced last (KS-BKT-3)",
        {"offset": offset, "consumer": consumer, "owner": target},
    )


def buckets_over_share(moved: int, segment: int, joiner: str, buckets: int, members: int, share: int) -> str:
    """Why a join moved too much (KS-BKT-8): more than ceil(N/k) buckets of a segment went to the joiner."""
    return (
        f"{moved} buckets of segment {segment} moved to {joiner}, more than ceil(N/k) = "
        f"ceil({buckets}/{members}) = {share}"
    )


def bucket_moved_by(
    changed: str, change: str, change_seq: int, bucket: int, segment: int, previous: str, consumer: str
) -> str:
    """Why a bucket's move is unstable (KS-BKT-8): the join or leave of `changed` does not explain it."""
    moved = f"{_bucket_of(bucket, segment)} moved from {previous} to {consumer}"
    return f"{_only_changed(changed, change, change_seq)}, yet {moved}"


def _bucket_rule(why: str, policy: object) -> str:
    """The "Then" sentence of KS-BKT-8, judged on deliveries or on the implementation's own handoffs."""
    return (
        f"{why}, but a join moves buckets only to the joiner, at most ceil(N/k), and a leave only the leaver's "
        f"(KS-BKT-8, bucket_assignment {policy!r})"
    )


def unstable_buckets(
    offset: int,
    bucket: int,
    segment: int,
    previous: str,
    previous_seq: int,
    consumer: str,
    policy: object,
    why: str,
    seq: int,
) -> Explained:
    """KS-BKT-8 (`why`: `buckets_over_share` or `bucket_moved_by`)."""
    return (
        [
            f"{_bucket_of(bucket, segment)} was delivered to {previous} at seq {previous_seq}",
            f"m{offset} went to {consumer}",
        ],
        _bucket_rule(why, policy),
        {"offset": offset, "consumer": consumer, "other": previous},
    )


def unstable_bucket_decision(
    event: str,
    bucket: int,
    segment: int,
    previous: str,
    previous_seq: int,
    target: str,
    policy: object,
    why: str,
    seq: int,
) -> Explained:
    """KS-BKT-8 judged on the implementation's own `bucket_assigned` or `bucket_withheld`."""
    done = "handed" if event == "bucket_assigned" else "withheld for a handoff"
    return (
        [
            f"{_bucket_of(bucket, segment)} was last given to {previous} at seq {previous_seq}",
            f"at seq {seq} ({event}) it was {done} to {target}",
        ],
        _bucket_rule(why, policy),
        {"consumer": target, "other": previous},
    )


def bucket_split_owner(
    key: str,
    offset: int,
    pub: int,
    bucket: tuple[int, int],
    holder: str,
    held: int,
    held_seq: int,
    consumer: str,
    seq: int,
) -> Explained:
    """KS-BKT-4 (`bucket`: (segment, bucket); `holder` holds m`held` of it, delivered at `held_seq`)."""
    return (
        [f"{holder} holds m{held} of bucket {bucket} [seq {held_seq}]", message_clause(offset, key, pub)],
        f"m{offset} of the same bucket was delivered to {consumer} [seq {seq}], but a moving bucket is "
        "withheld until its prior owner drains (KS-BKT-4)",
        {"offset": offset, "bucket": list(bucket)},
    )


def successor_first(
    offset: int,
    segment: int,
    lo: int,
    hi: int,
    predecessor: int,
    earlier_key: str,
    earlier: int,
    earlier_pub: int,
    seq: int,
) -> Explained:
    """KS-BKT-5 (m`earlier`: an unresolved message of an ancestor, `predecessor`, whose hash lies in [lo, hi])."""
    return (
        [
            message_clause(earlier, earlier_key, earlier_pub) + f" in segment {predecessor}, unresolved",
            f"segment {segment} succeeds it over [{lo}, {hi}]",
        ],
        f"m{offset} of segment {segment} was delivered [seq {seq}] before the "
        "predecessor drained that range (KS-BKT-5)",
        {"offset": offset},
    )


def checkpoint_skip_passes(
    key: str, offset: int, pub: int, bucket: tuple[int, int], cursor: int, seq: int
) -> Explained:
    """KS-BKT-6, a checkpoint above an unresolved message of its (segment, bucket)."""
    return (
        [message_clause(offset, key, pub) + f" in bucket {list(bucket)}, unresolved"],
        f"the checkpoint {cursor} of that bucket [seq {seq}] passes it, but a checkpoint never passes an "
        "unresolved message of its bucket (KS-BKT-6)",
        {"offset": offset, "cursor": cursor},
    )


def checkpoint_skip_regress(
    bucket: tuple[int, int], previous: int, previous_seq: int, cursor: int, seq: int
) -> Explained:
    """KS-BKT-6, a checkpoint below the previous one of its (segment, bucket)."""
    return (
        [f"bucket {list(bucket)} was checkpointed at {previous} [seq {previous_seq}]"],
        f"it was checkpointed at {cursor} [seq {seq}], lower, but a checkpoint never lies below an earlier "
        "one of the same bucket (KS-BKT-6)",
        {"cursor": cursor},
    )


def checkpoint_resurrected(
    key: str,
    offset: int,
    pub: int,
    bucket: tuple[int | None, int | None],
    checkpoint: int,
    checkpoint_seq: int,
    restart_seq: int,
    seq: int,
) -> Explained:
    """KS-BKT-9: with `checkpoint_resume`, a message below its bucket's checkpoint delivered after a restart."""
    return (
        [
            message_clause(offset, key, pub) + f" in bucket {list(bucket)}",
            f"that bucket was checkpointed at {checkpoint} [seq {checkpoint_seq}]",
        ],
        f"after the restart [seq {restart_seq}] m{offset} was delivered [seq {seq}], but with checkpoint_resume "
        "a restart resumes each bucket from its checkpoint and does not deliver what lies below it (KS-BKT-9)",
        {"offset": offset, "cursor": checkpoint},
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


def _delayed_clause(offset: int, key: str, pub: int, deliver_at: int) -> str:
    """How a delayed message is named: its publish, with the due tick the producer asked for."""
    return message_clause(offset, key, pub) + f", delayed: due at tick {deliver_at}"


def delivered_before_due(key: str, offset: int, pub: int, deliver_at: int, now: int, seq: int) -> Explained:
    """KS-ORD-5."""
    return (
        [_delayed_clause(offset, key, pub, deliver_at)],
        f"m{offset} was delivered [seq {seq}] at tick {now}, before its due tick {deliver_at}, but a delayed "
        "message must not be delivered before it is due (KS-ORD-5)",
        {"offset": offset, "key": key, "deliver_at": deliver_at, "tick": now},
    )


# --- 2.2 checked at the end of each op -------------------------------------------------------------------


def entry_split_later_first(
    key: str, offset: int, pub: int, entry: int, earlier_key: str, earlier: int, earlier_pub: int, seq: int
) -> Explained:
    """KS-BKT-10: a message of a batch delivered before an earlier message of the batch that was not delivered."""
    return (
        [
            message_clause(earlier, earlier_key, earlier_pub),
            message_clause(offset, key, pub),
            f"both of the batch {entry}",
        ],
        f"m{offset} was delivered [seq {seq}] while m{earlier}, earlier in its batch, was not delivered yet, but a "
        "batch is delivered whole, from its first message (KS-BKT-10)",
        {"offset": offset, "entry": entry},
    )


def entry_split_interrupted(
    entry: int, first: int, consumer: str, first_seq: int, expected: int, offset: int, name: str, seq: int
) -> Explained:
    """KS-BKT-10: the delivery of a batch interrupted by another delivery."""
    return (
        [f"m{first} of the batch {entry} was delivered to {consumer} [seq {first_seq}]"],
        f"m{expected} of that batch was to follow it to {consumer}, but seq {seq} delivered m{offset} to {name}: a "
        "batch goes whole to one consumer, its messages one after another (KS-BKT-10)",
        {"offset": expected, "entry": entry, "consumer": consumer},
    )


def entry_split_unfinished(entry: int, first: int, consumer: str, first_seq: int, missing: list[int]) -> Explained:
    """KS-BKT-10: an op ended with a batch partly delivered."""
    return (
        [f"m{first} of the batch {entry} was delivered to {consumer} [seq {first_seq}]"],
        f"the op ended without delivering {', '.join(f'm{o}' for o in missing)} of that batch, but a batch is "
        "delivered whole (KS-BKT-10)",
        {"offset": missing[0], "entry": entry, "consumer": consumer},
    )


def invalid_layout(facts: list[str], problem: str) -> Explained:
    """KS-BKT-11: with `layout = "reported"`, a layout change the dispatcher reported is not a valid one."""
    return (
        ["layout = reported: the dispatcher chooses split points and merged N and reports them", *facts],
        f"{problem}, but a reported layout must be a valid one (KS-BKT-11)",
        {},
    )


def _ticks(count: int) -> str:
    """`count` ticks, in words ("1 tick", "2 ticks")."""
    return f"{count} tick" if count == 1 else f"{count} ticks"


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
        [_extension_clause(offset, holder, delivery_seq, extended_seq, deadline), *given],
        f"the delivery is still outstanding after phase 1 of tick {now} [seq {seq}], but an extended delivery "
        f"times out at its new deadline, {when} {rule}",
        {"offset": offset, "consumer": holder},
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
            message_clause(offset, key, pub) + _failed(failures, failure_seqs, returns),
            f"max_redeliveries = {maximum}, policy {policy!r}",
        ],
        f"after phase 2 of tick {now} [seq {seq}] it is neither resolved nor blocked, but a message "
        "that failed too often is poisoned in the first phase 2 after its failure (KS-RTY-6)",
        {"offset": offset},
    )


def missed_eviction(
    consumer: str,
    disconnected_at: int,
    disconnected_seq: int | None,
    evict_after: object,
    now: int,
    seq: int,
    slack: int = 0,
) -> Explained:
    """KS-MEM-2, after phase 4 of a tick (`seq`: the tick op; `slack`: timer_slack, KS-GEN-9)."""
    given = [f"timer_slack = {slack}: an eviction may come up to {_ticks(slack)} late (KS-GEN-9)"] if slack else []
    return (
        [
            f"{consumer} disconnected at tick {disconnected_at} [seq {disconnected_seq}]",
            f"evict_after = {evict_after}",
            *given,
        ],
        f"it is still a member after phase 4 of tick {now} [seq {seq}], but it must be evicted then (KS-MEM-2)",
        {"consumer": consumer},
    )


def skip_ignored(key: str, offset: int, pub: int, blocked_seq: int | None, seq: int) -> Explained:
    """KS-POI-5 (`seq`: the `key_skipped` op)."""
    return (
        [message_clause(offset, key, pub) + _blocked_its_key(blocked_seq)],
        f"the operator skipped key {key!r} [seq {seq}] but m{offset} was not resolved, "
        "and a skip resolves the blocked message as dropped (KS-POI-5)",
        {"key": key, "offset": offset},
    )


def persist_late(
    cursor: int,
    holes: Iterable[int] | None,
    persisted: int,
    persisted_holes: Iterable[int],
    interval: int,
    last_resolution_seq: int | None,
    seq: int,
    slack: int = 0,
    flush: int | None = None,
) -> Explained:
    """KS-CUR-5, or KS-CUR-12 when `flush` is given (persist_trigger = advance; `flush` is persist_flush) (`holes`: the
    resolved offsets above the cursor, None when ack holes are not persisted; `slack`: timer_slack, KS-GEN-9)."""
    what = f"the cursor is {cursor}" + (f" with holes {ranges_text(holes)}" if holes is not None else "")
    stored = f"{persisted}" + (f" with holes {ranges_text(persisted_holes)}" if holes is not None else "")
    requirement = "KS-CUR-5"
    if flush is not None:
        requirement = "KS-CUR-5, KS-CUR-12"
        rule = (
            f"with persist_trigger = advance and persist_interval = {interval} it is persisted at the end of an op "
            f"that moved it once {_ticks(interval)} have passed since the last persistence"
        )
        if flush:
            rule += f", and in phase 6 of every tick that is a multiple of persist_flush = {flush}"
            if slack:
                rule += f" (or with timer_slack = {slack} at most {_ticks(slack)} later, KS-GEN-9)"
    else:
        rule = (
            "with persist_interval = 0 it is persisted after every op that changed it"
            if interval == 0
            else f"with persist_interval = {interval} it is persisted in phase 6 of the first tick at which it is due"
        )
        if slack:
            rule += f", or with timer_slack = {slack} at most {_ticks(slack)} later (KS-GEN-9)"
    return (
        [f"the op at seq {seq}", f"the last resolution at seq {last_resolution_seq}"],
        f"at the end of the op {what}, but the persisted cursor is {stored}; {rule} ({requirement})",
        {"cursor": cursor, "persisted": persisted},
    )


def persist_outside_tick(interval: int) -> str:
    """Why a persist is early (KS-CUR-7): it is not in a tick's phase 6."""
    return f"with persist_interval = {interval} persistence happens only in phase 6 of a tick"


def persist_too_soon(previous_tick: int, interval: int) -> str:
    """Why a persist is early (KS-CUR-7): the previous one was less than `interval` ticks ago."""
    return (
        f"the previous persistence was at tick {previous_tick} and persist_interval = {interval}: "
        f"not again before tick {previous_tick + interval}"
    )


def persist_off_schedule(interval: int, flush: int) -> str:
    """Why a persist is early (KS-CUR-7) under persist_trigger = advance: KS-CUR-12 did not make it due."""
    flushing = f", or in phase 6 of a flush tick (persist_flush = {flush})" if flush else ""
    return (
        f"with persist_trigger = advance a persistence is due only in an op that moved the cursor at least "
        f"{_ticks(interval)} after the last one{flushing}, and this one was not"
    )


def persist_early(cursor: int, now: int, why: str, seq: int) -> Explained:
    """KS-CUR-7 (`why`: `persist_outside_tick` or `persist_too_soon`)."""
    return ([f"the cursor was persisted at tick {now} [seq {seq}]"], f"{why} (KS-CUR-7)", {"cursor": cursor})


def idle_while_ready(
    key: str,
    offset: int,
    pub: int,
    window: int,
    able: Sequence[tuple[str, int, int]],
    some: bool,
    seq: int,
    lookahead: tuple[int, int] | None = None,
    permits: bool = False,
    parked: int | None = None,
    heartbeat: str | None = None,
) -> Explained:
    """KS-ISO-1 (`able`: (name, outstanding, capacity or permits) of the members shown; `some`: selector `any`, one
    is enough; `lookahead`: (waiting earlier messages, L) under read_bound lookahead, KS-ISO-3; `parked`: with
    park_after set, the earlier parked messages the read bound leaves out, KS-ISO-4; `heartbeat`: with read_trigger
    heartbeat, "tick" when a tick's pass had to read it, "read" when it was read before the op, KS-GEN-8)."""
    if permits:
        names = ", ".join(f"{name} ({left} permits)" for name, _, left in able)
    else:
        names = ", ".join(f"{name} ({held}/{capacity})" for name, held, capacity in able)
    who = "some members that accept it are" if some else "the members that accept it are"
    if lookahead is None:
        within = f"within the window of {window}"
    else:
        waiting, limit = lookahead
        within = f"with {waiting} earlier messages waiting, fewer than the look-ahead limit of {limit}"
    if parked is not None:
        within += f" ({parked} earlier parked messages left out, KS-ISO-4)"
    if heartbeat == "tick":
        within += ", which a tick's dispatch pass reads under read_trigger heartbeat (KS-GEN-8)"
    elif heartbeat == "read":
        within += ", read before this op (read_trigger heartbeat, KS-GEN-8)"
    room = "holding a permit" if permits else "below capacity"
    return (
        [
            message_clause(offset, key, pub) + f", the earliest unresolved message of its key, {within}",
            f"no message of {key!r} is outstanding, retrying or blocked",
            f"{who} connected and {room}: {names}",
        ],
        f"the op at seq {seq} ended with m{offset} undelivered, but no rule allows holding it: a stuck key "
        "blocks only itself (KS-ISO-1)",
        {"offset": offset, "key": key},
    )


def seek_skip(key: str, offset: int, pub: int, target: int, seek_seq: int, seq: int) -> Explained:
    """KS-CUR-8: a message the seek made unresolved again is not dispatched again."""
    return (
        [
            message_clause(offset, key, pub) + f", resolved before the seek, at or after its target {target}",
            f"the seek at seq {seek_seq} moved the cursor back to {target}",
        ],
        f"m{offset} was not dispatched again [seq {seq}] although nothing holds it back, but a seek replays every "
        "message at or after its target, even one already acknowledged (KS-CUR-8)",
        {"offset": offset, "key": key},
    )


def seek_unpersisted(target: int, persisted: int, persist_seq: int | None, seq: int) -> Explained:
    """KS-CUR-10: at the end of a seek op the store does not hold the seek's cursor."""
    return (
        [
            f"the seek at seq {seq} moved the cursor to {target}",
            f"when the op ends the store holds cursor {persisted} (persisted at seq {persist_seq})",
        ],
        "the seek was not persisted before the op returned, but a seek is durable once it returns: a crash right "
        "after it must resume from its target (KS-CUR-10)",
        {"cursor": target},
    )


def restart_skip(key: str, offset: int, pub: int, restart_seq: int | None, loaded: int, seq: int) -> Explained:
    """KS-CUR-3 (`loaded`: the cursor the restart at `restart_seq` loaded)."""
    return (
        [
            message_clause(offset, key, pub) + ", resolved before the restart, at or above the persisted cursor and "
            "not a persisted ack hole",
            f"the restart at seq {restart_seq} loaded cursor {loaded}",
        ],
        f"m{offset} was not dispatched again [seq {seq}] although nothing holds it back, but a restart "
        "resumes from the store: every offset it did not record is dispatched again (KS-CUR-3)",
        {"offset": offset, "key": key},
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


def missing_outcome(key: str, offset: int, pub: int) -> Explained:
    """KS-BEF-1, a best-effort publish op without an outcome for its message."""
    return (
        [message_clause(offset, key, pub)],
        f"the op that published it ended without delivering, dropping or filtering m{offset}, but in "
        "best-effort each message's outcome happens at its publish (KS-BEF-1)",
        {"offset": offset},
    )


def blocked_behind_delayed(
    key: str, offset: int, pub: int, delayed: int, delayed_pub: int, deliver_at: int, seq: int
) -> Explained:
    """KS-ORD-6 (`delayed`: the earlier message of the key, not yet due)."""
    return (
        [_delayed_clause(delayed, key, delayed_pub, deliver_at), message_clause(offset, key, pub)],
        f"at the end of the op [seq {seq}] m{offset} is ready, within the read bound, and every member that could "
        f"take it has room, yet it waits behind m{delayed}, which is not due yet; a message not yet due holds back "
        "no later message of its key (KS-ORD-6)",
        {"offset": offset, "key": key, "delayed": delayed, "deliver_at": deliver_at},
    )


def due_left_waiting(key: str, offset: int, pub: int, deliver_at: int, slack: int, now: int, seq: int) -> Explained:
    """KS-ORD-7 (`slack`: the declared timer_slack, KS-GEN-9)."""
    late = f" and the timer slack of {slack}" if slack else ""
    return (
        [_delayed_clause(offset, key, pub, deliver_at)],
        f"at the end of the op [seq {seq}], at tick {now}, past its due tick{late}, m{offset} is ready, within the "
        "read bound, and every member that could take it has room, yet it was not delivered; once due a delayed "
        "message is as ready as any other (KS-ORD-7)",
        {"offset": offset, "key": key, "deliver_at": deliver_at, "tick": now},
    )


# --- 2.3 checked at a quiescent event --------------------------------------------------------------------


def lost(key: str, offset: int, pub: int, left_seq: int | None, seq: int) -> Explained:
    """KS-MEM-1."""
    return (
        [message_clause(offset, key, pub), f"its holder left or was evicted at seq {left_seq}"],
        f"m{offset} was never delivered again and is unresolved at the quiescent point [seq {seq}], "
        "but a leaving consumer's messages must be delivered again (KS-MEM-1)",
        {"offset": offset, "key": key},
    )


def drain_stuck(key: str, offset: int, pub: int, hold_seq: int | None, seq: int) -> Explained:
    """KS-DRN-2."""
    return (
        [message_clause(offset, key, pub), f"m{offset} was held for draining at seq {hold_seq}"],
        f"it is still unresolved at the quiescent point [seq {seq}], but draining always clears (KS-DRN-2)",
        {"offset": offset, "key": key},
    )


def stuck_key(key: str, offset: int, pub: int, last_event: int, seq: int) -> Explained:
    """KS-LIV-1."""
    return (
        [message_clause(offset, key, pub), f"its last event is seq {last_event}"],
        f"m{offset} is unresolved at the quiescent point [seq {seq}], although a member accepts every "
        "key, everyone acks and time has passed (KS-LIV-1)",
        {"offset": offset, "key": key},
    )


def cursor_stall(published: int, cursor: int, persist_seq: int | None, seq: int) -> Explained:
    """KS-LIV-2."""
    persisted = f" (persisted at seq {persist_seq})" if persist_seq is not None else " (never persisted)"
    return (
        [f"n = {published} messages published, all resolved"],
        f"at the quiescent point [seq {seq}] the persisted cursor is {cursor}{persisted}, not n (KS-LIV-2)",
        {"cursor": cursor, "published": published},
    )
