"""A real Structured Streaming pipeline under capture: killed with SIGKILL mid-batch, restarted, judged.

Each scenario runs `keyshared watch-stream` on the keyed_totals example as a child process in its own
session, kills the whole process group (driver, JVM, Python workers) while batch 2's sink has written and
before the batch commits, restarts it from its checkpoint with another `--partitions`, and judges the
captured trace with the Python checker (and, once, validate-replay). The correct pipeline must be valid
with duplicates only after the restart; each broken variant must show its anomaly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from spark_support import spark_fixture, spark_missing  # noqa: F401  (spark_fixture: `spark`)
from spark_support import watch_stream_command as _command

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing())),
]

RECORDS, KEYS, FILES = 96, 6, 4
KILL_BATCH = 2
WAIT_S = 180


@dataclass
class Scenario:
    """What a scenario left behind: the capture folder, its trace, the Python checker's judgement."""

    capture: Path
    trace: Path
    verdict: str
    anomalies: dict[str, int]
    events: list[dict[str, Any]]
    summary: Any
    """The assembly's summary (ks_spark.capture.streamtrace.Summary): where each record was in the job."""


def _kill_mid_batch(tmp: Path, variant: str, partitions: int, kill_batch: int = KILL_BATCH) -> None:
    """Run until batch `kill_batch`'s sink has written, then SIGKILL the child's whole process group."""
    signal_dir = tmp / "signal"
    extra = ["--set", f"signal={signal_dir}", "--set", f"pause_batch={kill_batch}", "--set", "pause_seconds=600"]
    log = (tmp / "run1.log").open("w")
    scratch = tmp / "scratch"  # a killed child cannot remove its temporary folders (Python's, Spark's): keep them here
    scratch.mkdir()
    child = subprocess.Popen(
        _command(tmp, variant, partitions, extra),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(scratch), "SPARK_LOCAL_DIRS": str(scratch)},
    )
    try:
        deadline = time.monotonic() + WAIT_S * (1 + kill_batch // 10)
        while not (signal_dir / f"applied-{kill_batch}").exists():
            assert child.poll() is None, (tmp / "run1.log").read_text()[-2000:]
            assert time.monotonic() < deadline, f"batch {kill_batch} never reached its sink"
            time.sleep(0.2)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the child's own session: driver, JVM and Python workers
        child.wait()
        log.close()
    assert child.returncode == -signal.SIGKILL


def run_scenario(
    tmp: Path,
    variant: str = "correct",
    delete_checkpoint: bool = False,
    first: int = 3,
    second: int = 2,
    files: int = FILES,
    kill_batch: int = KILL_BATCH,
) -> Scenario:
    """Write the log (one file per batch), run killed mid-batch, restart (another partition count), assemble and
    judge the capture."""
    from ks_conformance.tracefile import check_trace
    from ks_spark.capture.examples.keyed_totals import write_log
    from ks_spark.capture.streamtrace import write
    from ks_spec.trace import load_trace

    write_log(tmp / "log", max(RECORDS, 2 * files), KEYS, files)
    _kill_mid_batch(tmp, variant, first, kill_batch)
    if delete_checkpoint:
        shutil.rmtree(tmp / "capture" / "checkpoint")
    rerun = subprocess.run(_command(tmp, variant, second, []), capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    trace = tmp / "trace.jsonl"
    summary = write(tmp / "capture", trace)
    result = check_trace(trace)
    counts: dict[str, int] = {}
    for anomaly in result.anomalies:
        counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
    return Scenario(tmp / "capture", trace, result.verdict.value, counts, load_trace(trace), summary)


def _restart_seq(events: list[dict[str, Any]]) -> int:
    restarts = [e["seq"] for e in events if e["event"] == "restart"]
    assert len(restarts) == 1
    return restarts[0]


@pytest.mark.slow  # two real streaming runs in subprocesses, about 90 s: the slow tier (make test-slow) runs it
def test_the_correct_pipeline_killed_mid_batch_and_restarted_is_valid_with_duplicates_only_after_the_restart(
    tmp_path: Path,
) -> None:
    scenario = run_scenario(tmp_path)
    assert scenario.verdict == "valid", scenario.anomalies
    events = scenario.events
    restart = _restart_seq(events)
    delivered: dict[int, list[int]] = {}
    for event in events:
        if event["event"] == "deliver":
            delivered.setdefault(event["offset"], []).append(event["seq"])
    assert sorted(delivered) == list(range(RECORDS))  # every record processed
    again = {offset: seqs for offset, seqs in delivered.items() if len(seqs) > 1}
    assert again, "the batch killed before its commit must be processed again"
    assert all(len(seqs) == 2 and seqs[0] < restart < seqs[1] for seqs in again.values())
    # What was processed again is exactly what the killed batch had processed (its commit never happened).
    persisted = [e["cursor"] for e in events if e["event"] == "cursor_persisted" and e["seq"] < restart]
    assert min(again) == persisted[-1]
    assert events[-1]["event"] == "quiescent"
    driver = (scenario.capture / "run-0002" / "driver.jsonl").read_text().splitlines()
    assert json.loads(driver[0])["committed"] == list(range(KILL_BATCH))  # the kill landed before the commit


@pytest.mark.slow
def test_a_correct_job_of_150_batches_killed_past_the_commit_log_retention_is_valid(tmp_path: Path) -> None:
    """Spark's default retention keeps the last 100 commits; the kill lands at batch 120, after the purge began."""
    scenario = run_scenario(tmp_path, files=150, kill_batch=120)
    assert scenario.verdict == "valid", scenario.anomalies
    driver = (scenario.capture / "run-0002" / "driver.jsonl").read_text().splitlines()
    committed = json.loads(driver[0])["committed"]
    assert committed[-1] == 119 and committed[0] > 0, committed  # purged, and the kill before batch 120's commit
    assert scenario.events[-1]["event"] == "quiescent"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "delete_checkpoint", "expected", "spark_expected"),
    [
        ("wrong-key", False, "split-owner", "split-owner"),
        ("append-sink", False, "resurrected", "duplicate"),
        ("correct", True, "resurrected", "cursor-regress"),
        ("arrival-order", False, "key-reorder", "key-reorder"),
    ],
    ids=["state-keyed-by-device", "non-idempotent-sink", "checkpoint-deleted", "sorted-by-arrival"],
)
def test_each_broken_pipeline_is_caught_with_its_anomaly_by_both_judges(
    tmp_path: Path, spark: Any, variant: str, delete_checkpoint: bool, expected: str, spark_expected: str
) -> None:
    """check-trace names the anomaly of spec/streaming.md section 5; validate-replay one of the kinds it computes."""
    from ks_spark.validation.validator import validate

    scenario = run_scenario(tmp_path, variant, delete_checkpoint)
    assert scenario.verdict == "invalid"
    assert expected in scenario.anomalies, scenario.anomalies
    _assert_named_in_the_jobs_terms(scenario, expected)
    judged = validate(spark, str(scenario.trace))
    assert judged.verdict.value == "invalid"
    assert spark_expected in judged.counts, judged.counts


