"""The capture-to-trace mapping of spec/streaming.md on hand-written capture folders (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ks_conformance.tracefile import check_trace
from ks_spark.capture.recorder import FORMAT, MARKER, VERSION
from ks_spark.capture.streamtrace import assemble, where
from ks_spec.errors import UserError
from ks_spec.trace import write_jsonl

KEYS = {0: "a", 1: "b", 2: "a", 3: "b", 4: "a", 5: "b"}


def _capture(folder: Path, runs: list[dict[str, Any]]) -> Path:
    """A capture folder: per run, driver lines and task files {name: lines}."""
    folder.mkdir()
    (folder / MARKER).write_text(json.dumps({"format": FORMAT, "version": VERSION}) + "\n")
    for index, run in enumerate(runs, start=1):
        tasks = folder / f"run-{index:04d}" / "tasks"
        tasks.mkdir(parents=True)
        driver = "".join(json.dumps(line) + "\n" for line in run["driver"])
        (tasks.parent / "driver.jsonl").write_text(driver)
        for name, lines in run["tasks"].items():
            (tasks / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def _batch(batch: int, offsets: list[int], partitions: dict[int, list[int]]) -> dict[str, list[Any]]:
    files: dict[str, list[Any]] = {f"src-b{batch}-p0-a0-t{batch}0.jsonl": [[o, KEYS[o]] for o in offsets]}
    for partition, produced in partitions.items():
        files[f"out-b{batch}-p{partition}-a0-t{batch}{partition + 1}.jsonl"] = list(produced)
    return files


def _judge(tmp_path: Path, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    events, _ = assemble(_capture(tmp_path / "capture", runs))
    write_jsonl(events, tmp_path / "trace.jsonl")
    result = check_trace(tmp_path / "trace.jsonl")
    assert result.malformed is None and not result.problems
    counts: dict[str, int] = {}
    for anomaly in result.anomalies:
        counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
    return events, counts


GOOD_RUN = {
    "driver": [
        {"e": "start", "committed": []},
        {"e": "batch", "b": 0, "committed": []},
        {"e": "sink", "b": 0},
        {"e": "batch", "b": 1, "committed": [0]},
    ],
    "tasks": {**_batch(0, [0, 1, 2], {0: [0, 2], 1: [1]}), **_batch(1, [3, 4, 5], {0: [4], 1: [3, 5]})},
}


def test_a_batch_killed_before_its_commit_is_redelivered_after_the_restart_and_the_trace_is_valid(
    tmp_path: Path,
) -> None:
    replay = {
        "driver": [
            {"e": "start", "committed": [0]},
            {"e": "batch", "b": 1, "committed": [0]},
            {"e": "sink", "b": 1},
            {"e": "stop", "committed": [0, 1]},
        ],
        "tasks": _batch(1, [3, 4, 5], {0: [4], 1: [3, 5]}),
    }
    events, counts = _judge(tmp_path, [GOOD_RUN, replay])
    assert counts == {}
    kinds = [e["event"] for e in events]
    assert kinds.count("restart") == 1 and kinds[-1] == "quiescent"
    persisted = [e["cursor"] for e in events if e["event"] == "cursor_persisted"]
    assert persisted == [3, 6]  # batch 0's commit, then the replayed batch 1's
    added = [(e["consumer"], e["capacity"]) for e in events if e["event"] == "consumer_added"]
    assert added[:2] == [("b0-p0", 2), ("b0-p1", 1)]  # batch 0's partitions 0 and 1


def test_a_key_processed_by_two_partitions_in_one_batch_is_split_owner(tmp_path: Path) -> None:
    run = {
        "driver": [{"e": "start", "committed": []}, {"e": "batch", "b": 0, "committed": []}, {"e": "sink", "b": 0}],
        "tasks": _batch(0, [0, 1, 2], {0: [0, 1], 1: [2]}),  # key a: offset 0 at p0, offset 2 at p1
    }
    _, counts = _judge(tmp_path, [run])
    assert "split-owner" in counts


def test_a_key_processed_out_of_offset_order_is_key_reorder(tmp_path: Path) -> None:
    run = {
        "driver": [{"e": "start", "committed": []}, {"e": "batch", "b": 0, "committed": []}, {"e": "sink", "b": 0}],
        "tasks": _batch(0, [0, 1, 2], {0: [2, 0], 1: [1]}),
    }
    _, counts = _judge(tmp_path, [run])
    assert counts.get("key-reorder") == 1


def test_a_record_read_but_never_processed_is_skipped_by_the_commit(tmp_path: Path) -> None:
    run = {
        "driver": [
            {"e": "start", "committed": []},
            {"e": "batch", "b": 0, "committed": []},
            {"e": "sink", "b": 0},
            {"e": "stop", "committed": [0]},
        ],
        "tasks": _batch(0, [0, 1, 2], {0: [0, 2]}),  # offset 1 is lost
    }
    _, counts = _judge(tmp_path, [run])
    assert "cursor-skip" in counts


def test_a_capture_that_is_not_one_or_has_a_gap_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a capture folder"):
        tmp_path.joinpath("plain").mkdir()
        assemble(tmp_path / "plain")
    run = {
        "driver": [{"e": "start", "committed": []}, {"e": "batch", "b": 0, "committed": []}],
        "tasks": {"src-b0-p0-a0-t0.jsonl": [[0, "a"], [2, "a"]], "out-b0-p0-a0-t1.jsonl": [0, 2]},
    }
    with pytest.raises(UserError, match=r"offset 1 was never read through capture\.source") as caught:
        assemble(_capture(tmp_path / "gap", [run]))
    assert "\n" not in str(caught.value)


def test_watch_stream_judges_a_capture_folder_and_says_a_missing_one_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from keyshared.cli import main

    folder = _capture(tmp_path / "capture", [GOOD_RUN])
    assert main(["watch-stream", "--judge-only", "--capture", str(folder)]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["watch-stream", "--judge-only", "--capture", str(tmp_path / "absent")]) == 66
    error = capsys.readouterr().err
    assert "absent: no such file or folder" in error and error.count("\n") == 1


def test_watch_stream_refuses_a_module_without_start_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from keyshared.cli import main

    assert main(["watch-stream", "json", "--capture", str(tmp_path / "capture")]) == 64
    error = capsys.readouterr().err
    assert "json: defines no start(spark, capture, options) function" in error and error.count("\n") == 1
    assert main(["watch-stream", "no_such_module_here", "--capture", str(tmp_path / "capture")]) == 64
    assert "no_such_module_here: no such module" in capsys.readouterr().err


def _long_run(batches: int, retain: int, stop: bool = True) -> dict[str, Any]:
    """A correct run of `batches` one-record batches whose commit log keeps only the last `retain` entries (Spark's
    spark.sql.streaming.minBatchesToRetain purges the older ones), as the driver sees it at each batch's start."""

    def log(last: int) -> list[int]:
        return list(range(max(0, last - retain + 1), last + 1)) if last >= 0 else []

    driver: list[dict[str, Any]] = [{"e": "start", "committed": []}]
    tasks: dict[str, list[Any]] = {}
    for batch in range(batches):
        driver += [{"e": "batch", "b": batch, "committed": log(batch - 1)}, {"e": "sink", "b": batch}]
        tasks[f"src-b{batch}-p0-a0-t{batch}0.jsonl"] = [[batch, "k"]]
        tasks[f"out-b{batch}-p0-a0-t{batch}1.jsonl"] = [batch]
    if stop:
        driver.append({"e": "stop", "committed": log(batches - 1)})
    return {"driver": driver, "tasks": tasks}


