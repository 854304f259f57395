"""Explanations of the anomalies the Spark validator finds, in the Python checker's words.

Each function returns the checker's ("Let" clauses, "Then" clause, details) for one anomaly, from the
facts the Spark passes carry. The wording follows `ks_conformance.checker` sentence for sentence;
tests/test_spark_differential.py compares the rendered texts of both checkers on the same traces, so
a change of wording on either side shows up as a failing test rather than as a silent drift.
"""

from __future__ import annotations

from typing import Any

Explained = tuple[list[str], str, dict[str, Any]]


def message_clause(offset: int, key: str, publish_seq: int) -> str:
    """How explanations name a message: m3 = publish(offset=3, key='k') [seq 7]."""
    return f"m{offset} = publish(offset={offset}, key={key!r}) [seq {publish_seq}]"


def key_reorder(key: str, offset: int, pub: int, earlier: int, earlier_pub: int, seq: int) -> Explained:
    """KS-ORD-1."""
    return (
        [message_clause(earlier, key, earlier_pub), message_clause(offset, key, pub)],
        f"m{earlier} precedes m{offset} in key {key!r} and was never delivered, yet m{offset} was "
        f"delivered for the first time [seq {seq}] while m{earlier} is unresolved (KS-ORD-1)",
        {"offset": offset, "key": key, "earlier": earlier},
    )


def overtaken_hold(key: str, offset: int, pub: int, held: int, held_pub: int, held_seq: int, seq: int) -> Explained:
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
    key: str, offset: int, pub: int, waiting: int, waiting_pub: int, awaiting_seq: int, seq: int
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


def duplicate_resolved(key: str, offset: int, pub: int, resolution: str, resolution_seq: int, seq: int) -> Explained:
    """KS-RES-2, after a resolution."""
    return (
        [message_clause(offset, key, pub) + f", resolved as {resolution} at seq {resolution_seq}"],
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


def key_moved(key: str, offset: int, pub: int, previous: str, previous_seq: int, consumer: str, seq: int) -> Explained:
    """KS-ASN-1."""
    return (
        [f"key {key!r} was delivered to {previous} at seq {previous_seq}", message_clause(offset, key, pub)],
        f"m{offset} was delivered to {consumer} [seq {seq}] with no membership change since, but a key "
        "has one target per membership epoch (KS-ASN-1)",
        {"key": key, "consumer": consumer, "other": previous},
    )


def stale_ack_accepted(
    key: str,
    offset: int,
    pub: int,
    last_delivery: int | None,
    holder: str | None,
    holder_seq: int,
    consumer: str,
    seq: int,
) -> Explained:
    """KS-ACK-2."""
    held_by = f"{holder} [seq {holder_seq}]" if holder is not None else "nobody"
    return (
        [
            message_clause(offset, key, pub) + (f", last delivered at seq {last_delivery}" if last_delivery else ""),
            f"its outstanding delivery is held by {held_by}",
        ],
        f"an ack from {consumer} [seq {seq}], which does not hold it, resolved m{offset}, but such an ack "
        "must be ignored and recorded (KS-ACK-2)",
        {"offset": offset, "consumer": consumer},
    )


def capacity_overrun(
    key: str, offset: int, pub: int, consumer: str, capacity: int, added_seq: int, outstanding: list[int], seq: int
) -> Explained:
    """KS-FLW-1."""
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


def window_overrun(key: str, offset: int, pub: int, window: int, below: int, seq: int) -> Explained:
    """KS-FLW-2."""
    return (
        [message_clause(offset, key, pub), f"window = {window}"],
        f"m{offset} was delivered for the first time [seq {seq}] while {below} earlier offsets are "
        "unresolved, but a first delivery needs fewer than window of them (KS-FLW-2)",
        {"offset": offset, "unresolved_below": below},
    )


def cursor_skip(key: str, offset: int, pub: int, cursor: int, passes: bool, seq: int) -> Explained:
    """KS-CUR-1."""
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


def lost(key: str, offset: int, pub: int, left_seq: int, seq: int) -> Explained:
    """KS-MEM-1."""
    return (
        [message_clause(offset, key, pub), f"its holder left or was evicted at seq {left_seq}"],
        f"m{offset} was never delivered again and is unresolved at the quiescent point [seq {seq}], "
        "but a leaving consumer's messages must be delivered again (KS-MEM-1)",
        {"offset": offset, "key": key},
    )


def drain_stuck(key: str, offset: int, pub: int, hold_seq: int, seq: int) -> Explained:
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
