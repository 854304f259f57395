"""The anomaly catalogue of spec/checking.md as data: every anomaly's name, requirement and when it is judged.

This module is the single place that names anomalies. The trace checker, the conformance harness, the
reports and the Spark validator all import it, so it must stay free of heavy dependencies:
standard library only. tests/test_checker_catalogue.py keeps it equal to the tables of checking.md.

Long because it is the catalogue itself: one entry of six fields per anomaly kind, mirrored row for row from
spec/checking.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache


class Stage(Enum):
    """When a checker judges an anomaly (the subsections of spec/checking.md section 2)."""

    EVENT = "event"
    """2.1: at the event that shows it."""
    OP = "op"
    """2.2: at the end of an op (or at a phase boundary inside a tick)."""
    QUIESCENT = "quiescent"
    """2.3: at a `quiescent` event."""
    HARNESS = "harness"
    """2.4: by the conformance harness, from what the adapter answered; not from a trace."""


@dataclass(frozen=True)
class AnomalyKind:
    """One row of the catalogue: what the anomaly is called, what it violates, and when it is looked for."""

    name: str
    requirement: str
    stage: Stage
    condition: str
    witness: str
    exercised: str


def _kind(
    name: str, requirement: str, stage: Stage, condition: str, witness: str = "", exercised: str = ""
) -> AnomalyKind:
    return AnomalyKind(name, requirement, stage, condition, witness, exercised)


_E, _O, _Q, _H = Stage.EVENT, Stage.OP, Stage.QUIESCENT, Stage.HARNESS

CATALOGUE: tuple[AnomalyKind, ...] = (
    # 2.1 checked at each event
    _kind(
        "key-reorder",
        "KS-ORD-1",
        _E,
        "a first delivery of m while an earlier message of m's key is unresolved and has no delivery since restart",
        "publish of the earlier message, publish of m, the delivery",
        "a first delivery while an earlier message of its key is unresolved",
    ),
    _kind(
        "overtaken-hold",
        "KS-FLW-3",
        _E,
        "as key-reorder, and the earlier message had been reported held",
        "the held event, publish of m, the delivery",
        "a first delivery while an earlier message of its key has been held",
    ),
    _kind(
        "strict-overlap",
        "KS-ORD-2",
        _E,
        "strict profile: a delivery of m while an earlier message of m's key is unresolved",
        "publish of the earlier message, the delivery",
        "a delivery while another message of its key is unresolved",
    ),
    _kind(
        "retry-overtaken",
        "KS-ORD-3",
        _E,
        "a delivery of m while an earlier message of its key is retrying or returned",
        "the failure of the earlier message, the delivery",
        "a delivery while an earlier message of its key awaits redelivery",
    ),
    _kind(
        "split-owner",
        "KS-DRN-1",
        _E,
        "a delivery of m to c while another incarnation holds an outstanding delivery of a message of m's key",
        "that other delivery, the delivery",
        "a delivery while a membership change moved its key",
    ),
    _kind(
        "blocked-key-leak",
        "KS-POI-3",
        _E,
        "a delivery of a message whose key has a blocked message",
        "the key_blocked event, the delivery",
        "a key is blocked while later messages of it are unresolved",
    ),
    _kind(
        "duplicate",
        "KS-RES-2",
        _E,
        "a delivery of a message that is resolved or has an outstanding delivery",
        "the resolution or the outstanding delivery, the delivery",
        "a delivery of a message that was delivered before",
    ),
    _kind(
        "resurrected",
        "KS-CUR-4",
        _E,
        "after a restart, a delivery of an offset below the persisted cursor or in the persisted holes",
        "the cursor_persisted, the restart, the delivery",
        "a delivery after a restart",
    ),
    _kind(
        "seek-resurrected",
        "KS-CUR-9",
        _E,
        "after a seek (and before the next restart), a delivery of an offset below its target",
        "the seek, the delivery",
        "a delivery after a seek",
    ),
    _kind(
        "seek-stale-ack",
        "KS-CUR-11",
        _E,
        "an ack or nack accepted from a member whose delivery of the message the last seek cut, while it holds no "
        "delivery of it made since",
        "the seek, the ack or nack",
        "an ack or nack ignored from a member whose delivery the last seek cut",
    ),
    _kind(
        "filter-violation",
        "KS-FLT-2",
        _E,
        "a delivery to a consumer that does not accept the key",
        "the consumer_added, the delivery",
        "a delivery to a consumer with filters",
    ),
    _kind(
        "inactive-delivery",
        "KS-MEM-3",
        _E,
        "a delivery to a consumer that is not a member, or is disconnected",
        "the consumer_disconnected (or removal), the delivery",
        "a delivery while some member is disconnected",
    ),
    _kind(
        "capacity-overrun",
        "KS-FLW-1",
        _E,
        "a delivery that leaves its consumer holding more outstanding deliveries than its capacity",
        "the consumer_added, the outstanding deliveries, the delivery",
        "a delivery to a consumer at capacity minus one",
    ),
    _kind(
        "permit-overrun",
        "KS-FLW-4",
        _E,
        'with flow_control = "permits", a delivery to a consumer whose deliveries since it joined already equal '
        "or exceed its grants (its capacity, then every permits_granted), other than of a batch's message that "
        "follows its first (KS-BKT-10)",
        "the consumer_added, the grants, the delivery",
        "a delivery to a consumer with one permit left",
    ),
    _kind(
        "window-overrun",
        "KS-FLW-2",
        _E,
        "a first delivery of offset o while window or more offsets below o are unresolved (with park_after set: "
        "unresolved and not parked, KS-ISO-4)",
        "the delivery",
        "a first delivery while at least window - 1 earlier offsets are unresolved",
    ),
    _kind(
        "attempt-miscount",
        "KS-RTY-5",
        _E,
        "a delivery whose attempt is not 1 + deliveries since restart",
        "the previous delivery, the delivery",
        "a redelivery",
    ),
    _kind(
        "key-moved",
        "KS-ASN-1",
        _E,
        "a delivery of key k to c when k was delivered to another consumer in the same membership epoch",
        "the earlier delivery, the delivery",
        "a second delivery of a key within one epoch",
    ),
    _kind(
        "unstable-assignment",
        "KS-ASN-2",
        _E,
        "key k was last delivered in epoch e to c1 and is delivered in epoch e + 1 to c2, and the change between "
        "them was neither the join of c2 (under selector partitions, not even that) nor the leave of c1",
        "both deliveries, the membership event",
        "a key delivered in two consecutive epochs",
    ),
    _kind(
        "early-retry",
        "KS-RTY-4",
        _E,
        "a delivery of a retrying message that is not yet ready",
        "the failure, the delivery",
        "a redelivery after a failure",
    ),
    _kind(
        "retry-overrun",
        "KS-RTY-6",
        _E,
        "a delivery of a message whose failures exceed max_redeliveries",
        "the failures, the delivery",
        "a message fails max_redeliveries + 1 times",
    ),
    _kind(
        "stale-ack-accepted",
        "KS-ACK-2",
        _E,
        "an ack from a consumer incarnation without an outstanding delivery of the message",
        "the last delivery of the message, the ack",
        "an ack from a consumer that does not hold the message",
    ),
    _kind(
        "holder-ack-ignored",
        "KS-ACK-1",
        _E,
        "an ack_ignored from the incarnation that holds the outstanding delivery",
        "the delivery, the ack_ignored",
        "an ack from the holder",
    ),
    _kind(
        "stale-nack-accepted",
        "KS-RTY-1",
        _E,
        "a nack from an incarnation without an outstanding delivery of the message",
        "the last delivery, the nack",
        "a nack from a consumer that does not hold the message",
    ),
    _kind(
        "holder-nack-ignored",
        "KS-RTY-1",
        _E,
        "a nack_ignored from the incarnation that holds the outstanding delivery",
        "the delivery, the nack_ignored",
        "a nack from the holder",
    ),
    _kind(
        "zombie-accepted",
        "KS-ACK-3",
        _E,
        "in a zombie_ack or zombie_nack op, an ack or nack effect (with ack_by_id, a zombie_ack's ack excepted: it "
        "is judged as a resolution, double-resolution if the message is resolved already)",
        "the zombie op, the ack or nack",
        "a zombie_ack or zombie_nack",
    ),
    _kind(
        "zombie-ack-ignored",
        "KS-ACK-3",
        _E,
        "with ack_by_id = true, an ack_ignored answering a zombie_ack of an unresolved message",
        "the zombie_ack, the ack_ignored",
        "a zombie_ack of an unresolved message with ack_by_id = true",
    ),
    _kind(
        "premature-timeout",
        "KS-RTY-2",
        _E,
        "a timeout of a delivery that is not outstanding at that consumer, or at a tick before its delivery tick + "
        "ack_timeout, or with ack_timeout 0 (a delivery an extension moved is judged by extended-timeout-early)",
        "the delivery, the timeout",
        "a timeout",
    ),
    _kind(
        "extended-timeout-early",
        "KS-RTY-8",
        _E,
        "a timeout of a delivery whose deadline an extended event moved to tick D, at a tick before D",
        "the delivery, the extended event, the timeout",
        "a timeout of an extended delivery",
    ),
    _kind(
        "zombie-extension",
        "KS-RTY-9",
        _E,
        "an extended event answering an extend op whose consumer does not hold the offset's outstanding delivery",
        "the extend op, the extended event",
        "an extend from a consumer that does not hold the delivery",
    ),
    _kind(
        "double-resolution",
        "KS-RES-1",
        _E,
        "a resolution event for a message that is already resolved (an ack still ends the delivery it answers: "
        '"Answers end deliveries" in section 1)',
        "both resolutions",
        "a resolution",
    ),
    _kind(
        "unjustified-resolution",
        "KS-RES-1",
        _E,
        "a drop or dead_letter that no rule allows",
        "the event",
        "a drop or dead letter",
    ),
    _kind(
        "unjustified-filter",
        "KS-FLT-3",
        _E,
        "a filter of a message whose key some member accepts",
        "the consumer_added of that member, the filter",
        "a filter",
    ),
    _kind(
        "unjustified-outcome",
        "KS-RES-1",
        _E,
        "an outcome event whose name the implementation declares as no spec resolution, or does not declare",
        "the publish of m, the outcome",
        "an implementation-defined outcome",
    ),
    _kind(
        "filtered-without-members",
        "KS-FLT-4",
        _E,
        "a filter while the subscription has no member",
        "the filter",
        "a filter",
    ),
    _kind(
        "return-counted",
        "KS-RTY-7",
        _E,
        "a drop (poison), dead letter or key block of a message whose failures do not exceed max_redeliveries but "
        "would with its returns (deliveries ended by a leave or eviction) counted as failures",
        "the returned delivery, the return, the resolution or block",
        "a message is poisoned",
    ),
    _kind(
        "unjustified-block",
        "KS-POI-3",
        _E,
        "a key_blocked of a message that was never released and whose failures do not exceed max_redeliveries "
        "(nor would with its returns counted: that is return-counted)",
        "the failures, the key_blocked",
        "a key_blocked",
    ),
    _kind(
        "stale-budget",
        "KS-POI-4",
        _E,
        "a key_blocked of a message released by an operator whose failures since the release do not exceed "
        "max_redeliveries",
        "the key_released, the failures since, the key_blocked",
        "a key_blocked of a released message",
    ),
    _kind(
        "dead-letter-mismatch",
        "KS-POI-2",
        _E,
        "a dead_letter whose attempt is not the message's deliveries since restart, or whose reason is not its last "
        "failure",
        "the last failure, the dead_letter",
        "a dead letter",
    ),
    _kind(
        "cursor-skip",
        "KS-CUR-1",
        _E,
        "a cursor_persisted above an unresolved offset, or whose holes include an unresolved offset",
        "the publish of the smallest such offset, the cursor_persisted",
        "a persist while some offset is unresolved",
    ),
    _kind(
        "cursor-regress",
        "KS-CUR-2",
        _E,
        "a cursor_persisted below the previous one",
        "both",
        "a second persist",
    ),
    _kind(
        "phase-order",
        "KS-GEN-7",
        _E,
        "within a tick op, an effect of an earlier phase after one of a later phase",
        "both events",
        "a tick with effects of two phases",
    ),
    _kind(
        "premature-eviction",
        "KS-MEM-2",
        _E,
        "a consumer_evicted of a connected member, of a non-member, with evict_after 0, or before its disconnection "
        "tick + evict_after",
        "the consumer_disconnected, the eviction",
        "an eviction",
    ),
    _kind(
        "reconnect-ignored",
        "KS-MEM-4",
        _E,
        "a consumer_evicted of a member, or a held with reason inactive naming a member, that reconnected and has "
        "not disconnected since",
        "the consumer_disconnected, the consumer_reconnected, the eviction or the held",
        "a reconnect of a disconnected member",
    ),
    _kind(
        "unjustified-hold",
        "KS-DRN-2",
        _E,
        "drain_granularity hash: a held with reason draining (naming target T, or none) while no key of its slot "
        "holds an outstanding delivery that may sit at an old owner (at a consumer other than T, made before the last "
        "membership change or while members have filters), and no key of its slot awaits redelivery or is blocked "
        "(the slot's target did not move: nothing drains)",
        "the latest outstanding delivery of the slot at T or of the current epoch, if any, the held",
        "a hold for draining, with hash-granularity draining",
    ),
    _kind(
        "misrouted-bucket",
        "KS-BKT-1",
        _E,
        "selector buckets: a publish whose segment is not the active segment containing hash >> 16, or whose bucket "
        "is not floor((hash & 0xFFFF) * N / 65536)",
        "the segment_created, the publish",
        "a publish",
    ),
    _kind(
        "bucket-misassigned",
        "KS-BKT-3",
        _E,
        "selector buckets: with bucket_assignment sorted, a delivery of a bucket to a consumer other than its owner "
        "in the segment's order (sorted by name, rotated by the segment's number); with another policy, deliveries "
        "of a bucket to two consumers within one epoch",
        "the delivery (another policy: both deliveries)",
        "a delivery",
    ),
    _kind(
        "unstable-buckets",
        "KS-BKT-8",
        _E,
        "selector buckets, bucket_assignment sticky or controller: a bucket delivered before one join or leave and "
        "after it to another consumer, or given a new target by a bucket_assigned or bucket_withheld after it, "
        "other than to the joiner or away from the leaver, or more than ceil(N/k) buckets of a segment moving to "
        "a joiner",
        "the earlier delivery or assignment, the membership change, the delivery or assignment",
        "a delivery of a bucket, or a new target named, after a join or leave",
    ),
    _kind(
        "bucket-split-owner",
        "KS-BKT-4",
        _E,
        "selector buckets: a delivery of an entry of (segment, bucket) while another incarnation holds an "
        "outstanding entry of that bucket",
        "the other delivery, the delivery",
        "a delivery of a bucket that moved",
    ),
    _kind(
        "successor-first",
        "KS-BKT-5",
        _E,
        "selector buckets: a delivery of a message of a segment while an ancestor segment (a predecessor, or an "
        "ancestor's predecessor) has an unresolved message whose hash >> 16 lies in the segment's range",
        "the ancestor's publish, the delivery",
        "a delivery from a segment with a predecessor",
    ),
    _kind(
        "checkpoint-skip",
        "KS-BKT-6",
        _E,
        "a checkpoint above an unresolved message of its (segment, bucket), or below the previous checkpoint of it",
        "the publish or the earlier checkpoint, the checkpoint",
        "a checkpoint",
    ),
    _kind(
        "checkpoint-resurrected",
        "KS-BKT-9",
        _E,
        "selector buckets with checkpoint_resume: after a restart, a delivery of a message whose offset lies "
        "below the last checkpoint of its (segment, bucket) recorded before the restart",
        "the checkpoint, the restart, the delivery",
        "a delivery after a restart, with checkpoints loaded",
    ),
    _kind(
        "best-effort-redelivery",
        "KS-BEF-1",
        _E,
        "best-effort: a second outcome (delivery, drop or filter) for a message, or an outcome in another op than "
        "its publish",
        "both events",
        "a best-effort publish",
    ),
    _kind(
        "delivered-before-due",
        "KS-ORD-5",
        _E,
        "a delivery of a delayed message (a publish with deliver_at) at a tick before its deliver_at",
        "the publish, the delivery",
        "a delayed message is published with a due tick ahead",
    ),
    # 2.2 checked at the end of each op
    _kind(
        "entry-split",
        "KS-BKT-10",
        _O,
        "the first delivery of a message of a batch (publish_entry) since it was published or the last restart while "
        "an earlier message of the batch is unresolved and not yet delivered since then; or, after it, a delivery "
        "other than the next such message of the batch to the same consumer, or the end of the op before them all",
        "the batch's first delivery or earlier message's publish, the delivery or the op",
        "a first delivery of a message of a batch with other messages still to deliver",
    ),
    _kind(
        "invalid-layout",
        "KS-BKT-11",
        _O,
        "selector buckets with layout reported: an op whose segment_created events give a segment an N outside "
        "1..bucket_max, give a split children that do not partition the parent's range at a point strictly inside "
        "it or do not have max(1, N / 2) buckets each, give a merge a successor that does not cover exactly its two "
        "adjacent predecessors, or leave the active segments not partitioning the ring; or a publish placed in a "
        "segment no segment_created reported before it",
        "the segment_created events (and their predecessors'), or the publish",
        "a layout change or publish with layout reported",
    ),
    _kind(
        "missed-timeout",
        "KS-RTY-3",
        _O,
        "after phase 1 of tick t, a delivery made at tick d is still outstanding with ack_timeout > 0 and "
        "d + ack_timeout <= t (a delivery an extension moved is judged by extended-timeout-missed)",
        "the delivery, the tick",
        "a delivery is outstanding when its timeout is due",
    ),
    _kind(
        "extended-timeout-missed",
        "KS-RTY-8",
        _O,
        "after phase 1 of tick t, a delivery whose deadline an extended event moved to tick D is still outstanding "
        "and D + timer_slack <= t",
        "the delivery, the extended event, the tick",
        "an extended delivery is outstanding when its new deadline is due",
    ),
    _kind(
        "extension-lost",
        "KS-RTY-8",
        _O,
        "at the end of an extend op from the consumer that holds the offset's outstanding delivery, no extended "
        "event answered it (an extend_ignored did, or nothing)",
        "the delivery, the extend op, the extend_ignored",
        "an extend from the holder",
    ),
    _kind(
        "poison-ignored",
        "KS-RTY-6",
        _O,
        "after phase 2 of a tick, a message whose failures exceed max_redeliveries is neither resolved nor blocked",
        "the failures, the tick",
        "a message fails max_redeliveries + 1 times",
    ),
    _kind(
        "missed-eviction",
        "KS-MEM-2",
        _O,
        "after phase 4 of tick t, a member disconnected at tick d with evict_after > 0 and d + evict_after <= t is "
        "still a member",
        "the consumer_disconnected, the tick",
        "a member is disconnected",
    ),
    _kind(
        "skip-ignored",
        "KS-POI-5",
        _O,
        "a key_skipped op whose key had a blocked message that it did not resolve",
        "the key_blocked, the key_skipped",
        "a skip",
    ),
    _kind(
        "persist-late",
        "KS-CUR-5",
        _O,
        "at the end of an op, the cursor (or the resolved offsets above it) differs from the persisted one, which "
        "claims no unresolved offset (a persist ahead is cursor-skip), although persistence was due",
        "the last resolution, the op",
        "an op that advanced the cursor",
    ),
    _kind(
        "persist-early",
        "KS-CUR-7",
        _O,
        "with persist_interval > 0, a cursor_persisted outside a tick's phase 6, or fewer than persist_interval "
        "ticks after the previous one; with persist_trigger advance, one in an op that did not move the cursor or "
        "too soon, unless a flush is due",
        "both persists",
        "a persist",
    ),
    _kind(
        "idle-while-ready",
        "KS-ISO-1",
        _O,
        "at the end of an op, a message in the window is undelivered although nothing allowed by the spec holds it",
        "the publish of m, the op",
        "an op ends with an undelivered message in the window",
    ),
    _kind(
        "seek-skip",
        "KS-CUR-8",
        _O,
        "at the end of an op (or at quiescence), a message resolved before a seek, at or after its target, is not "
        "dispatched again although nothing holds it back",
        "the publish of m, the seek, the op",
        "a seek finds a message resolved at or after its target",
    ),
    _kind(
        "seek-unpersisted",
        "KS-CUR-10",
        _O,
        "at the end of a seek op, no cursor_persisted since the seek event, or the last one's cursor is below the "
        "seek's target",
        "the seek",
        "a seek",
    ),
    _kind(
        "restart-skip",
        "KS-CUR-3",
        _O,
        "at the end of an op (or at quiescence), a message a restart made unresolved again is not dispatched "
        "again although nothing holds it back",
        "the publish of m, the last persistence, the restart, the op",
        "a restart finds a message resolved at or above the persisted cursor that is not a persisted hole",
    ),
    _kind(
        "unfiltered-wait",
        "KS-FLT-3",
        _O,
        "at the end of an op, a message in the window whose key no member accepts is still waiting",
        "the publish of m, the op",
        "an op ends with a message in the window while some member has filters",
    ),
    _kind(
        "missing-outcome",
        "KS-BEF-1",
        _O,
        "best-effort: a publish op without an outcome (delivery, drop or filter) for its message",
        "the publish",
        "a best-effort publish",
    ),
    _kind(
        "blocked-behind-delayed",
        "KS-ORD-6",
        _O,
        "where idle-while-ready would report m, an ordinary message, had the earlier delayed messages of m's key not "
        "yet due been left out (with timer_slack = s: fewer than s ticks past due counts as not yet due), and one was",
        "the publish of the delayed message, the publish of m, the op",
        "a message is published while an earlier delayed message of its key is not yet due",
    ),
    _kind(
        "due-left-waiting",
        "KS-ORD-7",
        _O,
        "where idle-while-ready would report m (earlier delayed messages of its key not yet due left out), m a "
        "delayed message at least timer_slack ticks past its deliver_at",
        "the publish of m, the op",
        "an op ends with a delayed message unresolved and due (past its deliver_at and the slack)",
    ),
    # 2.3 checked at a quiescent event
    _kind(
        "lost",
        "KS-MEM-1",
        _Q,
        "an unresolved message whose last delivery ended because its holder left or was evicted, with no delivery "
        "since, although no outstanding or blocked message of its key nor an eligible member without room holds it "
        "back",
        "its last delivery, the leave or eviction, the quiescent",
        "a holder leaves with outstanding deliveries",
    ),
    _kind(
        "drain-stuck",
        "KS-DRN-2",
        _Q,
        "an unresolved message whose last hold had reason draining",
        "the held, the quiescent",
        "a message is held for draining",
    ),
    _kind(
        "stuck-key",
        "KS-LIV-1",
        _Q,
        "any other unresolved message",
        "the publish, its last event, the quiescent",
        "a quiescent point with messages published",
    ),
    _kind(
        "cursor-stall",
        "KS-LIV-2",
        _Q,
        "every message is resolved but the persisted cursor is not the number of published messages",
        "the last cursor_persisted, the quiescent",
        "a quiescent point",
    ),
    # 2.4 checked by the conformance harness, not from a trace
    _kind(
        "missing-refusal",
        "KS-GEN-4",
        _H,
        "an operation the spec refuses was accepted",
        "the operation",
        "an operation the spec refuses",
    ),
    _kind(
        "refusal-with-effects",
        "KS-GEN-4",
        _H,
        "a refused operation reported events",
        "the operation",
        "a refusal",
    ),
    _kind(
        "spurious-refusal",
        "KS-GEN-4",
        _H,
        "a valid operation was refused",
        "the operation",
        "a valid operation",
    ),
    _kind(
        "system-fault",
        "KS-GEN-4",
        _H,
        "the system failed or rejected an operation (adapter response `system_fault`) instead of performing it or "
        "refusing it as the spec says",
        "the operation, the system's message",
        "a valid operation",
    ),
    _kind(
        "config-accepted",
        "KS-CFG-1",
        _H,
        "a configuration the spec refuses was accepted",
        "the configuration",
        "a configuration the spec refuses",
    ),
    _kind(
        "stats-mismatch",
        "KS-OBS-1",
        _H,
        "a stats gauge disagrees with the checker's state",
        "the stats, the op",
        "a stats query",
    ),
    _kind(
        "blocked-key-hidden",
        "KS-OBS-2",
        _H,
        "a blocked key is missing from blocked_keys or stuck_keys",
        "the key_blocked, the stats",
        "a stats query while a key is blocked",
    ),
    _kind(
        "drop-uncounted",
        "KS-BEF-2",
        _H,
        "best-effort: dropped_total disagrees with the drop events",
        "the stats",
        "a best-effort stats query",
    ),
    _kind(
        "nondeterministic",
        "KS-GEN-5",
        _H,
        "the same operations gave different events",
        "the first differing event",
        "a scenario replayed twice",
    ),
)
"""Every anomaly, in the order of spec/checking.md."""

BY_NAME: dict[str, AnomalyKind] = {kind.name: kind for kind in CATALOGUE}


def kind(name: str) -> AnomalyKind:
    """The catalogue entry of an anomaly name (KeyError names the unknown anomaly)."""
    return BY_NAME[name]


def checks_of(requirement: str) -> tuple[AnomalyKind, ...]:
    """The anomalies that judge one requirement (empty for requirements without a check of their own)."""
    return tuple(k for k in CATALOGUE if k.requirement == requirement)


@cache
def checked_requirements() -> tuple[str, ...]:
    """The requirement IDs with at least one check, in catalogue order."""
    return tuple(dict.fromkeys(k.requirement for k in CATALOGUE))


INDIRECT: dict[str, str] = {
    "KS-GEN-1": "a definition: a trace declares its profile by construction",
    "KS-GEN-2": "a definition: a trace counts in ticks by construction",
    "KS-GEN-3": "checked through incarnations: an ack of a reused name's predecessor's delivery is stale-ack-accepted",
    "KS-GEN-6": "checked through idle-while-ready",
    "KS-GEN-8": "checked through idle-while-ready: under read_trigger heartbeat its window holds only what was read, "
    "except at the end of a tick, when every message of the read bound must have been read",
    "KS-GEN-9": "checked through missed-timeout, missed-eviction, persist-late and idle-while-ready (a retry made "
    "ready), each waiting timer_slack ticks more; a timer that fires early is judged by its own requirement",
    "KS-CUR-12": "checked through persist-late and persist-early, whose due point under persist_trigger advance is an "
    "op that moved the cursor once persist_interval ticks have passed, or a flush tick (persist_flush)",
    "KS-ASN-3": "statistical; tested on the reference's selectors, not judged per trace",
    "KS-ASN-4": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-5": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-6": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-7": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-8": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-9": "checked through key-moved: a redelivery goes to the epoch's target",
    "KS-ASN-10": "a definition: selector any is judged through idle-while-ready and split-owner",
    "KS-ASN-11": "a definition: the partition function is the implementation's; selector partitions is judged through "
    "key-moved and unstable-assignment (a key moves only away from a leaver)",
    "KS-FLT-1": "a definition the checker uses itself; tested on the reference",
    "KS-FLT-5": "a definition the checker uses itself; tested on the reference",
    "KS-ORD-4": "a permission, not an obligation",
    "KS-DRN-3": "a permission, not an obligation: the holds it allows are the ones idle-while-ready accepts",
    "KS-POI-1": "checked through unjustified-resolution and stuck-key",
    "KS-RES-3": "checked through persist-late and cursor-stall",
    "KS-CUR-6": "a property of the store; tested on the reference with a million holes",
    "KS-ISO-2": "observed only through idle-while-ready",
    "KS-ISO-3": "observed only through idle-while-ready, whose window under read_bound lookahead is the messages "
    "that fewer than L earlier waiting messages precede",
    "KS-ISO-4": "observed through idle-while-ready and window-overrun, whose counts leave the parked messages out",
    "KS-ISO-5": "not observable from outside: what a dispatcher keeps of a parked message does not show in its events",
    "KS-FLW-5": "not observable from outside: a read shows only when its message is delivered, held or resolved, "
    "possibly ops later, when the number of waiting messages has changed",
    "KS-BKT-2": "a property of the layout operations; misrouted-bucket shows its violations",
    "KS-BKT-7": "observability without a fixed value to compare",
    "KS-OBS-3": "observability without a fixed value to compare",
}
"""spec/checking.md section 3: requirements without a check of their own, and why."""
