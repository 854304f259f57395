"""The second example job, running balances per account (ks_spark.capture.examples.balances), under capture.

The correct job is valid, with a crash after a batch's write (the query fails before the commit) and with a SIGKILL
of the whole process, each followed by a restart from the checkpoint. Each broken variant is a mistake real jobs
make; each must be judged invalid with its anomaly kinds, the records they name must be exactly the ones the
mistake touches (computed from the log, not from the output), and `keyshared watch-stream` must print them in the
job's terms: the batch and partition (consumer `b<batch>-p<partition>`) and the file each record was read from.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from spark_support import spark_fixture, spark_missing, watch_stream_command  # noqa: F401  (spark_fixture: `spark`)

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing())),
]

RECORDS, ACCOUNTS, FILES = 48, 4, 4
PER_FILE = RECORDS // FILES
"""One file per batch (the example reads a file per trigger): offset o is in file and batch o // PER_FILE."""
CRASH_BATCH = 2
MODULE = "ks_spark.capture.examples.balances"
BLOCK = re.compile(r"^  (\S+) \((KS-[A-Z]+-\d+), (MUST|SHOULD)\) at seq \d+$")
PLACE = re.compile(r"^offset (\d+): (.*)$")
READ = re.compile(r"read in run \d+ batch (\d+) from log/part-(\d+)\.jsonl \(offsets [-0-9, ]+\)")
PROCESSED = re.compile(r"processed in run \d+ batch (\d+) partition (\d+)")
CONSUMER = re.compile(r"\bb(\d+)-p(\d+)\b")


@dataclass
class Judged:
    """A capture's judgement: the verdict, each anomaly's first offset by kind, and watch-stream's printed blocks."""

    verdict: str
    offsets: dict[str, set[int]]
    blocks: list[tuple[str, list[str]]]
    events: list[dict[str, Any]]


def _log(tmp: Path) -> list[dict[str, Any]]:
    from ks_spark.capture.examples.balances import write_log

    write_log(tmp / "log", RECORDS, ACCOUNTS, FILES)
    records = [json.loads(line) for path in sorted((tmp / "log").glob("part-*.jsonl")) for line in path.open()]
    assert [r["offset"] for r in records] == list(range(RECORDS))
    return records


def _run(spark: Any, tmp: Path, variant: str, crash: bool = False, new_checkpoint: bool = False) -> Path:
    """Run the job to the end in this process (first failing at CRASH_BATCH when `crash`; again on another
    checkpoint when `new_checkpoint`); return the capture folder."""
    from ks_spark.capture.examples import balances
    from ks_spark.capture.watch import run_under_capture

    options = {"log": str(tmp / "log"), "out": str(tmp / "out"), "variant": variant}
    capture, checkpoint = tmp / "capture", str(tmp / "checkpoint")
    if crash:
        with pytest.raises(Exception, match="crash after writing batch"):
            run_under_capture(spark, balances, capture, checkpoint, {**options, "crash_batch": str(CRASH_BATCH)})
    outcome = run_under_capture(spark, balances, capture, checkpoint, options)
    assert outcome.probed
    if new_checkpoint:
        run_under_capture(spark, balances, capture, str(tmp / "checkpoint-new"), options)
    return capture


