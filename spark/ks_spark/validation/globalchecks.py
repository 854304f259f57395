"""The checks that span keys: capacity per consumer incarnation, the window, and the persisted cursor.

They read what the per-key pass emitted (delivery intervals, per-era message rows), never the raw
trace, and each is a scan that Spark parallelises: a running sum per incarnation for capacity, and a
sweep over offset ranges for the window and the cursor whose few per-range summaries are combined
on the driver (the "blocked two-pass" running maximum; for the window, a running top-W).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from ks_conformance import rules

from ks_spark.session import cache_level
from ks_spark.validation.keystate import NEVER, ROW_ERA, ROW_INTERVAL, Context
from ks_spark.validation.timeline import QuiescentPoint

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

ANOMALY_DDL = "name string, seq bigint, w array<bigint>, key string, a bigint, b bigint, consumer string, other string"
"""The common shape of every anomaly row: a = the message's offset, b = another offset (when any)."""

MESSAGE, PERSIST_QUERY, PERSIST_EXERCISE = 0, 1, 2


UNIFIED_COLUMNS = ("name", "seq", "w", "key", "offset", "text", "consumer", "x", "y", "era", "bad", "ex")
"""Every finding row, whatever pass found it. `bad` = 1 for an anomaly, `ex` = 1 for an exercised check;
x and y carry facts the explanation needs (see each check)."""


CAPACITY_BLOCK_SEQS = 1 << 12
"""The capacity running sum is computed per (incarnation, block of this many seqs), plus the block's base."""
CAPACITY_BROADCAST_BLOCKS = 200_000
"""Up to this many blocks that may reach capacity are broadcast to the tasks (3 longs each, a few MB)."""