def _one_batch_run(batch: int, log: list[int]) -> dict[str, Any]:
    """A run that starts on a commit log holding `log` (purged to its retention), runs batch `batch` of one record
    (offset = batch, key k) to its sink and commits it as it stops."""
    return {
        "driver": [
            {"e": "start", "committed": log},
            {"e": "batch", "b": batch, "committed": log},
            {"e": "sink", "b": batch},
            {"e": "stop", "committed": [*log[1:], batch]},
        ],
        "tasks": {f"src-b{batch}-p0-a0-t1.jsonl": [[batch, "k"]], f"out-b{batch}-p0-a0-t2.jsonl": [batch]},
    }


def test_a_commit_log_purged_by_spark_retention_is_not_a_deleted_checkpoint(tmp_path: Path) -> None:
    events, counts = _judge(tmp_path, [_long_run(12, retain=3)])
    assert counts == {}
    persisted = [e["cursor"] for e in events if e["event"] == "cursor_persisted"]
    assert persisted == list(range(1, 13))  # every commit moves the cursor on by its batch's record


def test_a_restart_after_retention_purged_the_log_resumes_from_the_last_commit(tmp_path: Path) -> None:
    first = _long_run(12, retain=3, stop=False)  # killed after batch 11's sink, before its commit
    _, counts = _judge(tmp_path, [first, _one_batch_run(11, log=[8, 9, 10])])
    assert counts == {}


