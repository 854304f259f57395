"""spec/checking.md section 2.1, buckets (section 17 of the spec): routing a delivery of a bucket to its owner,
handoffs, successors after a layout change, and the stability of the bucket policy.
"""

from __future__ import annotations

from ks_conformance import explain, rules
from ks_conformance.checks.records import Incarnation, Message, Segment
from ks_conformance.checks.state import CheckerState, Event, bucket_owner


def on_bucket_withheld(st: CheckerState, event: Event) -> None:
    st.withheld_buckets.add((int(event["segment"]), int(event["bucket"])))
    bucket_decision(st, event)


def on_bucket_assigned(st: CheckerState, event: Event) -> None:
    st.withheld_buckets.discard((int(event["segment"]), int(event["bucket"])))
    bucket_decision(st, event)


def bucket_decision(st: CheckerState, event: Event) -> None:
    """A handoff or withholding names a bucket's new target: it must be one the membership changes since the
    bucket's previous target explain (KS-BKT-8), judged on the implementation's own account before any delivery
    shows it. Several changes may come before one decision (a tick evicting two members): only joins, and the
    target must be a joiner; only leaves, and the previous target must have left; a mix is not judged."""
    bucket = (int(event["segment"]), int(event["bucket"]))
    target, seq = str(event["consumer"]), int(event["seq"])
    decided = st.bucket_decided.get(bucket)
    st.bucket_decided[bucket] = (target, seq, st.epoch)
    if decided is None or decided[0] == target or st.config["bucket_assignment"] == "sorted":
        return  # a first target, a withheld bucket handed to the target already named, or a policy exempt
    since = [st.epoch_change.get(e) for e in range(decided[2] + 1, st.epoch + 1)]
    changes = [c for c in since if c is not None]
    if not changes or len(changes) < len(since) or any(c[1] is None for c in changes):
        return  # no membership change, or a restart or layout change among them
    kinds = {c[0] for c in changes}
    if kinds not in ({"join"}, {"leave"}):
        return
    if st.controller_moves and st.op is not None and st.op.seq > changes[-1][2]:
        return  # req: KS-BKT-3 (with controller_moves: an op after the change, so the controller's own move)
    # req: KS-BKT-8
    st._exercise("unstable-buckets")
    previous, previous_seq = decided[0], decided[1]
    names = [c[1].name for c in changes if c[1] is not None]
    last_change, last_changed, change_seq = changes[-1]
    assert last_changed is not None
    if kinds == {"join"} and target in names:
        if len(changes) > 1:
            return  # the share of one joiner is judged after a single join
        moved_to = st._buckets_moved.setdefault((st.epoch, bucket[0]), set())
        moved_to.add(bucket[1])
        segment = st.segments.get(bucket[0])
        if segment is None:
            return
        share = -(-segment.buckets // max(1, len(st.members)))
        if len(moved_to) <= share:
            return
        why = explain.buckets_over_share(len(moved_to), bucket[0], target, segment.buckets, len(st.members), share)
    elif kinds == {"leave"} and previous in names:
        return
    else:
        why = explain.bucket_moved_by(
            " and ".join(names), last_change, change_seq, bucket[1], bucket[0], previous, target
        )
    st._report(
        "unstable-buckets",
        seq,
        [previous_seq, *(c[2] for c in changes), seq],
        explain.unstable_bucket_decision(
            str(event["event"]),
            bucket[1],
            bucket[0],
            previous,
            previous_seq,
            target,
            st.config["bucket_assignment"],
            why,
            seq,
        ),
    )


def check_bucket_delivery(
    st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None, name: str
) -> None:
    assert message.segment is not None and message.bucket is not None
    segment = st.segments.get(message.segment)
    if segment is None:
        return
    bucket = (message.segment, message.bucket)
    names = sorted(st.members)
    if names and st.config["bucket_assignment"] != "sorted":
        check_bucket_owner(st, message, seq, incarnation, name)
    elif names:
        # req: KS-BKT-3
        st._exercise("bucket-misassigned")
        owner = bucket_owner(message.bucket, segment.buckets, names, segment.number)
        if owner != name:
            st._report(
                "bucket-misassigned",
                seq,
                [seq],
                rules.buckets.bucket_misassigned_sorted(
                    *message.facts, segment.number, segment.buckets, message.bucket, names, owner, name, seq
                ),
            )
    outstanding = st.bucket_outstanding.get(bucket, {})
    if any(d.epoch < st.epoch for d in outstanding.values()):
        st._exercise("bucket-split-owner")
    # req: KS-BKT-4
    other = next((d for d in outstanding.values() if d.holder is not incarnation), None)
    if other is not None:
        st._report(
            "bucket-split-owner",
            seq,
            [other.seq, seq],
            rules.buckets.bucket_split_owner(
                *message.facts, bucket, other.holder.name, other.offset, other.seq, name, seq
            ),
        )
    if segment.predecessors:
        # req: KS-BKT-5
        st._exercise("successor-first")
        check_ancestors_drained(st, message, segment, seq)


def check_ancestors_drained(st: CheckerState, message: Message, segment: Segment, seq: int) -> None:
    """A successor's message goes only once no ancestor (predecessors, theirs, ...) holds an unresolved message
    of its range: a merged segment waits for both predecessors, a rollover of an empty segment for the one
    before it (KS-BKT-5)."""
    for ancestor, earlier in st.ancestors_unresolved(segment):
        if earlier.hash is not None and segment.lo <= earlier.hash >> 16 <= segment.hi:
            st._report(
                "successor-first",
                seq,
                [earlier.publish_seq, seq],
                rules.buckets.successor_first(
                    message.offset, segment.number, segment.lo, segment.hi, ancestor.number, *earlier.facts, seq
                ),
            )
            return


def check_bucket_owner(
    st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None, name: str
) -> None:
    """Policies other than `sorted`: one owner per bucket within an epoch (KS-BKT-3), and a join or leave
    moves only what it must (KS-BKT-8), judged on buckets delivered on both sides of one membership change."""
    assert message.segment is not None and message.bucket is not None and incarnation is not None
    bucket = (message.segment, message.bucket)
    decided = st.bucket_decided.get(bucket) if st.controller_moves else None
    if decided is not None:
        # req: KS-BKT-3 (with controller_moves every move is announced: the target is the last one named)
        st._exercise("bucket-misassigned")
        if decided[0] != name:
            st._report(
                "bucket-misassigned",
                seq,
                [decided[1], seq],
                explain.bucket_move_unannounced(
                    message.offset, message.bucket, message.segment, decided[0], decided[1], name, seq
                ),
            )
    last = st.bucket_last.get(bucket)
    st.bucket_last[bucket] = (st.epoch, incarnation, seq)
    if last is None:
        return
    epoch, previous, previous_seq = last
    if previous is not incarnation and st.controller_moved(message.segment, message.bucket, name, previous_seq):
        st._exercise("bucket-misassigned")
        return  # req: KS-BKT-3 (with controller_moves: a move the controller announced before this delivery)
    if epoch == st.epoch:
        # req: KS-BKT-3
        st._exercise("bucket-misassigned")
        if previous is incarnation:
            return
        st._report(
            "bucket-misassigned",
            seq,
            [previous_seq, seq],
            rules.buckets.bucket_misassigned_moved(
                message.offset, message.bucket, message.segment, previous.name, previous_seq, name, seq
            ),
        )
        return
    if epoch != st.epoch - 1:
        return
    change, changed, change_seq = st.epoch_change[st.epoch]
    if change not in ("join", "leave") or changed is None:
        return
    # req: KS-BKT-8
    st._exercise("unstable-buckets")
    if previous is incarnation:
        return
    moved_to = st._buckets_moved.setdefault((st.epoch, message.segment), set())
    if change == "join" and changed is incarnation:
        moved_to.add(message.bucket)
        segment = st.segments[message.segment]
        share = -(-segment.buckets // max(1, len(st.members)))
        if len(moved_to) <= share:
            return
        why = explain.buckets_over_share(len(moved_to), message.segment, name, segment.buckets, len(st.members), share)
    elif change == "leave" and changed is previous:
        return
    else:
        why = explain.bucket_moved_by(
            changed.name, change, change_seq, message.bucket, message.segment, previous.name, name
        )
    st._report(
        "unstable-buckets",
        seq,
        [previous_seq, change_seq, seq],
        rules.buckets.unstable_buckets(
            message.offset,
            message.bucket,
            message.segment,
            previous.name,
            previous_seq,
            name,
            st.config["bucket_assignment"],
            why,
            seq,
        ),
    )
