"""What the example query modules share: their log files, their `--set` options, their sink's test hooks and probe."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ks_spec.errors import UserError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from ks_spark.capture.recorder import Capture


def write_json_files(folder: Path, records: int, files: int, record_of: Callable[[int], dict[str, Any]]) -> None:
    """Write records 0 .. `records`-1 (`record_of(offset)`) in `files` JSON-lines files, each written whole and dated
    a second after the previous one (the file source reads files by age: one micro-batch per file)."""
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-records // files)
    now = time.time() - files
    for index in range(files):
        offsets = range(index * per_file, min(records, (index + 1) * per_file))
        lines = [json.dumps(record_of(offset)) for offset in offsets]
        path = folder / f"part-{index:05d}.jsonl"
        temporary = folder / f".part-{index:05d}.tmp"
        temporary.write_text("\n".join(lines) + "\n")
        os.replace(temporary, path)
        os.utime(path, (now + index, now + index))


def required_option(options: Mapping[str, str], name: str, example: str) -> str:
    """The value of `--set NAME=...`, or a one-line usage error naming the example that needs it."""
    value = options.get(name)
    if not value:
        raise UserError(f"--set {name}=...: the {example} example needs it", exit_code=64)
    return value


def number_option(options: Mapping[str, str], name: str, default: str) -> float:
    """The number `--set NAME=...` (or `default`), or a one-line error saying it is not one."""
    text = options.get(name, default)
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--set {name}={text}: not a number", exit_code=64) from None


def log_out_and_variant(options: Mapping[str, str], variants: tuple[str, ...], example: str) -> tuple[str, str, str]:
    """The `log` folder (which must exist), the `out` folder and the `variant` (one of `variants`) of a run."""
    log, out = required_option(options, "log", example), required_option(options, "out", example)
    variant = options.get("variant", "correct")
    if variant not in variants:
        raise UserError(f"--set variant={variant}: one of {', '.join(variants)}", exit_code=64)
    if not Path(log).is_dir():
        raise UserError(f"--set log={log}: no such folder", exit_code=66)
    return log, out, variant


def after_write(batch_id: int, signal: str | None, pause_batch: int, pause_seconds: float) -> None:
    """The sink's hooks for a kill from outside: mark batch `batch_id` applied in the `signal` folder, and wait
    `pause_seconds` after writing `pause_batch` (before the batch commits)."""
    if signal:
        Path(signal).mkdir(parents=True, exist_ok=True)
        (Path(signal) / f"applied-{batch_id}").touch()
    if batch_id == pause_batch:
        time.sleep(pause_seconds)


def start_sink(results: DataFrame, capture: Capture, write: Callable[[DataFrame, int], None]) -> StreamingQuery:
    """Start `results` into the foreachBatch sink `write` under the capture, checkpointed where the capture says."""
    writer = results.writeStream.foreachBatch(capture.sink(write)).outputMode("append")
    if capture.checkpoint is not None:
        writer = writer.option("checkpointLocation", capture.checkpoint)
    query: StreamingQuery = writer.start()
    return query


def swallowed_write(frame: DataFrame, target: str, column: str, failure: str) -> None:
    """The `swallow-write` variants' sink for one batch: the batch is computed and counted (its records read and
    processed, its state committed), then the write fails (`failure`, as a full disk or a store that refused it
    would) and the error is caught and dropped, so the batch commits without its output. (A sink that returns
    without computing the batch at all is refused by Spark itself for a stateful query: its state stores did not
    commit.)"""
    from pyspark.sql import functions

    frame.persist()
    try:
        frame.count()
        failing = frame.withColumn(column, functions.raise_error(functions.lit(failure)))
        failing.write.mode("overwrite").parquet(target)
    except Exception:  # the mistake: a failed write logged nowhere and not raised
        return
    finally:
        frame.unpersist()


def probe_output(spark: SparkSession, options: Mapping[str, str], schema: str, example: str) -> dict[int, int]:
    """How many times the example's output (`--set out=...`, Parquet of `schema`) holds each offset's row."""
    from ks_spark.capture.recorder import probe_counts

    out = required_option(options, "out", example)
    if not Path(out).exists():
        return {}
    return probe_counts(spark.read.schema(schema).parquet(out))
