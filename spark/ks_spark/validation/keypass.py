"""The per-key pass as a Spark job: partition the key events by key, sort by seq, run `keystate` on each task.

Only what `keystate` emits leaves the tasks: anomalies, delivery intervals, per-era message rows and
counters. The trace itself is never collected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ks_spark.validation.keystate import (
    KEY_EVENTS,
    ROW_ANOMALY,
    ROW_CONTRADICTION,
    ROW_ERA,
    ROW_EXERCISED,
    ROW_INTERVAL,
    ROW_RETURN,
    Context,
    KeyStream,
    Row,
)

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame

KEY_COLUMNS = ("key", "seq", "event", "offset", "consumer", "reason", "segment")

OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("r", pa.int32()),
        pa.field("name", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("w", pa.list_(pa.int64())),
        pa.field("key", pa.string()),
        pa.field("a", pa.int64()),
        pa.field("b", pa.int64()),
        pa.field("c", pa.int64()),
        pa.field("d", pa.int64()),
        pa.field("consumer", pa.string()),
        pa.field("other", pa.string()),
        pa.field("text", pa.string()),
    ]
)
OUTPUT_DDL = (
    "r int, name string, seq bigint, w array<bigint>, key string, a bigint, b bigint, c bigint, d bigint, "
    "consumer string, other string, text string"
)
FLUSH_ROWS = 65536


class _Collector:
    """Buffers the rows `keystate` emits and turns them into Arrow batches of OUTPUT_SCHEMA."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def emit(self, row: Row) -> None:
        self.rows.append(row)

    def batch(self) -> pa.RecordBatch:
        rows = self.rows
        count = len(rows)
        r: list[Any] = [row[0] for row in rows]
        name: list[Any] = [None] * count
        seq: list[Any] = [None] * count
        w: list[Any] = [None] * count
        key: list[Any] = [None] * count
        a: list[Any] = [None] * count
        b: list[Any] = [None] * count
        c: list[Any] = [None] * count
        d: list[Any] = [None] * count
        consumer: list[Any] = [None] * count
        text: list[Any] = [None] * count
        # Column by column per row kind: this runs for every delivery and message, so no dict per row.
        for index, row in enumerate(rows):
            kind = row[0]
            if kind == ROW_ERA:
                _, a[index], b[index], c[index], d[index], seq[index], key[index] = row
            elif kind == ROW_INTERVAL:
                _, a[index], b[index], c[index], consumer[index], d[index] = row
            elif kind == ROW_ANOMALY:
                _, name[index], seq[index], w[index], key[index], a[index], text[index], b[index], c[index] = row
            elif kind == ROW_EXERCISED:
                _, name[index], a[index] = row
            elif kind == ROW_CONTRADICTION:
                _, seq[index], text[index] = row
            elif kind == ROW_RETURN:
                seq[index] = row[1]
            else:  # pragma: no cover - keystate emits only the kinds above
                raise AssertionError(f"unknown row kind {kind}")
        self.rows = []
        other: list[Any] = [None] * count
        columns = [r, name, seq, w, key, a, b, c, d, consumer, other, text]
        return pa.RecordBatch.from_arrays(
            [pa.array(column, type=f.type) for column, f in zip(columns, OUTPUT_SCHEMA, strict=True)],
            schema=OUTPUT_SCHEMA,
        )


def key_pass_function(context: Broadcast[Context]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow body: rows sorted by (key, seq) in, keystate's rows out, flushed between keys."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = context.value
        collector = _Collector()
        exercised: dict[str, int] = {}
        stream = KeyStream(ctx, collector.emit, exercised)
        for batch in batches:
            columns = [batch.column(i).to_pylist() for i in range(len(KEY_COLUMNS))]
            stream.feed(zip(*columns, strict=True))
            if len(collector.rows) >= FLUSH_ROWS:
                yield collector.batch()
        stream.close()
        for name, count in sorted(exercised.items()):
            collector.emit((ROW_EXERCISED, name, count))
        yield collector.batch()

    return run


def key_events(events: DataFrame, partitions: int) -> DataFrame:
    """The events the per-key pass reads, one partition per group of keys, sorted by (key, seq)."""
    from pyspark.sql import functions as F

    return (
        events.where(F.col("event").isin(*KEY_EVENTS) & F.col("key").isNotNull())
        .select(*KEY_COLUMNS)
        .repartition(partitions, "key")
        .sortWithinPartitions("key", "seq")
    )


def run_key_pass(events: DataFrame, context: Broadcast[Context], partitions: int) -> DataFrame:
    """The per-key pass's output rows (see OUTPUT_SCHEMA and keystate's ROW_* kinds)."""
    return key_events(events, partitions).mapInArrow(key_pass_function(context), OUTPUT_DDL)
