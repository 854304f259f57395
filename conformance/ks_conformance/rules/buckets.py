"""The rules of spec section 17 Buckets and segments."""

from __future__ import annotations

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
        "buckets" in a.selectors and "owner" in a.profiles and ("publish_entry" in a.ops),
        "the owner profile, selector buckets and op publish_entry",
    ),
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
