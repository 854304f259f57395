"""Example pipeline: running per-account totals over a keyed log, a Structured Streaming query with per-key state.

The log is a folder of JSON-lines files (`write_log`), one micro-batch per file: `offset` (dense), `key`
(the account), `device`, `arrival` (when the record reached the log's writer: close to, but not, offset
order) and `amount`. Per key, `applyInPandasWithState` keeps the running total and emits one row per
record (offset, key, total) in offset order; a foreachBatch sink writes each batch's rows to
`out/batch=N` with overwrite, so a replayed batch replaces its first attempt (idempotent).

`variant` selects a mistake users really make, each caught by the judge (spec/streaming.md, section 5):
`wrong-key` keeps the state per device instead of per account, `append-sink` appends every batch to the
output (a replay applies it twice), `arrival-order` sorts a key's records by arrival instead of offset,
`swallow-write` swallows a failed write of batch 1 and returns (the batch commits, its output is lost).
(Deleting the checkpoint before a restart is done from outside: see tests/test_spark_stream.py.)

Run it with `keyshared watch-stream ks_spark.capture.examples.keyed_totals --set log=LOG --set out=OUT ...`;
options: `log`, `out`, `variant` (default `correct`), and, to make a kill land in the middle of a batch,
`signal` (a folder where `applied-N` appears once batch N's output is written) with `pause_batch` and
`pause_seconds` (the sink waits that long after writing batch `pause_batch`, before the batch commits).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ks_spark.capture.examples.common import (
    after_write,
    log_out_and_variant,
    probe_output,
    start_sink,
    swallowed_write,
    write_json_files,
)

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from ks_spark.capture.recorder import Capture

SCHEMA = "offset long, key string, device string, arrival long, amount long"
OUTPUT = "offset long, key string, total long"
STATE = "total long"
VARIANTS = ("correct", "wrong-key", "append-sink", "arrival-order", "swallow-write")
LOST_BATCH = 1
"""The batch the `swallow-write` variant loses."""
DEVICES_PER_KEY = 3
EXAMPLE = "keyed_totals"


def write_log(folder: Path, records: int, keys: int, files: int, seed: int = 1) -> None:
    """Write `records` keyed records in `files` JSON-lines files, oldest first (the file source reads by age)."""
    import random

    rng = random.Random(seed)

    def record(offset: int) -> dict[str, Any]:
        key = rng.randrange(keys)
        return {
            "offset": offset,
            "key": f"acct-{key:04d}",
            "device": f"dev-{key:04d}-{rng.randrange(DEVICES_PER_KEY)}",
            "arrival": offset + rng.randrange(4 * keys),
            "amount": rng.randrange(1, 100),
        }

    write_json_files(folder, records, files, record)


def start(spark: SparkSession, capture: Capture, options: Mapping[str, str]) -> StreamingQuery:
    """Build and start the query, with the capture's three calls; the checkpoint is the capture's."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    log, out, variant = log_out_and_variant(options, VARIANTS, EXAMPLE)
    signal = options.get("signal")
    pause_batch = int(options.get("pause_batch", "-1"))
    pause_seconds = float(options.get("pause_seconds", "0"))
    group = "device" if variant == "wrong-key" else "key"
    order = "arrival" if variant == "arrival-order" else "offset"

    def totals(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        import pandas as pd

        frame = pd.concat(list(frames)).sort_values(order, kind="stable")
        previous = int(state.get[0]) if state.exists else 0
        running = previous + frame["amount"].cumsum()
        state.update((int(running.iloc[-1]),))
        yield pd.DataFrame({"offset": frame["offset"], "key": frame["key"], "total": running})

    def write(frame: DataFrame, batch_id: int) -> None:
        target = os.path.join(out, f"batch={batch_id}")
        if variant == "append-sink":
            frame.write.mode("append").parquet(out)
        elif variant == "swallow-write" and batch_id == LOST_BATCH:
            swallowed_write(frame, target, "total", "disk full")
        else:
            frame.write.mode("overwrite").parquet(target)
        after_write(batch_id, signal, pause_batch, pause_seconds)

    records = capture.source(spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(log))
    results = records.groupBy(group).applyInPandasWithState(
        capture.per_key(totals), OUTPUT, STATE, "append", GroupStateTimeout.NoTimeout
    )
    return start_sink(results, capture, write)


def probe(spark: SparkSession, options: Mapping[str, str]) -> dict[int, int]:
    """How many times the output holds each offset's row (more than once: a replay applied a batch again)."""
    return probe_output(spark, options, OUTPUT, EXAMPLE)
