"""Replaying a log (WAL) through the Spark dispatcher, at any size, into a trace in the spec's format.

Input: the log (offset, key and anything else, Parquet or JSON lines), the consumer set over time
(joins and leaves at log positions), the selector and profile, how long consumers take to ack, and
optional crashes. Each consumer acks each delivery `lag` publishes after receiving it. Output: the
whole run as a trace (Parquet folder), which `validate-replay` and `check-trace` judge, and a summary.

Nothing grows on the driver with the log: the control ops (joins, leaves, crashes) are planned there,
the keys' engines run in tasks over the log partitioned by key, the cursor is a running maximum over
offsets computed block by block, and the trace gets its sequence numbers from per-partition counts.
Each crash starts a new era (one pass over the log), because what a restart reads again depends on the
cursor that every key moved before it.

Long because planning, running and numbering a replay at any size are one pipeline whose stages hand Spark
DataFrames to each other.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from ks_reference.config import Config
from ks_spec.errors import UserError

from ks_spark.dispatcher.engine import (
    MINOR_BITS,
    PHASE_PERSIST,
    KeyItem,
    LaggedAckEngine,
    Plan,
    Timeline,
    plan_ops,
    position,
)
from ks_spark.dispatcher.runner import OUTPUT_DDL, _batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

UNBOUNDED_CAPACITY = 1_000_000_000
"""Every consumer's capacity: flow control never binds in a replay (the dispatcher's declared limit)."""
END = 1 << 62
"""A position after every other: the end of the last era and the final `quiescent` point."""
PHASE_OP = -1
"""Op events (publish, joins, restarts) come before the effects of their op."""
CURSOR_BLOCK = 1 << 20
"""Offsets per block of the cursor's running maximum (one task per block, a few maxima on the driver)."""
Stage = Callable[[str], None]


@dataclass(frozen=True)
class ControlOp:
    """A join, leave or crash that happens just before the log's offset `at` is published."""

    at: int
    op: dict[str, Any]


@dataclass
class LogReplay:
    """What to replay and how."""

    log: str
    profile: str = "owner"
    selector: str = "ring"
    points: int = 100
    lag: int = 1
    controls: list[ControlOp] = field(default_factory=list)
    crashes: list[int] = field(default_factory=list)

    def config(self, length: int) -> Config:
        """The subscription's configuration: persistence at every change, a window that never binds."""
        return Config.parse(
            {
                "profile": self.profile,
                "selector": self.selector,
                "points": self.points,
                "window": max(10_000, length + 1),
                "persist_interval": 0,
                "evict_after": 0,
            }
        )


@dataclass
class ReplaySummary:
    """What the replay did, for the summary table and the benchmark."""

    messages: int = 0
    events: int = 0
    deliveries: int = 0
    redeliveries: int = 0
    duplicates: int = 0
    """Deliveries of a message that had been delivered before a crash (at-least-once, KS-CUR-3)."""
    acks: int = 0
    filtered: int = 0
    cursor: int = 0
    eras: int = 0
    per_consumer: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def read_log(session: SparkSession, path: str) -> DataFrame:
    """The log as (offset bigint, key string), checked: the columns exist and offsets are 0, 1, 2, ... n-1."""
    from pyspark.sql import functions as F

    location = Path(path)
    if "://" not in path and not location.exists():
        raise UserError(f"{path}: no such log file or folder", exit_code=66)
    reader = session.read
    if path.endswith(".jsonl") or path.endswith(".json"):
        frame = reader.schema("offset bigint, key string").json(path)
    else:
        frame = reader.parquet(path)
    missing = [name for name in ("offset", "key") if name not in frame.columns]
    if missing:
        raise UserError(f"{path}: the log has no column {missing[0]!r} (it needs offset and key)", exit_code=65)
    frame = frame.select(F.col("offset").cast("bigint").alias("offset"), F.col("key").cast("string").alias("key"))
    stats = frame.agg(
        F.count(F.lit(1)).alias("rows"),
        F.min("offset").alias("low"),
        F.max("offset").alias("high"),
        F.count_distinct("offset").alias("distinct"),
        F.sum(F.when(F.col("key").isNull() | F.col("offset").isNull(), 1).otherwise(0)).alias("nulls"),
    ).first()
    assert stats is not None
    rows = int(stats["rows"])
    if rows == 0:
        raise UserError(f"{path}: the log is empty", exit_code=65)
    if int(stats["nulls"] or 0):
        raise UserError(f"{path}: {stats['nulls']} rows have a null offset or key", exit_code=65)
    if int(stats["low"]) != 0 or int(stats["high"]) != rows - 1 or int(stats["distinct"]) != rows:
        raise UserError(
            f"{path}: offsets must be 0, 1, ..., n-1 with no gap or repeat; found {rows} rows, "
            f"{stats['distinct']} distinct offsets from {stats['low']} to {stats['high']}",
            exit_code=65,
        )
    return frame