def capacity_findings(
    session: SparkSession, key_rows: DataFrame, context: Context, cached: list[DataFrame]
) -> DataFrame:
    """capacity-overrun (KS-FLW-1): a delivery that leaves its consumer holding more than its capacity.

    A running sum of +1 per delivery and -1 per delivery end, per consumer incarnation. Every delivery
    that reaches capacity is an exercise (x = incarnation id, y = deliveries held after it); those
    beyond it are anomalies. The sum is blocked by seq: per (incarnation, block) Spark aggregates the
    block's total and its deliveries, and the base (what the incarnation held when the block began) is a
    running sum over those few totals. A block whose base plus deliveries stays under capacity cannot
    reach it, so only the other blocks are sorted for the exact running sum: no task ever buffers more
    than one block, and a trace far from its capacities skips the sort altogether. The frame it keeps
    (the blocks that may reach capacity) is added to `cached`, for the caller to unpersist when done.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    incs = [
        (inc.inc_id, inc.added, inc.capacity)
        for incs in context.incarnations.values()
        for inc in incs
        if inc.capacity < NEVER
    ]
    capacities = session.createDataFrame(incs or [(-1, -1, 0)], "inc long, added long, cap long")
    intervals = key_rows.where((F.col("r") == ROW_INTERVAL) & (F.col("a") >= 0))
    starts = intervals.select(
        F.col("a").alias("inc"),
        F.col("b").alias("seq"),
        F.lit(1).alias("delta"),
        F.col("d").alias("offset"),
        F.col("consumer"),
    )
    ends = intervals.where(F.col("c").isNotNull()).select(
        F.col("a").alias("inc"),
        F.col("c").alias("seq"),
        F.lit(-1).alias("delta"),
        F.lit(None).cast("long").alias("offset"),
        F.lit(None).cast("string").alias("consumer"),
    )
    # Only incarnations with a capacity count; a block holds every row of its seqs, so ties stay together.
    deltas = (
        starts.unionByName(ends)
        .join(F.broadcast(capacities.select("inc")), "inc")
        .withColumn("block", F.expr(f"seq div {CAPACITY_BLOCK_SEQS}"))
    )
    earlier = Window.partitionBy("inc").orderBy("block").rowsBetween(Window.unboundedPreceding, -1)
    candidates = (
        deltas.groupBy("inc", "block")
        .agg(F.sum("delta").alias("total"), F.sum(F.when(F.col("delta") == 1, 1).otherwise(0)).alias("given"))
        .withColumn("base", F.coalesce(F.sum("total").over(earlier), F.lit(0)))
        .join(F.broadcast(capacities.select("inc", "cap")), "inc")
        .where(F.col("base") + F.col("given") >= F.col("cap"))
        .select("inc", "block", "base")
        .persist(cache_level())
    )
    cached.append(candidates)
    # The usual case, few blocks near capacity: sent to every task, so the deltas are never shuffled for a join.
    if candidates.count() <= CAPACITY_BROADCAST_BLOCKS:
        candidates = F.broadcast(candidates)
    # At one seq a start comes before an end: the only end at a delivery's seq is the delivery it replaces (the same
    # message delivered again to the same consumer), which the consumer still holds when the new one arrives.
    within = (
        Window.partitionBy("inc", "block")
        .orderBy("seq", F.col("delta").desc())
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    held = (
        deltas.join(candidates, ["inc", "block"])
        .withColumn("running", F.sum("delta").over(within))
        .where(F.col("delta") == 1)
        .withColumn("holding", F.col("base") + F.col("running"))
        .join(F.broadcast(capacities), "inc")
    )
    # req: KS-FLW-1
    return held.where(F.col("holding") >= F.col("cap")).select(
        F.lit("capacity-overrun").alias("name"),
        F.col("seq"),
        F.array(F.col("added"), F.col("seq")).alias("w"),
        F.lit(None).cast("string").alias("key"),
        F.col("offset"),
        F.lit(None).cast("string").alias("text"),
        F.col("consumer"),
        F.col("inc").alias("x"),
        F.col("holding").alias("y"),
        F.lit(None).cast("long").alias("era"),
        (F.col("holding") > F.col("cap")).cast("int").alias("bad"),
        F.lit(1).alias("ex"),
    )


@dataclass(frozen=True)
class RangePlan:
    """How the per-era message rows are cut into offset ranges for the sweep."""

    width: int
    window: int  # 0: no window check


def plan_ranges(published: int, parallelism: int, window: int) -> RangePlan:
    """Ranges of 65,536 to 1,048,576 offsets, about four per task slot (a sweep buffers one range at a time)."""
    width = max(65536, min(-(-published // max(1, 4 * parallelism)), 1 << 20))
    return RangePlan(width, window)


def _groups(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, int, dict[str, np.ndarray[Any, Any]]]]:
    """Regroup a partition's rows (sorted by era, range, offset, kind) into one numpy dict per (era, range)."""
    buffered: list[pa.RecordBatch] = []
    current: tuple[int, int] | None = None

    def flush() -> dict[str, np.ndarray[Any, Any]]:
        table = pa.Table.from_batches(buffered)
        return {name: table.column(name).to_numpy() for name in table.column_names}

    for batch in batches:
        if batch.num_rows == 0:
            continue
        eras = batch.column("era").to_numpy()
        ranges = batch.column("rng").to_numpy()
        change = np.flatnonzero((eras[1:] != eras[:-1]) | (ranges[1:] != ranges[:-1])) + 1
        bounds = [0, *change.tolist(), batch.num_rows]
        for start, end in itertools.pairwise(bounds):
            group = (int(eras[start]), int(ranges[start]))
            if current is not None and group != current:
                yield current[0], current[1], flush()
                buffered = []
            current = group
            buffered.append(batch.slice(start, end - start))
    if current is not None and buffered:
        yield current[0], current[1], flush()


SUMMARY_DDL = "era bigint, rng bigint, top array<bigint>, maxend bigint"


