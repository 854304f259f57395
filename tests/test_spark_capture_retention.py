"""A real streaming job past Spark's checkpoint retention (spark.sql.streaming.minBatchesToRetain): still valid.

Spark purges the commit and offset logs' old entries once a query has run more batches than it keeps (100 by
default, the user's setting otherwise). The capture reads the commit log at every batch; the trace builder must
take a purged entry for what it is (an old batch, still committed), not for a deleted checkpoint. A small
retention (2) makes four batches enough; a restart on a new checkpoint must still be caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_support import spark_fixture, spark_missing  # noqa: F401  (spark_fixture: `spark`)

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing())),
]

RETAIN, FILES, RECORDS, KEYS = 2, 4, 24, 4
RETENTION = "spark.sql.streaming.minBatchesToRetain"


@pytest.fixture(name="retaining")
def retaining_fixture(spark: Any) -> Iterator[Any]:
    """The shared session with a small commit-log retention, restored afterwards."""
    previous = spark.conf.get(RETENTION, None)
    spark.conf.set(RETENTION, str(RETAIN))
    try:
        yield spark
    finally:
        if previous is None:
            spark.conf.unset(RETENTION)
        else:
            spark.conf.set(RETENTION, previous)


def _run(spark: Any, tmp: Path, checkpoint: str) -> int:
    from ks_spark.capture.examples import keyed_totals
    from ks_spark.capture.watch import run_under_capture

    options = {"log": str(tmp / "log"), "out": str(tmp / "out")}
    return run_under_capture(spark, keyed_totals, tmp / "capture", checkpoint, options).batches


def _judge(tmp: Path) -> tuple[str, dict[str, int], list[dict[str, Any]]]:
    from ks_conformance.tracefile import check_trace
    from ks_spark.capture.streamtrace import write
    from ks_spec.trace import load_trace

    write(tmp / "capture", tmp / "trace.jsonl")
    result = check_trace(tmp / "trace.jsonl")
    counts: dict[str, int] = {}
    for anomaly in result.anomalies:
        counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
    return result.verdict.value, counts, load_trace(tmp / "trace.jsonl")


def _first_run_past_retention(spark: Any, tmp: Path) -> None:
    """The correct job over FILES one-file batches, its commit log purged down to the last RETAIN entries."""
    from ks_spark.capture.examples.keyed_totals import write_log
    from ks_spark.capture.recorder import committed_batches

    write_log(tmp / "log", RECORDS, KEYS, FILES)
    checkpoint = str(tmp / "checkpoint")
    assert _run(spark, tmp, checkpoint) == FILES
    kept = committed_batches(checkpoint)
    assert kept[-1] == FILES - 1 and kept[0] > 0, kept  # Spark purged the oldest commits: the case under test


def test_a_correct_job_past_the_commit_log_retention_is_valid(retaining: Any, tmp_path: Path) -> None:
    _first_run_past_retention(retaining, tmp_path)
    verdict, counts, events = _judge(tmp_path)
    assert (verdict, counts) == ("valid", {})
    persisted = [e["cursor"] for e in events if e["event"] == "cursor_persisted"]
    assert persisted == sorted(persisted) and persisted[-1] == RECORDS


@pytest.mark.slow
def test_a_restart_on_a_new_checkpoint_past_the_retention_is_still_caught(retaining: Any, tmp_path: Path) -> None:
    """The same query restarted on a new checkpoint starts over from the first file (fast twin: the hand-written
    capture of tests/test_spark_stream_trace.py)."""
    _first_run_past_retention(retaining, tmp_path)
    assert _run(retaining, tmp_path, str(tmp_path / "checkpoint-2")) == FILES
    verdict, counts, _ = _judge(tmp_path)
    assert verdict == "invalid"
    assert "cursor-regress" in counts and "resurrected" in counts, counts