def read_controls(path: Path) -> list[ControlOp]:
    """A membership file: JSON lines `{"at": OFFSET, "op": "add_consumer"|"remove_consumer", "consumer": ...}`."""
    if not path.is_file():
        raise UserError(f"{path}: no such membership file", exit_code=66)
    found: list[ControlOp] = []
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            where = f"{path}:{number}"
            try:
                line = json.loads(text)
            except json.JSONDecodeError as error:
                raise UserError(f"{where}: field '(line)': not valid JSON ({error.msg})", exit_code=65) from None
            if not isinstance(line, dict):
                raise UserError(f"{where}: field '(line)': expected an object", exit_code=65)
            at = line.get("at")
            if not isinstance(at, int) or isinstance(at, bool) or at < 0:
                raise UserError(f"{where}: field 'at': expected an offset (an integer >= 0), got {at!r}", exit_code=65)
            if line.get("op") not in ("add_consumer", "remove_consumer"):
                raise UserError(f"{where}: field 'op': expected add_consumer or remove_consumer", exit_code=65)
            if not isinstance(line.get("consumer"), str) or not line["consumer"]:
                raise UserError(f"{where}: field 'consumer': expected a non-empty name", exit_code=65)
            filters = line.get("filters", [])
            if not isinstance(filters, list) or not all(isinstance(f, str) for f in filters):
                raise UserError(f"{where}: field 'filters': expected a list of glob patterns", exit_code=65)
            op: dict[str, Any] = {"op": line["op"], "consumer": line["consumer"]}
            if line["op"] == "add_consumer":
                op.update(capacity=UNBOUNDED_CAPACITY, filters=filters)
            found.append(ControlOp(at, op))
    return found


@dataclass
class ControlPlan:
    """The control ops in order, each at its position among the publishes, and the timeline they make."""

    ops: list[dict[str, Any]]
    positions: list[int]
    ats: list[int]
    plan: Plan

    def publish_position(self, offset: int) -> int:
        """Where the publish of `offset` falls: after every control op at or before it."""
        return position(offset + bisect.bisect_right(self.ats, offset))


def plan_controls(replay: LogReplay, config: Config, length: int) -> ControlPlan:
    """Order joins, leaves and crashes (after a crash, the members rejoin in their order) and plan them."""
    events: list[tuple[int, int, dict[str, Any]]] = []
    for order, control in enumerate(replay.controls):
        if control.at > length:
            raise UserError(f"membership: 'at' {control.at} is past the end of the log ({length} messages)", 65)
        events.append((control.at, order, control.op))
    for crash in replay.crashes:
        if not 0 < crash <= length:
            raise UserError(f"--crash-at {crash}: must be an offset between 1 and {length}", exit_code=64)
        events.append((crash, len(replay.controls) + 1, {"op": "restart"}))
    events.sort(key=lambda event: (event[0], event[1]))
    ops: list[dict[str, Any]] = []
    ats: list[int] = []
    members: list[dict[str, Any]] = []
    for at, _, op in events:
        batch = [op]
        if op["op"] == "restart":
            batch += [dict(member) for member in members]  # the consumers reconnect after the crash
        elif op["op"] == "add_consumer":
            members.append(op)
        else:
            members = [m for m in members if m["consumer"] != op["consumer"]]
        for item in batch:
            ops.append(item)
            ats.append(at)
    positions = [position(at + number) for number, at in enumerate(ats)]
    plan = plan_ops(config, ops, positions)
    refused = sorted(plan.responses)
    if refused:
        first = refused[0]
        problem = plan.responses[first].get("error", {}).get("message", "refused")
        raise UserError(f"membership: {ops[first]['op']} {ops[first].get('consumer', '')} at {ats[first]}: {problem}")
    return ControlPlan(ops, positions, ats, plan)