def test_a_commit_log_that_goes_back_is_still_a_regress_under_retention(tmp_path: Path) -> None:
    """The checkpoint replaced by an older copy (log 4-6 instead of 9-11): the query re-runs batch 7 and the
    cursor goes back from 12 to 8."""
    first = _long_run(12, retain=3)
    _, counts = _judge(tmp_path, [first, _one_batch_run(7, log=[4, 5, 6])])
    assert "cursor-regress" in counts


def test_a_restart_on_a_new_checkpoint_under_retention_is_a_regress(tmp_path: Path) -> None:
    """The second run's checkpoint is a new, empty one: the query starts over from the first record."""
    _, counts = _judge(tmp_path, [_long_run(12, retain=3), _long_run(12, retain=3)])
    assert "cursor-regress" in counts and "resurrected" in counts


def _with_probe(folder: Path, run: int, counts: dict[int, int]) -> Path:
    (folder / f"run-{run:04d}" / "probe.json").write_text(
        json.dumps({"counts": {str(o): c for o, c in counts.items()}})
    )
    return folder


def _judge_folder(tmp_path: Path, folder: Path) -> tuple[list[dict[str, Any]], dict[str, int], Any]:
    events, _ = assemble(folder)
    write_jsonl(events, tmp_path / "trace.jsonl")
    result = check_trace(tmp_path / "trace.jsonl")
    assert result.malformed is None and not result.problems
    counts: dict[str, int] = {}
    for anomaly in result.anomalies:
        counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
    return events, counts, result


STOPPED_RUN = {**GOOD_RUN, "driver": [*GOOD_RUN["driver"], {"e": "sink", "b": 1}, {"e": "stop", "committed": [0, 1]}]}


def test_a_sink_that_returned_without_writing_a_batch_loses_its_records(tmp_path: Path) -> None:
    """The probe holds batch 0's offsets once and none of batch 1's: batch 1 is lost, though its sink returned."""
    folder = _with_probe(_capture(tmp_path / "capture", [STOPPED_RUN]), 1, {0: 1, 1: 1, 2: 1})
    events, counts, result = _judge_folder(tmp_path, folder)
    assert result.verdict.value == "invalid"
    assert "cursor-skip" in counts and "lost" in counts, counts
    assert {e["offset"] for e in events if e["event"] == "ack"} == {0, 1, 2}


def test_a_probe_that_holds_every_offset_once_is_valid(tmp_path: Path) -> None:
    folder = _with_probe(_capture(tmp_path / "capture", [STOPPED_RUN]), 1, dict.fromkeys(range(6), 1))
    _, counts, result = _judge_folder(tmp_path, folder)
    assert (result.verdict.value, counts) == ("valid", {})


def test_a_batch_committed_without_reading_its_records_is_a_verdict_naming_them(tmp_path: Path) -> None:
    """Batch 1 ran (the driver saw it start and its sink return) but no task read offsets 2 and 3."""
    run = {
        "driver": [
            {"e": "start", "committed": []},
            {"e": "batch", "b": 0, "committed": []},
            {"e": "sink", "b": 0},
            {"e": "batch", "b": 1, "committed": [0]},
            {"e": "sink", "b": 1},
            {"e": "batch", "b": 2, "committed": [0, 1]},
            {"e": "sink", "b": 2},
            {"e": "stop", "committed": [0, 1, 2]},
        ],
        "tasks": {**_batch(0, [0, 1], {0: [0], 1: [1]}), **_batch(2, [4, 5], {0: [4], 1: [5]})},
    }
    events, _, result = _judge_folder(tmp_path, _capture(tmp_path / "capture", [run]))
    assert result.verdict.value == "invalid"
    skipped = [a for a in result.anomalies if a.name == "cursor-skip"]
    assert skipped and "offset=2" in skipped[0].explanation.text()
    stuck = sorted(
        a.explanation.text().split("offset=")[1].split(",")[0] for a in result.anomalies if a.name == "stuck-key"
    )
    assert stuck == ["2", "3"]
    assert [e["key"] for e in events if e["event"] == "publish" and e["offset"] in (2, 3)] == ["(unread)"] * 2


def _timed(run: dict[str, Any], start: float) -> dict[str, Any]:
    """The run with a driver time on every line, one second apart from `start`."""
    return {**run, "driver": [{**line, "time": start + i} for i, line in enumerate(run["driver"])]}


