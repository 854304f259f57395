"""The rules of spec section 17 Buckets and segments.

Long because the section has nine rules (ownership, handoffs, successors, layouts, batches) and each brings its
explanation and its check; splitting it would part a rule from its section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ks_conformance import explain
from ks_conformance.checks.hooks import at_delivery
from ks_conformance.checks.layout import layout_problem
from ks_conformance.checks.records import BatchRun
from ks_conformance.checks.selectors import SLOTS, bucket_owner
from ks_conformance.explain import (
    Explained,
    bucket_of,
    bucket_rule,
    message_clause,
)
from ks_conformance.rules import cursor
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, Message, Segment
    from ks_conformance.checks.state import CheckerState, Event

MISROUTED_BUCKET = define(
    "misrouted-bucket",
    "KS-BKT-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "selector `buckets`: a `publish` whose segment is not the active segment containing `hash >> 16`, or "
        "whose bucket is not `floor((hash & 0xFFFF) * N / 65536)`"
    ),
    witness="the `segment_created`, the `publish`",
    exercised="a publish",
    needs=lambda a: need("buckets" in a.selectors, "selector buckets"),
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


BUCKET_MISASSIGNED = define(
    "bucket-misassigned",
    "KS-BKT-3",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        'selector `buckets`: with `bucket_assignment = "sorted"`, a delivery of a bucket of segment s to a '
        "consumer other than member j of the segment's order (the members sorted by name, rotated left by `s "
        "mod k`), with j owning `floor(j*N/k)` to `floor((j+1)*N/k) - 1`; with another policy, deliveries of "
        "a bucket to two consumers within one epoch"
    ),
    witness="the delivery (another policy: both deliveries)",
    exercised="a delivery",
    needs=lambda a: need("buckets" in a.selectors, "selector buckets"),
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
            f"{bucket_of(bucket, segment)} was delivered to {previous} at seq {previous_seq}",
            "no membership change since",
        ],
        f"m{offset} of it went to {consumer} [seq {seq}], but a bucket has one target at a time (KS-BKT-3)",
        {"offset": offset, "consumer": consumer, "owner": previous},
    )


UNSTABLE_BUCKETS = define(
    "unstable-buckets",
    "KS-BKT-8",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        "selector `buckets`, `bucket_assignment` `sticky` or `controller`: a bucket delivered before one join"
        " or leave and after it to another consumer, or given a new target by a `bucket_assigned` or "
        "`bucket_withheld` after it, other than to the joiner or away from the leaver, or more than "
        "`ceil(N/k)` buckets of a segment moving to a joiner"
    ),
    witness="the earlier delivery or assignment, the membership change, the delivery or assignment",
    exercised="a delivery of a bucket, or a new target named, after a join or leave",
    needs=lambda a: (
        need("buckets" in a.selectors, "selector buckets")
        or need(
            bool(set(a.declared.get("bucket_assignment", ())) - {"sorted"}),
            "bucket_assignment sticky or controller declared in config_values (sorted is exempt from KS-BKT-8)",
        )
    ),
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
            f"{bucket_of(bucket, segment)} was delivered to {previous} at seq {previous_seq}",
            f"m{offset} went to {consumer}",
        ],
        bucket_rule(why, policy),
        {"offset": offset, "consumer": consumer, "other": previous},
    )


BUCKET_SPLIT_OWNER = define(
    "bucket-split-owner",
    "KS-BKT-4",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        "selector `buckets`: a delivery of an entry of (segment, bucket) while another incarnation holds an "
        "outstanding entry of that bucket"
    ),
    witness="the other delivery, the delivery",
    exercised="a delivery of a bucket that moved",
    needs=lambda a: need("buckets" in a.selectors, "selector buckets"),
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


SUCCESSOR_FIRST = define(
    "successor-first",
    "KS-BKT-5",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        "selector `buckets`: a delivery of a message of a segment while an ancestor segment (a predecessor, "
        "or an ancestor's predecessor) has an unresolved message whose `hash >> 16` lies in the segment's "
        "range"
    ),
    witness="the ancestor's publish, the delivery",
    exercised="a delivery from a segment with a predecessor",
    needs=lambda a: need(
        "buckets" in a.selectors and bool({"rollover", "split", "merge"} & a.ops), "op rollover, split or merge"
    ),
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


CHECKPOINT_SKIP = define(
    "checkpoint-skip",
    "KS-BKT-6",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    "a `checkpoint` above an unresolved message of its (segment, bucket), or below the previous checkpoint of it",
    witness="the publish or the earlier checkpoint, the `checkpoint`",
    exercised="a checkpoint",
    needs=lambda a: need("buckets" in a.selectors, "selector buckets"),
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


CHECKPOINT_RESURRECTED = define(
    "checkpoint-resurrected",
    "KS-BKT-9",
    Stage.EVENT,
    Scope.KEY,
    (
        "selector `buckets` with `checkpoint_resume`: after a restart, a delivery of a message whose offset "
        "lies below the last `checkpoint` of its (segment, bucket) recorded before the restart"
    ),
    witness="the `checkpoint`, the `restart`, the delivery",
    exercised="a delivery after a restart, with checkpoints loaded",
    needs=lambda a: (
        need("buckets" in a.selectors and "restart" in a.ops, "selector buckets and op restart")
        or need(True in a.declared.get("checkpoint_resume", ()), "checkpoint_resume true declared in config_values")
    ),
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


ENTRY_SPLIT = define(
    "entry-split",
    "KS-BKT-10",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "the first delivery of a message of a batch (`publish_entry`) since it was published or the last "
        "restart while an earlier message of the batch is unresolved and not yet delivered since then; or, "
        "after it, a delivery other than the next such message of the batch to the same consumer, or the end "
        "of the op before them all"
    ),
    witness="the batch's first delivery or earlier message's publish, the delivery or the op",
    exercised="a first delivery of a message of a batch with other messages still to deliver",
    needs=lambda a: need(
        ("buckets" in a.selectors or a.key_batches) and "owner" in a.profiles and "publish_entry" in a.ops,
        "the owner profile, op publish_entry and selector buckets or key-based batches (capability key_batches)",
    ),
)


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


INVALID_LAYOUT = define(
    "invalid-layout",
    "KS-BKT-11",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        'selector `buckets` with `layout = "reported"`: an op whose `segment_created` events give a segment '
        "an `N` outside 1 to `bucket_max`, give a split children that do not partition the parent's range at "
        "a point strictly inside it or do not have `max(1, N / 2)` buckets each, give a merge a successor "
        "that does not cover exactly its two adjacent predecessors, or leave the active segments not "
        "partitioning the ring; or a `publish` placed in a segment no `segment_created` reported before it "
        "(instead of `misrouted-bucket`)"
    ),
    witness="the `segment_created` events (and their predecessors'), or the `publish`",
    exercised='a layout change or publish with `layout = "reported"`',
    needs=lambda a: (
        need("buckets" in a.selectors and bool({"split", "merge"} & a.ops), "selector buckets and op split or merge")
        or need("reported" in a.declared.get("layout", ()), "layout reported declared in config_values")
    ),
)


def invalid_layout(facts: list[str], problem: str) -> Explained:
    """KS-BKT-11: with `layout = "reported"`, a layout change the dispatcher reported is not a valid one."""
    return (
        ["layout = reported: the dispatcher chooses split points and merged N and reports them", *facts],
        f"{problem}, but a reported layout must be a valid one (KS-BKT-11)",
        {},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def check_layout(st: CheckerState) -> None:
    """KS-BKT-11: the layout the dispatcher reported is a valid one, and it routed nothing by a segment it had
    not reported; judged once an op's segment events end (its first other event, or the op's end)."""
    created, st.created_in_op = st.created_in_op, []
    findings, st.layout_findings = st.layout_findings, []
    if created:
        st._exercise_shared("invalid-layout")  # (a layout change: every shard of keys sees it)
        found = layout_problem(st.segments, created, int(st.config["bucket_max"]))
        if found is not None:
            findings.insert(0, found)
    for facts, problem, witness in findings[:1]:
        # req: KS-BKT-11
        st._report("invalid-layout", st.last_seq, witness, invalid_layout(facts, problem))


def publish_placement(st: CheckerState, message: Message, event: Event) -> None:
    """KS-BKT-2 and KS-BKT-11 at a publish under `buckets`: the message is placed in the bucket of the active
    segment its hash falls in, and that segment was reported first."""
    seq = message.publish_seq
    if not place(message, event):
        st._problem(seq, "a publish with selector 'buckets' must carry hash, segment and bucket")
        return
    assert message.hash is not None and message.segment is not None and message.bucket is not None
    high, low = message.hash >> 16, message.hash & 0xFFFF
    st._exercise("misrouted-bucket")
    right = next((s for s in st.segments.values() if not s.sealed and s.lo <= high <= s.hi), None)
    segment = st.segments.get(message.segment)
    if segment is None and st.layout_reported:
        # req: KS-BKT-11 (a segment is reported before anything is routed by it)
        st._exercise("invalid-layout")
        facts = [message_clause(message.offset, message.key, seq) + f" placed in segment {message.segment}"]
        problem = f"no segment_created reported segment {message.segment} before m{message.offset} was routed to it"
        st.layout_findings.append((facts, problem, [seq]))
    elif right is None:
        st._problem(seq, f"no active segment contains hash >> 16 = {high}")
    elif segment is not right:
        st._report(
            "misrouted-bucket",
            seq,
            [right.created_seq, seq],
            misrouted_bucket_wrong_segment(
                *message.facts, message.hash, right.number, right.created_seq, message.segment
            ),
        )
    elif message.bucket != low * segment.buckets // SLOTS:
        st._report(
            "misrouted-bucket",
            seq,
            [segment.created_seq, seq],
            misrouted_bucket_wrong_bucket(
                *message.facts, message.hash, segment.buckets, segment.created_seq, message.bucket
            ),
        )
    st.index_placement(message)


def place(message: Message, event: Event) -> bool:
    """Take a publish's hash, segment and bucket into its message; False if one is missing."""
    if event.get("hash") is None or event.get("segment") is None or event.get("bucket") is None:
        return False
    message.hash, message.segment, message.bucket = int(event["hash"]), int(event["segment"]), int(event["bucket"])
    return True


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
    st._exercise_shared("unstable-buckets")  # (a handoff event: every shard of keys sees it)
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
    """Section 17 at a delivery under `buckets`: the bucket goes to its owner (or by its policy), and a successor's
    messages wait until its ancestors' are drained."""
    assert message.segment is not None and message.bucket is not None
    segment = st.segments.get(message.segment)
    if segment is None:
        return
    bucket = (message.segment, message.bucket)
    names = sorted(st.members)
    if names and st.config["bucket_assignment"] != "sorted":
        if incarnation is not None:  # (a delivery to a non-member is its own anomaly: KS-MEM-3)
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
                bucket_misassigned_sorted(
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
            bucket_split_owner(*message.facts, bucket, other.holder.name, other.offset, other.seq, name, seq),
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
                successor_first(
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
            bucket_misassigned_moved(
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
        unstable_buckets(
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


@at_delivery
def check_batch(st: CheckerState, message: Message, event: Event) -> None:
    """A batch is delivered whole (KS-BKT-10): its first delivery since it was published (or the last restart)
    starts from its first such message, and the others follow it to the same consumer, delivery after delivery."""
    seq, name, anew = int(event["seq"]), str(event["consumer"]), not message.delivered_since_restart
    run = st.batch_run
    if run is not None:
        if st._continuing_batch:
            run.expected.pop(0)
            if not run.expected:
                st.batch_run = None
            return
        interrupt_batch(st, message.offset, name, seq)
    if message.entry is None or not anew:
        return
    waiting = [
        o
        for o in st.batches.get(message.entry, ())
        if o != message.offset and not st.messages[o].resolved and not st.messages[o].delivered_since_restart
    ]
    if not waiting:
        return
    # req: KS-BKT-10
    st._exercise("entry-split")
    earlier = [o for o in waiting if o < message.offset]
    if earlier:
        before = st.messages[earlier[0]]
        st._batch_findings.append(
            (
                [before.publish_seq, seq],
                entry_split_later_first(*message.facts, message.entry, *before.facts, seq),
            )
        )
        return
    st.batch_run = BatchRun(message.entry, name, message.offset, seq, waiting)


def interrupt_batch(st: CheckerState, offset: int, name: str, seq: int) -> None:
    """KS-BKT-10: a delivery of m`offset` to `name` that does not continue the batch being delivered ends its run;
    the finding is reported when the op closes (a shard of keys calls this for another shard's delivery too)."""
    run = st.batch_run
    assert run is not None
    st.batch_run = None
    st._batch_findings.append(
        (
            [run.first_seq, seq],
            entry_split_interrupted(
                run.entry, run.first_offset, run.consumer, run.first_seq, run.expected[0], offset, name, seq
            ),
        )
    )


def check_checkpoint_resurrected(st: CheckerState, message: Message, seq: int) -> None:
    """KS-BKT-9 at a delivery after a restart that resumed buckets from their checkpoints: nothing a bucket's
    checkpoint covered is delivered again (what the cursor covered is KS-CUR-4's)."""
    if st.loaded is None or not st.loaded_checkpoints or cursor.below_loaded_cursor(st, message):
        return
    st._exercise("checkpoint-resurrected")
    restart_seq = st.loaded[3]
    checkpoint = checkpointed(st, message)
    if checkpoint is not None:
        st._report(
            "checkpoint-resurrected",
            seq,
            [checkpoint[1], restart_seq, seq],
            checkpoint_resurrected(*message.facts, (message.segment, message.bucket), *checkpoint, restart_seq, seq),
        )


def checkpointed(st: CheckerState, message: Message) -> tuple[int, int] | None:
    """With `checkpoint_resume`, the loaded checkpoint (position, seq) of the message's bucket when the message
    lies below it, else None."""
    if message.segment is None or message.bucket is None:
        return None
    loaded = st.loaded_checkpoints.get((message.segment, message.bucket))
    return loaded if loaded is not None and message.offset < loaded[0] else None


def check_checkpoint(st: CheckerState, bucket: tuple[int, int], cursor: int, seq: int) -> None:
    """KS-BKT-6 at a `checkpoint`: a bucket's checkpoint passes none of its unresolved messages and never moves
    back."""
    st._exercise_shared("checkpoint-skip")  # (a checkpoint event: every shard of keys sees it)
    pending = st.bucket_unresolved.get(bucket)
    first = pending.first() if pending is not None else None
    if first is not None and first < cursor:
        skipped = st.message_at(first)
        st._report(
            "checkpoint-skip",
            seq,
            [skipped.publish_seq, seq],
            checkpoint_skip_passes(*skipped.facts, bucket, cursor, seq),
        )
    previous = st.checkpoints.get(bucket)
    if previous is not None and cursor < previous[0]:
        st._report(
            "checkpoint-skip",
            seq,
            [previous[1], seq],
            checkpoint_skip_regress(bucket, previous[0], previous[1], cursor, seq),
        )