def replay_log(
    session: SparkSession, replay: LogReplay, out: str, stage: Stage | None = None, partitions: int | None = None
) -> ReplaySummary:
    """Replay the log into a trace at `out` (a Parquet folder); the summary of what happened."""
    import time

    from pyspark.sql import functions as F

    from ks_spark.session import cache_level, default_parallelism

    say = stage or (lambda text: None)
    started = time.perf_counter()
    say("reading the log")
    log = read_log(session, replay.log)
    length = int(log.count())
    config = replay.config(length)
    controls = plan_controls(replay, config, length)
    parts = partitions or max(2, default_parallelism(session) * 2)
    ats = controls.ats

    before = F.lit(0).cast("bigint")
    for at in ats:  # the control ops before each publish (few: joins, leaves, crashes)
        before = before + F.when(F.col("offset") >= at, 1).otherwise(0)
    publish_position = F.shiftleft(F.col("offset") + before, MINOR_BITS)
    log = log.withColumn("pos", publish_position).persist(cache_level())
    bounds = [0, *controls.plan.restarts, END]
    durable = 0
    effects: list[DataFrame] = []
    cursor_events: list[DataFrame] = []
    summary = ReplaySummary(messages=length, eras=len(bounds) - 1)
    for era, (start, end) in enumerate(itertools.pairwise(bounds)):
        say(f"era {era + 1} of {len(bounds) - 1}: dispatching every key")
        published = log.where((F.col("pos") >= start) & (F.col("pos") < end)).select(
            "key", F.col("pos").alias("idx"), F.lit("publish").alias("kind"), F.lit(1).alias("kind_order"), "offset"
        )
        if start > 0:
            reread = log.where((F.col("offset") >= durable) & (F.col("pos") < start)).select(
                "key", F.lit(start).cast("bigint").alias("idx"), F.lit("reread").alias("kind"),
                F.lit(0).alias("kind_order"), "offset",
            )  # fmt: skip
            published = reread.unionByName(published)
        items = (
            published.withColumn("incarnation", F.lit(-1).cast("bigint"))
            .withColumn("consumer", F.lit(None).cast("string"))
            .repartition(parts, "key")
            .sortWithinPartitions("key", "idx", "kind_order", "offset")
        )
        body = _log_era_function(controls.plan.timeline, config.profile, replay.lag, start, end)
        emitted = items.mapInArrow(body, OUTPUT_DDL).persist(cache_level())
        effects.append(emitted)
        say(f"era {era + 1}: the cursor")
        persisted, durable = _cursor(session, log, emitted, durable, start, end)
        cursor_events.append(persisted)
    say("writing the trace")
    summary.events = _write_trace(session, out, config, controls, log, effects, cursor_events, parts)
    say("summarising")
    _summarise(summary, effects, cursor_events)
    summary.seconds = time.perf_counter() - started
    log.unpersist()
    for frame in effects:
        frame.unpersist()
    return summary