def summary_function(window: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass 1: per (era, range), the largest `window` end seqs (top-W) and the largest end."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out: dict[str, list[Any]] = {"era": [], "rng": [], "top": [], "maxend": []}
        for era, rng, group in _groups(batches):
            ends = group["end"][group["kind"] == MESSAGE]
            top: list[int] = []
            if window > 0 and ends.size:
                keep = min(window, ends.size)
                top = np.partition(ends, ends.size - keep)[ends.size - keep :].tolist()
            out["era"].append(era)
            out["rng"].append(rng)
            out["top"].append(top)
            out["maxend"].append(int(ends.max()) if ends.size else -1)
        yield pa.RecordBatch.from_pydict(
            out,
            schema=pa.schema(
                [("era", pa.int64()), ("rng", pa.int64()), ("top", pa.list_(pa.int64())), ("maxend", pa.int64())]
            ),
        )

    return run


def prefix_summaries(rows: list[Any], window: int) -> dict[tuple[int, int], tuple[int, list[int]]]:
    """For each (era, range): the largest end and the top-W ends over all lower ranges of the era."""
    result: dict[tuple[int, int], tuple[int, list[int]]] = {}
    by_era: dict[int, list[Any]] = {}
    for row in rows:
        by_era.setdefault(row.era, []).append(row)
    for era, era_rows in by_era.items():
        running_max = -1
        running_top = np.array([], dtype=np.int64)
        for row in sorted(era_rows, key=lambda r: r.rng):
            result[(era, row.rng)] = (running_max, running_top.tolist())
            running_max = max(running_max, int(row.maxend))
            if window > 0:
                merged = np.concatenate((running_top, np.asarray(row.top, dtype=np.int64)))
                if merged.size > window:
                    merged = np.partition(merged, merged.size - window)[merged.size - window :]
                running_top = merged
    return result


SWEEP_DDL = "name string, seq bigint, a bigint, b bigint, q bigint, era bigint"


def sweep_function(
    prefixes: Broadcast[dict[tuple[int, int], tuple[int, list[int]]]], window: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass 2: per (era, range), in offset order, the window check and the cursor queries.

    window-overrun: a first delivery at seq t of offset o while at least W offsets below o are
    unresolved, i.e. the W-th largest end among lower offsets is > t (a min-heap of the top W).
    cursor-skip: a persisted cursor q at seq p with some offset below q still unresolved at p, i.e.
    the running maximum of the ends below q is > p.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out: dict[str, list[Any]] = {"name": [], "seq": [], "a": [], "b": [], "q": [], "era": []}

        def add(name: str, seq: int, a: int, b: int, q: int, era: int) -> None:
            out["name"].append(name)
            out["seq"].append(seq)
            out["a"].append(a)
            out["b"].append(b)
            out["q"].append(q)
            out["era"].append(era)

        for era, rng, group in _groups(batches):
            prefix_max, prefix_top = prefixes.value.get((era, rng), (-1, []))
            kind = group["kind"]
            ends = np.where(kind == MESSAGE, group["end"], -1)
            running = np.maximum.accumulate(np.maximum(ends, prefix_max))
            queries = np.flatnonzero(kind != MESSAGE)
            seqs = group["pseq"]
            for index in queries[running[queries] > seqs[queries]]:
                # req: KS-CUR-1
                name = "cursor-skip" if kind[index] == PERSIST_QUERY else "cursor-skip:exercised"
                add(name, int(seqs[index]), int(group["q"][index]), -1, int(group["q"][index]), era)
            if window <= 0:
                continue
            heap = list(prefix_top)
            heapq.heapify(heap)
            size = len(heap)
            message_rows = kind == MESSAGE
            offsets = group["offset"][message_rows].tolist()
            firsts = group["fd"][message_rows].tolist()
            for offset, first, end in zip(offsets, firsts, ends[message_rows].tolist(), strict=True):
                if first >= 0:
                    if size >= window and heap[0] > first:
                        # req: KS-FLW-2
                        add("window-overrun", first, offset, -1, -1, era)
                    if window == 1:
                        exercised = True
                    elif size >= window:
                        exercised = (heap[1] if size == 2 else min(heap[1], heap[2])) > first
                    else:
                        exercised = size == window - 1 and heap[0] > first
                    if exercised:
                        add("window-overrun:exercised", first, offset, -1, -1, era)
                if size < window:
                    heapq.heappush(heap, end)
                    size += 1
                elif end > heap[0]:
                    heapq.heapreplace(heap, end)
        yield pa.RecordBatch.from_pydict(
            out,
            schema=pa.schema(
                [
                    ("name", pa.string()),
                    ("seq", pa.int64()),
                    ("a", pa.int64()),
                    ("b", pa.int64()),
                    ("q", pa.int64()),
                    ("era", pa.int64()),
                ]
            ),
        )

    return run


def era_expression(restart_seqs: list[int], column: str = "seq") -> Any:
    """A Spark column: the restart era of a seq (how many restarts happened before it)."""
    from pyspark.sql import functions as F

    if not restart_seqs:
        return F.lit(0).cast("long")
    values = ",".join(str(s) for s in restart_seqs)
    return F.expr(f"cast(size(filter(array({values}), r -> r < {column})) as bigint)")


def window_and_cursor(
    session: SparkSession,
    key_rows: DataFrame,
    persists: DataFrame,
    pub_bases: dict[tuple[str, int], int],
    context: Context,
    published: int,
    window: int,
    parallelism: int,
) -> tuple[DataFrame, DataFrame, list[DataFrame]]:
    """window-overrun (KS-FLW-2) and cursor-skip (KS-CUR-1) from the per-era message rows and the persists.

    `persists` are the sequence pass's persisted cursors (seq, cursor a, run-local published count c,
    file, block, ranges). Returns (sweep rows, hole anomalies, the frames cached here for the caller to
    unpersist when done).
    """
    from pyspark.sql import functions as F

    plan = plan_ranges(published, parallelism, window)
    restart_seqs = [r.seq for r in context.restarts]
    bases = session.createDataFrame(
        [(file, block, base) for (file, block), base in pub_bases.items()] or [("", -1, 0)],
        "file string, block long, base long",
    )
    located = persists.join(F.broadcast(bases), ["file", "block"]).select(
        F.col("seq").alias("pseq"),
        F.col("a").alias("cursor"),
        (F.col("base") + F.col("c")).alias("published"),
        F.col("ranges"),
        era_expression(restart_seqs).alias("era"),
    )
    messages = key_rows.where(F.col("r") == ROW_ERA).select(
        F.col("a").alias("era"),
        F.col("b").alias("offset"),
        F.lit(MESSAGE).alias("kind"),
        F.col("c").alias("end"),
        F.coalesce(F.col("d"), F.lit(-1)).alias("fd"),
        F.lit(-1).cast("long").alias("pseq"),
        F.lit(-1).cast("long").alias("q"),
    )
    effective = F.least(F.col("cursor"), F.col("published"))
    cursor_queries = located.where(effective > 0).select(
        "era",
        (effective - 1).alias("offset"),
        F.lit(PERSIST_QUERY).alias("kind"),
        F.lit(-1).cast("long").alias("end"),
        F.lit(-1).cast("long").alias("fd"),
        "pseq",
        F.col("cursor").alias("q"),
    )
    exercise_queries = located.where(F.col("published") > 0).select(
        "era",
        (F.col("published") - 1).alias("offset"),
        F.lit(PERSIST_EXERCISE).alias("kind"),
        F.lit(-1).cast("long").alias("end"),
        F.lit(-1).cast("long").alias("fd"),
        "pseq",
        F.col("cursor").alias("q"),
    )
    rows = (
        messages.unionByName(cursor_queries)
        .unionByName(exercise_queries)
        .withColumn("rng", (F.col("offset") / F.lit(plan.width)).cast("long"))
    )
    groups = max(1, -(-published // plan.width))
    arranged = rows.repartition(max(1, min(groups, 4 * parallelism)), "era", "rng").sortWithinPartitions(
        "era", "rng", "offset", "kind"
    )
    cached: list[DataFrame] = []
    if groups > 1:
        # Read twice (the summaries, then the sweep): shuffled and sorted once.
        arranged = arranged.persist(cache_level())
        cached.append(arranged)
        summaries = arranged.where(F.col("kind") == MESSAGE).mapInArrow(summary_function(window), SUMMARY_DDL).collect()
        prefixes = session.sparkContext.broadcast(prefix_summaries(summaries, window))
    else:  # one range per era: nothing lies below it
        prefixes = session.sparkContext.broadcast({})
    # Read by three of the findings (window rows, exercised skips, passed persists): swept once.
    sweep = arranged.mapInArrow(sweep_function(prefixes, window), SWEEP_DDL).persist(cache_level())
    cached.append(sweep)
    # Holes: every persisted hole must be resolved when it is persisted.
    holes = (
        located.where(F.col("ranges").isNotNull() & (F.size("ranges") > 0))
        .select("era", "pseq", "cursor", "published", F.explode("ranges").alias("hole"))
        .select(
            "era",
            "pseq",
            "cursor",
            "published",
            F.explode(F.sequence(F.col("hole")[0], F.col("hole")[1])).alias("offset"),
        )
        .where(F.col("offset") < F.col("published"))
    )
    alive = key_rows.where(F.col("r") == ROW_ERA).select(
        F.col("a").alias("era"), F.col("b").alias("offset"), F.col("c").alias("end")
    )
    # req: KS-CUR-1
    hole_anomalies = (
        holes.join(alive, ["era", "offset"])
        .where(F.col("end") > F.col("pseq"))
        .groupBy("era", "pseq", "cursor")
        .agg(F.min("offset").alias("offset"))
    )
    return sweep, hole_anomalies, cached


def members_without_room(
    session: SparkSession, key_rows: DataFrame, points: list[QuiescentPoint], permits: bool
) -> dict[int, list[tuple[str, ...]]]:
    """Per quiescent point, the filters of each member without room there: disconnected, at its capacity, or (with
    flow_control "permits") without a permit. A returned message one of them accepts is pending behind it, so it is
    stuck (KS-LIV-1), not lost (KS-MEM-1), as the Python checker's quiescence check says."""
    from pyspark.sql import functions as F

    points = [point for point in points if point.members]
    if not points:
        return {}
    queries = session.createDataFrame([(point.seq,) for point in points], "qseq long")
    intervals = key_rows.where((F.col("r") == ROW_INTERVAL) & (F.col("a") >= 0))
    open_at = F.col("c").isNull() | (F.col("c") > F.col("qseq"))
    counts: dict[tuple[int, int], tuple[int, int]] = {}
    for row in (
        intervals.join(F.broadcast(queries), F.col("b") < F.col("qseq"))
        .groupBy("qseq", "a")
        .agg(F.sum(open_at.cast("long")).alias("held"), F.count("*").alias("given"))
        .collect()
    ):
        counts[(int(row.qseq), int(row.a))] = (int(row.held), int(row.given))
    found: dict[int, list[tuple[str, ...]]] = {}
    for point in points:
        for member in point.members:
            held, given = counts.get((point.seq, member.inc_id), (0, 0))
            room = member.capacity + member.granted > given if permits else held < member.capacity
            if not member.connected or not room:
                found.setdefault(point.seq, []).append(member.filters)
    return found


def lost_held_back(frame: DataFrame, without_room: dict[int, list[tuple[str, ...]]], stuck: bool) -> DataFrame:
    """The key pass's anomaly rows (with `pub` and `last`), where a `lost` message that a member without room
    accepts becomes `stuck-key` (dropped if stuck-key does not apply): pending behind that member, not lost."""
    import json

    from ks_conformance.glob import accepts
    from pyspark.sql import functions as F

    if not without_room:
        return frame

    def convert(seq: int, key: str, offset: int, pub: int, last: int, witness: list[int], text: str | None) -> Any:
        members = without_room.get(seq)
        if not members or not any(accepts(filters, key) for filters in members):
            return ("lost", witness, text)
        if not stuck:
            return (None, witness, text)
        let, then, details = rules.liveness.stuck_key(key, offset, pub, last, seq)
        shown = sorted({s for s in (pub, last, seq) if s is not None and s >= 0})
        return ("stuck-key", shown, json.dumps({"let": let, "then": then, "details": details}))

    udf = F.udf(lambda *row: convert(*row), "name string, w array<bigint>, text string")  # no hints: a plain UDF
    lost = frame.where(F.col("name") == "lost")
    converted = (
        lost.withColumn("_c", udf("seq", "key", "offset", "pub", "last", "w", "text"))
        .withColumn("name", F.col("_c.name"))
        .withColumn("w", F.col("_c.w"))
        .withColumn("text", F.col("_c.text"))
        .drop("_c")
        .where(F.col("name").isNotNull())
    )
    return frame.where(F.col("name") != "lost").unionByName(converted)