def _judge(capture: Path) -> Judged:
    """check-trace on the assembled trace (every anomaly), and watch-stream --judge-only's printed explanations."""
    from ks_conformance.tracefile import check_trace
    from ks_spec.trace import load_trace

    printed = subprocess.run(
        [sys.executable, "-m", "keyshared", "watch-stream", "--judge-only", "--capture", str(capture)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    result = check_trace(capture / "trace.jsonl")
    assert printed.returncode == {"valid": 0, "invalid": 1}[result.verdict.value], printed.stdout + printed.stderr
    offsets: dict[str, set[int]] = {}
    for anomaly in result.anomalies:
        named = re.findall(r"offset=(\d+)", anomaly.explanation.text())  # its first record, when it names one
        offsets.setdefault(anomaly.name, set()).update(int(offset) for offset in named[:1])
    blocks: list[tuple[str, list[str]]] = []
    for line in printed.stdout.splitlines():
        match = BLOCK.match(line)
        if match:
            blocks.append((match.group(1), []))
        elif blocks and line.startswith("    "):
            blocks[-1][1].append(line.strip())
    return Judged(result.verdict.value, offsets, blocks, load_trace(capture / "trace.jsonl"))


def _assert_in_the_jobs_terms(judged: Judged, kinds: set[str]) -> None:
    """Each printed explanation of these kinds names its records' batch and file, and every consumer it names is a
    batch and partition that processed one of them."""
    shown = [(kind, lines) for kind, lines in judged.blocks if kind in kinds]
    assert {kind for kind, _ in shown} == kinds, judged.blocks
    for kind, lines in shown:
        places = [PLACE.match(line) for line in lines]
        where = {int(m.group(1)): m.group(2) for m in places if m}
        assert where, (kind, lines)
        for offset, text in where.items():
            reads = READ.findall(text)
            assert reads, (kind, text)  # every record of the explanation: its batch and file
            assert all(int(batch) == int(file) == offset // PER_FILE for batch, file in reads), (kind, offset, text)
        processed = {(int(b), int(p)) for text in where.values() for b, p in PROCESSED.findall(text)}
        named = {(int(b), int(p)) for b, p in CONSUMER.findall(" ".join(lines))}
        assert named <= processed, (kind, named, processed)


def test_the_correct_job_crashed_after_a_write_and_restarted_is_valid_and_replays_only_that_batch(
    spark: Any, tmp_path: Path
) -> None:
    _log(tmp_path)
    judged = _judge(_run(spark, tmp_path, "correct", crash=True))
    assert judged.verdict == "valid", judged.offsets
    assert _delivered_again(judged.events) == set(range(CRASH_BATCH * PER_FILE, (CRASH_BATCH + 1) * PER_FILE))


def _delivered_again(events: list[dict[str, Any]]) -> set[int]:
    """The offsets processed more than once; every offset must have been processed."""
    delivered: dict[int, int] = {}
    for event in events:
        if event["event"] == "deliver":
            delivered[event["offset"]] = delivered.get(event["offset"], 0) + 1
    assert sorted(delivered) == list(range(RECORDS))
    return {offset for offset, count in delivered.items() if count > 1}


@pytest.mark.parametrize(
    ("variant", "kinds"),
    [
        ("card-key", {"split-owner", "key-reorder"}),
        ("event-time", {"key-reorder"}),
        ("dedup-ref", {"stuck-key", "cursor-skip"}),
        ("changes-only", {"stuck-key", "cursor-skip"}),
        ("swallow-write", {"lost", "cursor-skip"}),
    ],
)
def test_each_broken_variant_is_caught_in_the_jobs_terms(
    spark: Any, tmp_path: Path, variant: str, kinds: set[str]
) -> None:
    records = _log(tmp_path)
    judged = _judge(_run(spark, tmp_path, variant))
    assert judged.verdict == "invalid"
    assert kinds <= set(judged.offsets), judged.offsets
    _assert_in_the_jobs_terms(judged, kinds)
    if variant == "dedup-ref":  # exactly the records whose (account, ref) an earlier record of another card had
        seen: set[tuple[str, int]] = set()
        dropped = set()
        for record in records:
            pair = (record["account"], record["ref"])
            if pair in seen:
                dropped.add(record["offset"])
            seen.add(pair)
        assert dropped and judged.offsets["stuck-key"] == dropped
    elif variant == "changes-only":  # exactly the balance enquiries (amount 0)
        assert judged.offsets["stuck-key"] == {r["offset"] for r in records if r["amount"] == 0}
    elif variant == "swallow-write":  # exactly the batch whose write was swallowed
        from ks_spark.capture.examples.balances import LOST_BATCH

        assert judged.offsets["lost"] == set(range(LOST_BATCH * PER_FILE, (LOST_BATCH + 1) * PER_FILE))
    elif variant == "event-time":  # a record applied before an earlier one of its account with a later clock
        by_offset = {r["offset"]: r for r in records}
        assert any(
            by_offset[o]["account"] == by_offset[p]["account"]
            and by_offset[o]["event_time"] > by_offset[p]["event_time"]
            for o in judged.offsets["key-reorder"]
            for p in range(o + 1, RECORDS)
        )


def test_an_appending_sink_replayed_after_a_crash_applies_that_batch_twice(spark: Any, tmp_path: Path) -> None:
    _log(tmp_path)
    judged = _judge(_run(spark, tmp_path, "append-sink", crash=True))
    assert judged.verdict == "invalid"
    assert {"resurrected", "duplicate"} <= set(judged.offsets), judged.offsets
    replayed = set(range(CRASH_BATCH * PER_FILE, (CRASH_BATCH + 1) * PER_FILE))
    assert judged.offsets["duplicate"] == replayed == judged.offsets["resurrected"]
    _assert_in_the_jobs_terms(judged, {"resurrected", "duplicate"})


def test_a_restart_on_a_new_checkpoint_processes_everything_again(spark: Any, tmp_path: Path) -> None:
    _log(tmp_path)
    judged = _judge(_run(spark, tmp_path, "correct", new_checkpoint=True))
    assert judged.verdict == "invalid"
    assert {"resurrected", "duplicate", "cursor-regress"} <= set(judged.offsets), judged.offsets
    assert judged.offsets["resurrected"] == set(range(RECORDS))  # every record, all committed by the first run
    _assert_in_the_jobs_terms(judged, {"resurrected", "duplicate"})


def _command(tmp: Path, partitions: int, judge: str, extra: list[str], module: str = MODULE) -> list[str]:
    return watch_stream_command(tmp, None, partitions, extra, module=module, judge=judge)


def test_the_correct_job_killed_with_sigkill_mid_batch_and_restarted_is_valid(tmp_path: Path) -> None:
    """The whole process group killed after batch 2's write and before its commit; watch-stream restarts it."""
    _log(tmp_path)
    flag = tmp_path / "signal"
    extra = ["--set", f"signal={flag}", "--set", f"pause_batch={CRASH_BATCH}", "--set", "pause_seconds=600"]
    scratch = tmp_path / "scratch"  # a killed process leaves its temporary folders: keep them under tmp_path
    scratch.mkdir()
    with (tmp_path / "run1.log").open("w") as log:
        child = subprocess.Popen(
            _command(tmp_path, 3, "none", extra),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "TMPDIR": str(scratch), "SPARK_LOCAL_DIRS": str(scratch)},
        )
        try:
            deadline = time.monotonic() + 180
            while not (flag / f"applied-{CRASH_BATCH}").exists():
                assert child.poll() is None, (tmp_path / "run1.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "the batch never reached its sink"
                time.sleep(0.2)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    again = subprocess.run(_command(tmp_path, 2, "check-trace", []), capture_output=True, text=True)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "2 runs" in again.stdout and "valid" in again.stdout
    judged = _judge(tmp_path / "capture")
    assert judged.verdict == "valid"
    assert sum(e["event"] == "restart" for e in judged.events) == 1
    # The killed batch is processed again after the restart, and nothing else: its commit never happened.
    assert _delivered_again(judged.events) == set(range(CRASH_BATCH * PER_FILE, (CRASH_BATCH + 1) * PER_FILE))


def test_the_source_records_each_records_file_and_a_source_without_files_records_offsets_only(
    spark: Any, tmp_path: Path
) -> None:
    """`_metadata.file_path` where the source has files; none (and no error) where it has not (a range here)."""
    from ks_spark.capture.recorder import Capture

    _log(tmp_path)

    def recorded(run: Path) -> tuple[set[str], set[int]]:
        files: set[str] = set()
        offsets: set[int] = set()
        for path in (run / "tasks").glob("src-*.jsonl"):
            for line in path.read_text().splitlines():
                value = json.loads(line)
                if isinstance(value, dict):
                    files.add(value["file"].rsplit("/", 1)[-1])
                else:
                    offsets.add(value[0])
        return files, offsets

    capture = Capture(tmp_path / "files", key_column="account")
    run = capture.begin(spark)
    from_files = capture.source(spark.read.schema("offset long, account string").json(str(tmp_path / "log")))
    assert from_files.columns == ["offset", "account"] and from_files.count() == RECORDS
    capture.end()
    assert recorded(run) == ({f"part-{index:05d}.jsonl" for index in range(FILES)}, set(range(RECORDS)))
    capture = Capture(tmp_path / "no-files")
    run = capture.begin(spark)
    no_files = capture.source(spark.range(5).selectExpr("id AS offset", "CAST(id % 2 AS STRING) AS key"))
    assert no_files.columns == ["offset", "key"] and no_files.count() == 5
    capture.end()
    assert recorded(run) == (set(), set(range(5)))


def test_a_module_whose_key_column_the_source_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    _log(tmp_path)
    module = tmp_path / "my_job.py"
    module.write_text(f"from {MODULE} import probe, start\n\nKEY_COLUMN = 'acct'\n")
    ran = subprocess.run(
        _command(tmp_path, 2, "none", [], module=str(module)),
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 64, ran.stdout + ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("keyshared: error:")]
    assert len(errors) == 1 and "no column 'acct' in the source" in errors[0], ran.stderr
    assert "Traceback" not in ran.stderr