def _assert_named_in_the_jobs_terms(scenario: Scenario, kind: str) -> None:
    """Every record of each `kind` anomaly is named by the batch and the file it was read from (one file per batch,
    in every run: file and batch are offset // records per file), and every consumer its witnesses name is a batch
    and partition that processed one of them."""
    from ks_conformance.tracefile import check_trace
    from ks_spark.capture.streamtrace import where

    by_seq = {event["seq"]: event for event in scenario.events}
    for anomaly in (a for a in check_trace(scenario.trace).anomalies if a.name == kind):
        witnesses = [by_seq[seq] for seq in anomaly.witness]
        offsets = {e["offset"] for e in witnesses if isinstance(e.get("offset"), int)}
        lines = where(scenario.summary, offsets)
        assert lines
        for offset, line in zip(sorted(offsets), lines, strict=True):
            reads = re.findall(r"read in run \d+ batch (\d+) from log/part-(\d+)\.jsonl", line)
            assert reads and all(int(b) == int(f) == offset // (RECORDS // FILES) for b, f in reads), line
        processed = set(re.findall(r"processed in run \d+ batch (\d+) partition (\d+)", " ".join(lines)))
        consumers = [re.fullmatch(r"b(\d+)-p(\d+)", str(e.get("consumer"))) for e in witnesses]
        named = {match.groups() for match in consumers if match}  # not `query`, the stopped query at a clean end
        assert named <= processed, (named, processed)


@pytest.mark.slow
def test_reprocessing_with_other_partitions_gives_the_same_totals_and_validate_replay_reads_the_capture(
    tmp_path: Path,
) -> None:
    """A fresh run with 2 shuffle partitions (a stateful query keeps its checkpoint's count on restart)."""
    import pandas as pd

    killed = run_scenario(tmp_path / "a")
    again = tmp_path / "b"
    shutil.copytree(tmp_path / "a" / "log", again / "log")
    fresh = subprocess.run(_command(again, "correct", 2, [], judge="check-trace"), capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stdout[-2000:] + fresh.stderr[-2000:]
    assert "valid" in fresh.stdout
    owner = "departs from strict Key-Shared in ordering (profile = owner)"  # (the verdict's second part)
    assert fresh.stdout.splitlines()[-1] == owner
    consumers = {e["consumer"] for e in load_events(again / "capture" / "trace.jsonl") if e["event"] == "deliver"}
    assert {name.split("-")[1] for name in consumers} == {"p0", "p1"}  # b<batch>-p<partition>

    def totals(out: Path) -> dict[int, int]:
        frame = pd.read_parquet(out)
        return dict(zip(frame["offset"].tolist(), frame["total"].tolist(), strict=True))

    assert totals(tmp_path / "a" / "out") == totals(again / "out")
    judged = subprocess.run(
        [
            sys.executable,
            "-m",
            "keyshared",
            "watch-stream",
            "--judge-only",
            "--capture",
            str(killed.capture),
            "--judge",
            "validate-replay",
        ],
        capture_output=True,
        text=True,
    )
    assert judged.returncode == 0, judged.stdout + judged.stderr  # valid on every kind
    assert "valid " in judged.stdout and owner in judged.stdout.splitlines()


def load_events(path: Path) -> list[dict[str, Any]]:
    from ks_spec.trace import load_trace

    events: list[dict[str, Any]] = load_trace(path)
    return events
