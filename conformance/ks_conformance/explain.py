"""The shared wording of anomaly explanations: the clauses and phrases several rules' explanations use.

Each rule's own explanation functions live beside its definition, in its module of `ks_conformance.rules`, each
taking plain facts and returning `(let, then, details)`; the Python checker (`ks_conformance.checks`) and the Spark
validator (`ks_spark`) both call them, so one violation reads the same in both. A "why" that a check chooses among
several is a phrase function here (`timeout_not_due`). Standard library only: Spark tasks import it.
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


def last_delivered(last_delivery: int | None) -> str:
    return f", last delivered at seq {last_delivery}" if last_delivery else ""


def resolved_as(resolution: str | None, resolution_seq: int | None) -> str:
    return f", resolved as {resolution} at seq {resolution_seq}"


def delivered_since_restart(deliveries: int) -> str:
    return f", delivered {deliveries} times since the last restart"


def failed(failures: int, failure_seqs: Sequence[int], returns: int = 0) -> str:
    failed = f", failed {failures} times (seqs {', '.join(map(str, failure_seqs))})"
    if returns:
        failed += (
            f" and returned {returns} times by a holder that left, each counted as a failure (returns_as_failures)"
        )
    return failed


def blocked_its_key(blocked_seq: int | None) -> str:
    return f", which blocked its key at seq {blocked_seq}"


def joined_with_filters(consumer: str, filters: Sequence[str], added_seq: int) -> str:
    return f"{consumer} joined with filters {list(filters)} [seq {added_seq}]"


def disconnected(consumer: str, disconnected_seq: int | None) -> str:
    return f"{consumer} disconnected at seq {disconnected_seq}"


def only_changed(changed: str, change: str, change_seq: int) -> str:
    what = "joined" if change == "join" else "left"
    return f"only {changed} {what} [seq {change_seq}]"


def bucket_of(bucket: int, segment: int) -> str:
    return f"bucket {bucket} of segment {segment}"


# --- phrases of several rules' explanations ----------------------------------------------------------------


def holder_ignored(
    what: str, requirement: str, key: str, offset: int, pub: int, holder: str, delivery_seq: int, seq: int
) -> Explained:
    """KS-ACK-1, KS-RTY-1: an ack or nack from the holder was ignored."""
    return (
        [message_clause(offset, key, pub) + f", delivered to {holder} at seq {delivery_seq} and outstanding there"],
        f"the {what} from its holder {holder} was ignored [seq {seq}], but a {what} from the holder "
        f"must end the delivery ({requirement})",
        {"offset": offset, "consumer": holder},
    )


def ended_delivery(consumer: str, offset: int, attempt: int, op: str, op_seq: int) -> str:
    return (
        f"the delivery of m{offset} to {consumer} (attempt {attempt}) had ended, and {op} [seq {op_seq}] reports "
        f"{consumer}'s result for it late"
    )


TIMEOUTS_DISABLED = "ack_timeout is 0, which disables timeouts"
"""Why a timeout is premature (KS-RTY-2): there are no timeouts."""


def not_outstanding_at(offset: int, consumer: str) -> str:
    """Why a timeout is premature (KS-RTY-2): the consumer does not hold the message."""
    return f"m{offset} has no outstanding delivery at {consumer}"


def timeout_not_due(tick: int, timeout: int) -> str:
    """Why a timeout is premature (KS-RTY-2): the delivery at `tick` is not due yet."""
    return f"it was delivered at tick {tick} and the ack timeout is {timeout}: no timeout before tick {tick + timeout}"


def extension_clause(offset: int, consumer: str, delivery_seq: int, extended_seq: int | None, deadline: int) -> str:
    moved = f"an extension [seq {extended_seq}] moved" if extended_seq is not None else "an extension moved"
    return f"m{offset} was delivered to {consumer} [seq {delivery_seq}], and {moved} its timeout to tick {deadline}"


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


POISONED_AS: dict[str, str] = {
    "drop": "dropped as poison",
    "dead_letter": "dead-lettered",
    "key_blocked": "blocked as poison",
}


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


def held_inactive(offset: int, consumer: str, seq: int) -> str:
    """A hold for an inactive member, as `reconnect_ignored` names it."""
    return f"m{offset} was held [seq {seq}] because {consumer} is inactive"


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
            f"{bucket_of(bucket, segment)} was last announced to {target} at seq {decided_seq}",
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
    moved = f"{bucket_of(bucket, segment)} moved from {previous} to {consumer}"
    return f"{only_changed(changed, change, change_seq)}, yet {moved}"


def bucket_rule(why: str, policy: object) -> str:
    """The "Then" sentence of KS-BKT-8, judged on deliveries or on the implementation's own handoffs."""
    return (
        f"{why}, but a join moves buckets only to the joiner, at most ceil(N/k), and a leave only the leaver's "
        f"(KS-BKT-8, bucket_assignment {policy!r})"
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
            f"{bucket_of(bucket, segment)} was last given to {previous} at seq {previous_seq}",
            f"at seq {seq} ({event}) it was {done} to {target}",
        ],
        bucket_rule(why, policy),
        {"consumer": target, "other": previous},
    )


def delayed_clause(offset: int, key: str, pub: int, deliver_at: int) -> str:
    """How a delayed message is named: its publish, with the due tick the producer asked for."""
    return message_clause(offset, key, pub) + f", delayed: due at tick {deliver_at}"


def ticks(count: int) -> str:
    """`count` ticks, in words ("1 tick", "2 ticks")."""
    return f"{count} tick" if count == 1 else f"{count} ticks"


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
        f"{ticks(interval)} after the last one{flushing}, and this one was not"
    )
