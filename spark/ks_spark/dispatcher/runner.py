"""The Spark-backed dispatcher: every key's engine in parallel on Spark, the rest on the driver.

`dispatch_engine` splits a run into what is global (refusals, the membership timeline, the cursor and
its persistence, read from the control ops on the driver) and what is per key. This module runs the
per-key part as a Spark job: the keys' inputs are partitioned by key and sorted by op within each
partition, and one task runs each key's `KeyEngine` over them in order. A run with restarts takes one
job per era, because what a restart reads again depends on the cursor every key moved before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ks_spark.dispatcher.engine import (
    Emitted,
    KeyEngine,
    KeyItem,
    Plan,
    Timeline,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ITEM_DDL = "key string, idx bigint, kind string, kind_order int, offset bigint, incarnation bigint, consumer string"
OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("idx", pa.int64()),
        pa.field("phase", pa.int32()),
        pa.field("grp", pa.int64()),
        pa.field("sub", pa.int64()),
        pa.field("event", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("consumer", pa.string()),
        pa.field("attempt", pa.int64()),
        pa.field("reason", pa.string()),
    ]
)
OUTPUT_DDL = (
    "key string, idx bigint, phase int, grp bigint, sub bigint, event string, offset bigint, consumer string, "
    "attempt bigint, reason string"
)
FLUSH_ROWS = 65536


def era_function(
    timeline: Timeline, profile: str, start: int, end: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow body: a partition's items sorted by (key, op, kind, offset) in, every key's events out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows: list[tuple[str, Emitted]] = []
        engine: KeyEngine | None = None
        items: list[KeyItem] = []

        def finish() -> None:
            if engine is not None:
                rows.extend((engine.key, emitted) for emitted in engine.run(items, start))

        for batch in batches:
            columns = batch.to_pydict()
            for key, index, kind, offset, incarnation, consumer in zip(
                columns["key"],
                columns["idx"],
                columns["kind"],
                columns["offset"],
                columns["incarnation"],
                columns["consumer"],
                strict=True,
            ):
                if engine is None or key != engine.key:
                    finish()
                    engine, items = KeyEngine(key, profile, timeline, end), []
                items.append(KeyItem(index, kind, offset, incarnation, consumer or ""))
            if len(rows) >= FLUSH_ROWS:
                yield _batch(rows)
                rows = []
        finish()
        yield _batch(rows)

    return run


def _batch(rows: list[tuple[str, Emitted]]) -> pa.RecordBatch:
    data: dict[str, list[Any]] = {field.name: [] for field in OUTPUT_SCHEMA}
    for key, (index, phase, group, sub, event) in rows:
        data["key"].append(key)
        data["idx"].append(index)
        data["phase"].append(phase)
        data["grp"].append(group)
        data["sub"].append(sub)
        data["event"].append(event["event"])
        data["offset"].append(event.get("offset"))
        data["consumer"].append(event.get("consumer"))
        data["attempt"].append(event.get("attempt"))
        data["reason"].append(event.get("reason"))
    return pa.RecordBatch.from_pydict(data, schema=OUTPUT_SCHEMA)


class SparkEraRunner:
    """Runs one era's key engines as a Spark job and collects their events (adapter-sized runs).

    The inputs are already on the driver (they came in a request), so they go out as one RDD partitioned
    by key, with no shuffle: a task takes whole keys and runs each one's engine over its items in order.
    """

    def __init__(
        self, session: SparkSession, partitions: int | None = None, engine: type[KeyEngine] = KeyEngine
    ) -> None:
        self.session = session
        self.partitions = partitions
        self.engine = engine
        self.jobs = 0

    def __call__(
        self, plan: Plan, start: int, end: int, items: dict[str, list[KeyItem]]
    ) -> Iterable[tuple[str, Emitted]]:
        """The era's (key, emitted) rows, in no particular order (the caller sorts within each op)."""
        if not items:
            return []
        from ks_spark.session import default_parallelism

        partitions = self.partitions or min(default_parallelism(self.session), len(items))
        groups: list[list[tuple[str, list[KeyItem]]]] = [[] for _ in range(partitions)]
        for key in sorted(items):
            groups[_partition_of(key, partitions)].append((key, items[key]))
        timeline, profile, engine_class = plan.timeline, plan.config.profile, self.engine

        def run(partition: Iterable[list[tuple[str, list[KeyItem]]]]) -> Iterator[tuple[str, Emitted]]:
            for group in partition:
                for key, key_items in group:
                    engine = engine_class(key, profile, timeline, end)
                    for emitted in engine.run(key_items, start):
                        yield key, emitted

        rows = self.session.sparkContext.parallelize(groups, partitions).mapPartitions(run).collect()
        self.jobs += 1
        return rows


def _partition_of(key: str, partitions: int) -> int:
    """A stable partition for a key (Python's str hash is salted per process)."""
    from ks_reference.hashing import murmur3_32

    return murmur3_32(key) % partitions


def _emitted(row: Any) -> Emitted:
    event: dict[str, Any] = {"event": row["event"], "offset": row["offset"], "key": row["key"]}
    for name in ("consumer", "attempt", "reason"):
        if row[name] is not None:
            event[name] = row[name]
    return (int(row["idx"]), int(row["phase"]), int(row["grp"]), int(row["sub"]), event)