def test_two_runs_of_one_query_at_the_same_time_are_named_as_such_and_a_restart_is_not(tmp_path: Path) -> None:
    replay = {
        "driver": [
            {"e": "start", "committed": [0]},
            {"e": "batch", "b": 1, "committed": [0]},
            {"e": "sink", "b": 1},
            {"e": "stop", "committed": [0, 1]},
        ],
        "tasks": _batch(1, [3, 4, 5], {0: [4], 1: [3, 5]}),
    }
    _, restarted = assemble(_capture(tmp_path / "restart", [_timed(GOOD_RUN, 100), _timed(replay, 110)]))
    assert restarted.concurrent == []
    _, together = assemble(_capture(tmp_path / "together", [_timed(GOOD_RUN, 100), _timed(replay, 101.5)]))
    assert together.concurrent == [
        "run 1 (run-0001) and run 2 (run-0002) of one query ran at the same time: run 2 began 1.5s before run 1's "
        "last batch event (the trace shows it as a restart)"
    ]


def test_a_second_start_that_spark_refused_while_the_first_ran_is_named_and_is_no_restart(tmp_path: Path) -> None:
    """Spark refuses a second query on a checkpoint in use (SparkConcurrentModificationException): that run began
    during the first and died with only its start line; the first run's clean end still stands."""
    refused = {"driver": [{"e": "start", "committed": [0], "time": 101.5}], "tasks": {}}
    events, summary = assemble(_capture(tmp_path / "capture", [_timed(STOPPED_RUN, 100), refused]))
    assert [e["event"] for e in events].count("restart") == 0 and events[-1]["event"] == "quiescent"
    assert summary.clean_end and summary.runs == 2
    assert len(summary.concurrent) == 1 and summary.concurrent[0].startswith("run 1 (run-0001) and run 2 (run-0002)")


def test_where_names_the_run_batch_and_partition_of_an_anomaly_offsets(tmp_path: Path) -> None:
    replay = {
        "driver": [{"e": "start", "committed": [0]}, {"e": "batch", "b": 1, "committed": [0]}, {"e": "sink", "b": 1}],
        "tasks": _batch(1, [3, 4, 5], {0: [4], 1: [3, 5]}),
    }
    _, summary = assemble(_capture(tmp_path / "capture", [GOOD_RUN, replay]))
    assert where(summary, [4, 0, 9]) == [
        "offset 0: read in run 1 batch 0 (offsets 0-2), processed in run 1 batch 0 partition 0",
        "offset 4: read in run 1 batch 1 (offsets 3-5), processed in run 1 batch 1 partition 0, "
        "read in run 2 batch 1 (offsets 3-5), processed in run 2 batch 1 partition 0",
        "offset 9: not in the capture",
    ]


def test_where_names_the_source_file_each_offset_was_read_from(tmp_path: Path) -> None:
    """A file source's records carry their file (`{"file": ...}` lines before them): the lines name the file, below
    the folder holding every file, and the offsets the batch read from it; a batch without files, its offsets."""
    first = {
        "driver": [{"e": "start", "committed": []}, {"e": "batch", "b": 0, "committed": []}, {"e": "sink", "b": 0}],
        "tasks": {
            "src-b0-p0-a0-t1.jsonl": [
                {"file": "file:/data/in%20box/day=1/part-0.json"},
                [0, "a"],
                [1, "b"],
                {"file": "file:/data/in%20box/day=2/part-0.json"},
                [2, "a"],
            ],
            "src-b0-p1-a0-t2.jsonl": [{"file": "file:/data/in%20box/day=2/part-0.json"}, [3, "b"]],
            "out-b0-p0-a0-t3.jsonl": [0],
            "out-b0-p1-a0-t4.jsonl": [1, 3],
        },
    }
    _, summary = assemble(_capture(tmp_path / "capture", [first]))
    assert where(summary, [1, 3, 2]) == [
        "offset 1: read in run 1 batch 0 from in box/day=1/part-0.json (offsets 0-1), processed in run 1 batch 0 "
        "partition 1",
        "offset 2: read in run 1 batch 0 from in box/day=2/part-0.json (offsets 2-3), never processed",
        "offset 3: read in run 1 batch 0 from in box/day=2/part-0.json (offsets 2-3), processed in run 1 batch 0 "
        "partition 1",
    ]


def test_a_first_run_that_spark_refused_while_the_second_ran_is_named_by_its_failure_time(tmp_path: Path) -> None:
    """Whichever of two starts reaches the checkpoint first wins: here the second; the first fails (Capture.fail)."""
    refused = {
        "driver": [{"e": "start", "committed": [], "time": 100}, {"e": "fail", "time": 125, "error": "concurrent"}],
        "tasks": {},
    }
    events, summary = assemble(_capture(tmp_path / "capture", [refused, _timed(STOPPED_RUN, 110)]))
    assert [e["event"] for e in events].count("restart") == 0 and summary.clean_end
    assert len(summary.concurrent) == 1 and "run 2 began 15.0s before run 1's last" in summary.concurrent[0]
