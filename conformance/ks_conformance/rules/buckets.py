"""The rules of spec section 17 Buckets and segments."""

from __future__ import annotations

from ks_conformance.explain import (
    Explained,
    bucket_of,
    bucket_rule,
    message_clause,
)
from ks_conformance.rules.registry import Scope, Stage, define, need

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