def _log_era_function(
    timeline: Timeline, profile: str, lag: int, start: int, end: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow body of a log replay: each key's publishes (and rereads) in, its events and acks out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows: list[Any] = []
        engine: LaggedAckEngine | None = None
        items: list[KeyItem] = []

        def finish() -> None:
            if engine is not None:
                rows.extend((engine.key, emitted) for emitted in engine.run(items, start))

        for batch in batches:
            columns = batch.to_pydict()
            for key, index, kind, offset in zip(
                columns["key"], columns["idx"], columns["kind"], columns["offset"], strict=True
            ):
                if engine is None or key != engine.key:
                    finish()
                    engine, items = LaggedAckEngine(key, profile, timeline, end, lag=lag), []
                items.append(KeyItem(index, kind, offset))
            if len(rows) >= 65536:
                yield _batch(rows)
                rows = []
        finish()
        yield _batch(rows)

    return run


def _cursor(
    session: SparkSession, log: DataFrame, emitted: DataFrame, durable: int, start: int, end: int
) -> tuple[DataFrame, int]:
    """The era's `cursor_persisted` events and the persisted cursor at its end (KS-CUR-1, KS-CUR-5).

    r(o) is the position where offset o was resolved; the cursor after position p is the first offset whose
    running maximum R(o) = max(r(o') for o' <= o) exceeds p. So each distinct finite R is one persistence,
    of the cursor one past the last offset with that R. The running maximum is taken per block of offsets,
    each block starting from the maximum of the blocks before it (a few numbers on the driver).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    resolved = emitted.where(F.col("event").isin("ack", "filter")).select("offset", F.col("idx").alias("r"))
    infinite = F.lit(END).cast("bigint")
    offsets = (
        log.where((F.col("offset") >= durable) & (F.col("pos") < end))
        .select("offset")
        .join(resolved, "offset", "left")
        .select("offset", F.coalesce("r", infinite).alias("r"))
        .withColumn("block", F.floor(F.col("offset") / CURSOR_BLOCK).cast("bigint"))
    )
    maxima = {int(row["block"]): int(row["m"]) for row in offsets.groupBy("block").agg(F.max("r").alias("m")).collect()}
    carried: dict[int, int] = {}
    running = -1
    for block in sorted(maxima):
        carried[block] = running
        running = max(running, maxima[block])
    carry = session.createDataFrame(sorted(carried.items()), "block bigint, before bigint")
    ordered = Window.partitionBy("block").orderBy("offset").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prefix = offsets.join(F.broadcast(carry), "block").select(
        "offset", F.greatest(F.max("r").over(ordered), F.col("before")).alias("R")
    )
    persisted = (
        prefix.where(F.col("R") < infinite)
        .groupBy("R")
        .agg((F.max("offset") + 1).alias("cursor"))
        .select(F.col("R").alias("idx"), "cursor")
        .persist()
    )
    before_end = persisted.where(F.col("idx") < end).agg(F.max("cursor").alias("c")).first()
    last = before_end["c"] if before_end is not None else None
    return persisted, durable if last is None else max(durable, int(last))


def _write_trace(
    session: SparkSession,
    out: str,
    config: Config,
    controls: ControlPlan,
    log: DataFrame,
    effects: list[DataFrame],
    cursor_events: list[DataFrame],
    parts: int,
) -> int:
    """Every event in order, numbered, in the trace format's columns, as a Parquet folder; the event count."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from ks_spark.schema import spark_schema

    schema: StructType = spark_schema()
    detail = json.dumps(
        {"trace_version": 1, "config": config.as_dict(), "implementation": {"name": "keyshared-spark-dispatcher"}},
        sort_keys=True,
    )
    head: list[dict[str, Any]] = [
        {"pos": -1, "phase": PHASE_OP, "grp": 0, "sub": 0, "event": "config", "detail": detail}
    ]
    for number, (op, pos) in enumerate(zip(controls.ops, controls.positions, strict=True)):
        row: dict[str, Any] = {"pos": pos, "phase": PHASE_OP, "grp": 0, "sub": number}
        if op["op"] == "add_consumer":
            row.update(event="consumer_added", consumer=op["consumer"], capacity=op["capacity"], filters=op["filters"])
        elif op["op"] == "remove_consumer":
            row.update(event="consumer_removed", consumer=op["consumer"])
        else:
            row.update(event="restart")
        head.append(row)
    head.append({"pos": END, "phase": PHASE_OP, "grp": 0, "sub": 0, "event": "quiescent"})
    trace_columns = [f"{f.name} {f.dataType.simpleString()}" for f in schema.fields if f.name not in ("seq", "tick")]
    frame_schema = ", ".join(["pos bigint, phase int, grp bigint, sub bigint", *trace_columns])
    fixed = session.createDataFrame([_fill(row, schema) for row in head], frame_schema)
    parts_list = [fixed]
    parts_list.append(
        log.select(
            F.col("pos"), F.lit(PHASE_OP).alias("phase"), F.lit(0).cast("bigint").alias("grp"),
            F.lit(0).cast("bigint").alias("sub"), F.lit("publish").alias("event"), "offset", "key",
        )
    )  # fmt: skip
    for frame in effects:
        parts_list.append(
            frame.select(
                F.col("idx").alias("pos"),
                "phase",
                "grp",
                "sub",
                "event",
                "offset",
                "key",
                "consumer",
                "attempt",
                "reason",
            )
        )
    for frame in cursor_events:
        parts_list.append(
            frame.select(
                F.col("idx").alias("pos"), F.lit(PHASE_PERSIST).alias("phase"), F.lit(0).cast("bigint").alias("grp"),
                F.lit(0).cast("bigint").alias("sub"), F.lit("cursor_persisted").alias("event"), "cursor",
            )
        )  # fmt: skip
    events = parts_list[0]
    for frame in parts_list[1:]:
        events = events.unionByName(frame, allowMissingColumns=True)
    ordered = events.repartitionByRange(parts, "pos", "phase", "grp", "sub").sortWithinPartitions(
        "pos", "phase", "grp", "sub"
    )
    ordered = ordered.withColumn("_part", F.spark_partition_id()).persist()
    counts = {
        int(r["_part"]): int(r["n"]) for r in ordered.groupBy("_part").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    starts: dict[int, int] = {}
    total = 0
    for part in sorted(counts):
        starts[part] = total
        total += counts[part]
    first = session.createDataFrame(sorted(starts.items()), "_part int, _first bigint")
    within = F.monotonically_increasing_id() - (F.col("_part").cast("bigint") * (1 << 33))
    numbered = (
        ordered.withColumn("_row", within)
        .join(F.broadcast(first), "_part")
        .withColumn("seq", F.col("_first") + F.col("_row"))
    )
    columns = [F.col("seq").cast("bigint").alias("seq"), F.lit(0).cast("bigint").alias("tick")]
    columns += [F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields if f.name not in ("seq", "tick")]
    numbered.select(*columns).sortWithinPartitions("seq").write.mode("overwrite").parquet(out)
    ordered.unpersist()
    return total


def _fill(row: dict[str, Any], schema: Any) -> tuple[Any, ...]:
    values = [row["pos"], row["phase"], row["grp"], row["sub"]]
    values += [row.get(f.name) for f in schema.fields if f.name not in ("seq", "tick")]
    return tuple(values)


def _summarise(summary: ReplaySummary, effects: list[DataFrame], cursor_events: list[DataFrame]) -> None:
    from pyspark.sql import functions as F

    for frame in effects:
        for row in (
            frame.groupBy("event", "consumer")
            .agg(F.count(F.lit(1)).alias("n"), F.sum(F.when(F.col("attempt") > 1, 1).otherwise(0)).alias("again"))
            .collect()
        ):
            count = int(row["n"])
            if row["event"] == "deliver":
                summary.deliveries += count
                summary.redeliveries += int(row["again"] or 0)
                summary.per_consumer[row["consumer"]] = summary.per_consumer.get(row["consumer"], 0) + count
            elif row["event"] == "ack":
                summary.acks += count
            elif row["event"] == "filter":
                summary.filtered += count
    deliveries = effects[0].where(F.col("event") == "deliver").select("offset")
    for frame in effects[1:]:
        deliveries = deliveries.unionByName(frame.where(F.col("event") == "deliver").select("offset"))
    distinct = deliveries.agg(F.count_distinct("offset").alias("n")).first()
    summary.duplicates = summary.deliveries - summary.redeliveries - (int(distinct["n"]) if distinct else 0)
    for frame in cursor_events:
        found = frame.agg(F.max("cursor").alias("c")).first()
        if found is not None and found["c"] is not None:
            summary.cursor = max(summary.cursor, int(found["c"]))


def control_ops_from(consumers: Sequence[str]) -> list[ControlOp]:
    """`--consumers a,b,c`: each joins before the first message, accepting every key."""
    return [
        ControlOp(0, {"op": "add_consumer", "consumer": name, "capacity": UNBOUNDED_CAPACITY, "filters": []})
        for name in consumers
    ]
