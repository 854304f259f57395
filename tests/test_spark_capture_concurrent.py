"""The same query started twice at once on one capture and checkpoint (two `watch-stream` processes). Spark fails
one: at its start (SparkConcurrentModificationException: the trace is the other run's, valid), or after both
processed batch 0 (CONCURRENT_STREAM_LOG_UPDATE at the commit, or the two sinks' writes colliding: the trace
shows batch 0 twice, `duplicate`); which one is a race. Either way the capture names the two runs as concurrent,
not only as a restart."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from spark_support import spark_missing, watch_stream_command

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing())),
]

FILES, RECORDS, KEYS = 8, 48, 4


def test_two_starts_of_one_query_at_once_are_named_concurrent_and_the_run_that_worked_is_valid(
    tmp_path: Path,
) -> None:
    from ks_conformance.tracefile import check_trace
    from ks_spark.capture.examples.keyed_totals import write_log
    from ks_spark.capture.streamtrace import write

    write_log(tmp_path / "log", RECORDS, KEYS, FILES)
    command = watch_stream_command(tmp_path, "correct", 2, [])
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outcomes = sorted((child.wait(timeout=600), child.communicate()[1]) for child in (first, second))
    assert [code for code, _ in outcomes] == [0, 70], outcomes
    assert outcomes[1][1].splitlines()[-1].startswith("keyshared: error: "), outcomes[1][1][-2000:]  # (varies: a race)
    summary = write(tmp_path / "capture", tmp_path / "trace.jsonl")
    assert summary.runs == 2 and len(summary.concurrent) == 1, summary.concurrent
    assert "of one query ran at the same time" in summary.concurrent[0]
    result = check_trace(tmp_path / "trace.jsonl")
    names = {anomaly.name for anomaly in result.anomalies}
    refused_late = summary.batches > FILES  # the failed run processed batch 0 first
    if refused_late:
        assert result.verdict.value == "invalid" and "duplicate" in names, names
    else:
        assert result.verdict.value == "valid" and summary.clean_end, names
