"""Spark replay validation: reading every trace form, rejecting corrupt input, the CLI, and the driver's diet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ks_conformance.checker import check_events
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spark.session import OUT_OF_MEMORY_HINT, describe_failure
from ks_spec.errors import MissingInput, UserError
from ks_spec.trace import load_trace, to_table, write_jsonl, write_parquet
from spark_support import assert_judged_alike, spark_fixture, trace_exercised  # noqa: F401  (spark_fixture: `spark`)

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parent.parent / "spec" / "examples" / "traces"
BAD = json.loads((EXAMPLES / "bad" / "expected.json").read_text())


@pytest.fixture(scope="module")
def churn() -> list[dict[str, Any]]:
    """A reference trace with joins, leaves, disconnections, draining and filters."""
    events: list[dict[str, Any]] = run_named("churn", size=400, seed=11, store=MemoryStore()).events
    return events


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_examples_are_rejected_where_the_format_says(spark: Any, name: str) -> None:
    from ks_spark.validation.validator import validate

    result = validate(spark, str(EXAMPLES / "bad" / name))
    where = BAD[name]
    assert result.verdict.value == "unknown"
    assert result.malformed is not None and "\n" not in result.malformed
    assert f"{name}:{where['line']}: field '{where['field']}'" in result.malformed


@pytest.mark.parametrize("name", sorted(p.name for p in (EXAMPLES / "good").glob("*.jsonl")))
def test_well_formed_examples_are_judged_like_the_python_checker(spark: Any, name: str) -> None:
    from ks_spark.validation.validator import validate

    path = EXAMPLES / "good" / name
    result = validate(spark, str(path), everything=True)
    python = check_events(load_trace(path))
    assert result.malformed is None
    assert result.verdict.value == python.verdict.value
    assert result.exercised == trace_exercised(python)


def test_jsonl_parquet_and_a_folder_of_parquet_files_give_the_same_judgement(
    spark: Any, tmp_path: Path, churn: list[dict[str, Any]]
) -> None:
    from ks_spark.validation.twins import fault_twin
    from ks_spark.validation.validator import validate

    events = fault_twin(churn)
    write_jsonl(events, tmp_path / "trace.jsonl")
    write_parquet(events, tmp_path / "trace.parquet")
    folder = tmp_path / "folder"
    folder.mkdir()
    third = len(events) // 3
    for index, part in enumerate((events[:third], events[third : 2 * third], events[2 * third :])):
        # Several row groups per file as well, so that runs span splits inside files too.
        write_parquet(part, folder / f"part-{index:05d}.parquet", rows_per_group=97)
    results = [
        validate(spark, str(p), everything=True) for p in (tmp_path / "trace.jsonl", tmp_path / "trace.parquet", folder)
    ]
    first = results[0]
    assert first.verdict.value == "invalid" and first.counts
    for other in results[1:]:
        assert other.counts == first.counts
        assert other.exercised == first.exercised
        assert other.all_anomalies == first.all_anomalies
        assert other.events == first.events == len(events)


def test_a_gap_between_parquet_files_is_named_by_file_and_line(spark: Any, tmp_path: Path) -> None:
    from ks_spark.validation.validator import validate

    events = load_trace(EXAMPLES / "good" / "owner-draining.jsonl")
    write_parquet(events[:5], tmp_path / "part-0.parquet")
    write_parquet(events[6:], tmp_path / "part-1.parquet")
    result = validate(spark, str(tmp_path))
    assert result.malformed is not None
    assert "part-1.parquet:1: field 'seq': expected 5, got 6" in result.malformed


def _parquet(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def test_corrupt_parquet_is_rejected_before_spark_runs(tmp_path: Path) -> None:
    from ks_spark.validation.reader import resolve

    events = load_trace(EXAMPLES / "good" / "strict-basic.jsonl")
    table = to_table(events)
    missing = _parquet(table.drop_columns(["tick"]), tmp_path / "missing.parquet")
    wrong = _parquet(
        table.set_column(3, "offset", pa.array([str(o) for o in table["offset"].to_pylist()])),
        tmp_path / "wrong.parquet",
    )
    extra = _parquet(table.append_column("colour", pa.array(["red"] * table.num_rows)), tmp_path / "extra.parquet")
    whole = _parquet(table, tmp_path / "whole.parquet").read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(whole[: len(whole) // 2])
    cases = {
        missing: "field 'tick': required column is missing",
        wrong: "field 'offset': column type string, expected int64",
        extra: "field 'colour': not a column of the trace format v1",
        truncated: "not a readable Parquet file, truncated or corrupt",
    }
    for path, problem in cases.items():
        with pytest.raises(UserError) as caught:
            resolve(str(path))
        message = str(caught.value)
        assert message.startswith(f"{path}: ") and problem in message and "\n" not in message
    with pytest.raises(MissingInput):
        resolve(str(tmp_path / "absent.parquet"))


def test_corrupt_input_gives_the_verdict_unknown_with_one_line(spark: Any, tmp_path: Path) -> None:
    from ks_spark.validation.validator import validate

    table = to_table(load_trace(EXAMPLES / "good" / "strict-basic.jsonl"))
    whole = _parquet(table, tmp_path / "whole.parquet").read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(whole[:-100])
    result = validate(spark, str(truncated))
    assert result.verdict.value == "unknown"
    assert result.malformed is not None and str(truncated) in result.malformed


def test_the_driver_receives_counts_and_witnesses_never_the_trace(
    spark: Any, tmp_path: Path, churn: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row that reaches the driver is counted: it must stay far below the number of events."""
    from ks_spark.validation.twins import fault_twin
    from ks_spark.validation.validator import validate
    from pyspark.sql.classic.dataframe import DataFrame

    events = fault_twin(churn)
    write_parquet(events, tmp_path / "twin.parquet")
    collected: list[int] = []
    original = DataFrame.collect

    def counting(self: DataFrame) -> Any:
        rows = original(self)
        collected.append(len(rows))
        return rows

    monkeypatch.setattr(DataFrame, "collect", counting)
    result = validate(spark, str(tmp_path / "twin.parquet"), witnesses=3)
    assert result.verdict.value == "invalid"
    assert sum(collected) < len(events) // 10, f"{sum(collected)} rows collected for {len(events)} events"


def test_cli_prints_the_verdicts_and_writes_a_report_in_the_conformance_format(
    spark: Any, tmp_path: Path, churn: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    from keyshared.cli import main
    from ks_conformance.report import read_report
    from ks_spark.validation.twins import fault_twin

    write_parquet(churn, tmp_path / "good.parquet")
    write_jsonl(fault_twin(churn), tmp_path / "twin.jsonl")
    report = tmp_path / "report.jsonl"
    code = main(
        [
            "validate-replay",
            str(tmp_path / "good.parquet"),
            str(tmp_path / "twin.jsonl"),
            *("--report", str(report), "--shards", "2"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "valid " in out and "invalid" in out and "duplicate" in out and "Let " in out
    lines = read_report(report)  # every line validates against spec/schemas/report-v1.schema.json
    traces = [line for line in lines if line["type"] == "trace"]
    assert [t["verdict"] for t in traces] == ["valid", "invalid"]
    assert [t["judged"] for t in traces] == ["in 2 shards of keys"] * 2
    assert out.count("judged in 2 shards of keys") == 2
    violations = [line for line in lines if line["type"] == "violation"]
    assert {v["anomaly"] for v in violations} == set(traces[1]["anomalies"])
    assert all(v["events"] and [e["seq"] for e in v["events"]] == v["witness"] for v in violations)
    assert lines[-1]["type"] == "footer" and lines[-1]["verdict"] == "invalid"


def test_cli_exit_codes_for_malformed_and_missing_traces(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from keyshared.cli import main

    assert main(["validate-replay", str(EXAMPLES / "bad" / "seq-gap.jsonl"), "--quiet"]) == 2
    assert "seq-gap.jsonl:3: field 'seq'" in capsys.readouterr().out
    assert main(["validate-replay", str(EXAMPLES / "absent.jsonl")]) == 66


def test_the_archive_shipped_to_executors_holds_every_task_package_and_the_spec_data(tmp_path: Path) -> None:
    """Executors elsewhere import keyshared from the shipped archive alone: the one-task pass runs the checker, which
    reads the requirements index (a run under spark-submit once failed on both)."""
    from ks_spark.session import task_archive

    archive = task_archive(str(tmp_path))
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from ks_spec import paths, requirements; import ks_conformance.checker, ks_spark.validation.sequential; "
        "assert ks_conformance.checker.__file__.startswith(sys.argv[1]), ks_conformance.checker.__file__; "
        "assert not str(paths.SPEC_DIR).startswith(sys.argv[2]), paths.SPEC_DIR; "
        "print(len(requirements.load_index()), paths.TRACE_EVENT_SCHEMA.is_file())"
    )
    repo_spec = str(Path(__file__).resolve().parent.parent / "spec")
    done = subprocess.run(
        [sys.executable, "-c", probe, archive, repo_spec], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    from ks_spec.requirements import load_index

    assert done.stdout.split() == [str(len(load_index())), "True"]


@pytest.mark.slow
def test_runs_under_spark_submit(tmp_path: Path, churn: list[dict[str, Any]]) -> None:
    """The same command under spark-submit: it joins the session spark-submit made (here local[1])."""
    import pyspark
    from keyshared import submit
    from spark_support import spark_missing

    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    write_parquet(churn, tmp_path / "trace.parquet")
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    completed = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            "--conf",
            f"spark.pyspark.python={sys.executable}",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            submit.__file__,
            "validate-replay",
            str(tmp_path / "trace.parquet"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**__import__("os").environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert completed.returncode == 0, completed.stderr[-2000:]  # valid: every kind computed, one task included
    assert completed.stdout.startswith("valid ")


def test_a_failed_spark_job_is_one_line_with_the_trace_and_a_hint(
    spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that dies (the JVM out of heap, as 100M events on local[2] with 4g did) exits 70 with one line."""
    from keyshared.cli import main
    from ks_spark.validation import validator
    from pyspark.errors import PySparkException

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise PySparkException(message="Job aborted\njava.lang.OutOfMemoryError: Java heap space\n\tat org.apache...")

    monkeypatch.setattr(validator, "validate", out_of_memory)
    trace = str(EXAMPLES / "good" / "strict-basic.jsonl")
    assert main(["validate-replay", trace, "--quiet"]) == 70
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"keyshared: error: {trace}: the Spark job failed: {OUT_OF_MEMORY_HINT}"]


def test_a_failure_without_memory_trouble_names_its_first_java_cause() -> None:
    text = "An error occurred while calling o42.collect.\n: org.apache.spark.SparkException: Job aborted: task lost\n"
    assert describe_failure(text) == "org.apache.spark.SparkException: Job aborted: task lost"
    assert describe_failure("\n\n") == "no message"
    assert describe_failure("java.lang.OutOfMemoryError: GC overhead limit exceeded") == OUT_OF_MEMORY_HINT


def test_a_job_whose_spark_shut_down_under_it_is_told_so() -> None:
    """What the driver got when 100M events on local[2] ran a task out of heap: the cause is only in Spark's log."""
    from ks_spark.session import SHUT_DOWN_HINT

    text = (
        "An error occurred while calling o1163.collectToPython.\n: java.lang.NullPointerException: Cannot invoke "
        '"org.apache.spark.scheduler.DAGScheduler.cleanupQueryJobs(long)" because the return value of '
        '"org.apache.spark.SparkContext.dagScheduler()" is null\n\tat org.apache.spark.sql.execution.SQLExecution'
    )
    assert describe_failure(text) == SHUT_DOWN_HINT
    assert describe_failure("java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.") == (
        SHUT_DOWN_HINT
    )


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--driver-memory", "banana"], "argument --driver-memory: not a memory size"),
        (["--driver-memory", "256m"], "argument --driver-memory: Spark needs at least 512m"),
        (["--master", "spark:/one-slash"], "argument --master: not a Spark master URL"),
        (["--master", "local[0]"], "argument --master: not a Spark master URL"),
    ],
)
@pytest.mark.parametrize("command", ["validate-replay", "spark-dispatch"])
def test_a_bad_master_or_driver_memory_is_one_line_before_spark_starts(
    command: str, option: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from keyshared.cli import main

    rest = ["--consumers", "a,b", "--out", str(tmp_path / "out")] if command == "spark-dispatch" else []
    with pytest.raises(SystemExit) as exited:
        main([command, str(EXAMPLES / "good" / "strict-basic.jsonl"), *option, *rest])
    assert exited.value.code == 64
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith(f"keyshared {command}: error: {named}")
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("given", "normal"), [("2g", "2g"), ("4096M", "4096m"), ("1gb", "1g"), ("1024", "1024")])
def test_driver_memory_sizes_are_read_as_spark_reads_them(given: str, normal: str) -> None:
    from ks_spark.session import check_driver_memory

    assert check_driver_memory(given) == normal


def test_spark_that_cannot_start_is_one_line_with_exit_69(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JVM that will not start (a bad setting, an unreachable cluster) is one line naming the master, not a stack."""
    from keyshared.cli import main
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    def refuse(self: Any) -> Any:
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    assert main(["validate-replay", "--master", "local[1]", str(EXAMPLES / "good" / "strict-basic.jsonl")]) == 69
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("keyshared: error: cannot start Spark (master local[1]): "), err
    assert "Java gateway process exited" in err[0]


@pytest.mark.slow
def test_an_unreachable_cluster_is_one_line_with_exit_69() -> None:
    """Spark gives up on an unreachable standalone master after about a minute; we say so in one line."""
    completed = subprocess.run(
        [sys.executable, "-m", "keyshared", "validate-replay", "--master", "spark://127.0.0.1:1", __file__],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 69, completed.stderr[-2000:]
    ours = [line for line in completed.stderr.splitlines() if line.startswith("keyshared:")]
    assert ours == [
        line for line in completed.stderr.splitlines() if "Traceback" in line or line.startswith("keyshared:")
    ]
    assert len(ours) == 1 and "cannot start Spark (master spark://127.0.0.1:1): Spark stopped while starting" in ours[0]


def test_shards_of_keys_judge_as_one_task_does(
    spark: Any, tmp_path: Path, churn: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checker in shards of keys (one Spark task each, the changes sent between them through Spark's shuffle in
    windows of 64 seqs) gives the one-task judgment: counts, exercised checks, every anomaly, the witnesses shown and
    their events (tests/test_spark_sharded.py proves the stages on every checker case without Spark)."""
    import ks_spark.validation.sharded as sharded
    from ks_spark.validation.twins import fault_twin
    from ks_spark.validation.validator import validate

    monkeypatch.setattr(sharded, "WINDOW", 64)
    events = fault_twin(churn)
    write_parquet(events, tmp_path / "trace.parquet", rows_per_group=101)
    one = validate(spark, str(tmp_path / "trace.parquet"), everything=True, shards=1)
    assert one.judged == "in one task" and one.verdict.value == "invalid"
    python = check_events(events)
    assert one.counts == {name: sum(a.name == name for a in python.anomalies) for name in one.counts}
    for shards in (2, 3):
        sharded = validate(spark, str(tmp_path / "trace.parquet"), everything=True, shards=shards)
        assert sharded.judged == f"in {shards} shards of keys"
        assert_judged_alike(sharded, one)


def test_a_trace_the_shards_do_not_cover_is_judged_in_one_task_saying_why(spark: Any, tmp_path: Path) -> None:
    from ks_spark.validation.validator import validate

    overrides = {"checkpoint_resume": True}
    events = run_named("bucket-rollover", size=60, seed=3, store=MemoryStore(), overrides=overrides).events
    write_jsonl(events, tmp_path / "buckets.jsonl")
    result = validate(spark, str(tmp_path / "buckets.jsonl"), everything=True, shards=2)
    assert result.judged == (
        "in one task: selector buckets with checkpoint_resume (a restart resumes each bucket from its checkpoint)"
    )
    python = check_events(events)
    assert result.counts == {name: sum(a.name == name for a in python.anomalies) for name in result.counts}
    assert sum(result.counts.values()) == sum(1 for a in python.anomalies if a.name in result.sequential)


def test_selector_buckets_is_judged_in_shards_as_in_one_task(spark: Any, tmp_path: Path) -> None:
    """Selector buckets in shards of keys: every publish goes to every shard's task (the bucket checks read other
    keys' messages), and the judgment is one task's (a faulty reference run: tests/test_spark_sharded.py runs the
    stages on every checker case)."""
    from ks_spark.validation.twins import fault_twin
    from ks_spark.validation.validator import validate

    trace = fault_twin(run_named("bucket-rollover", size=80, seed=5, store=MemoryStore()).events)
    write_parquet(trace, tmp_path / "faulty.parquet", rows_per_group=97)
    one = validate(spark, str(tmp_path / "faulty.parquet"), everything=True, shards=1)
    sharded = validate(spark, str(tmp_path / "faulty.parquet"), everything=True, shards=2)
    assert sharded.judged == "in 2 shards of keys" and one.verdict.value == "invalid"
    assert_judged_alike(sharded, one)
    python = check_events(trace)
    assert one.counts == {kind: sum(a.name == kind for a in python.anomalies) for kind in one.counts}


def test_parked_messages_are_judged_in_shards_as_in_one_task(spark: Any, tmp_path: Path) -> None:
    """With `park_after` set (KS-ISO-4: each key's parked messages left out of the window), in two shards."""
    from ks_spark.validation.twins import fault_twin
    from ks_spark.validation.validator import validate

    events = fault_twin(
        run_named("hot-key-slow-consumer", size=120, seed=3, store=MemoryStore(), overrides={"park_after": 2}).events
    )
    write_jsonl(events, tmp_path / "parked.jsonl")
    one = validate(spark, str(tmp_path / "parked.jsonl"), everything=True, shards=1)
    python = check_events(events)
    assert one.counts == {name: sum(a.name == name for a in python.anomalies) for name in one.counts}
    assert one.verdict.value == "invalid"
    sharded = validate(spark, str(tmp_path / "parked.jsonl"), everything=True, shards=2)
    assert sharded.judged == "in 2 shards of keys"
    assert_judged_alike(sharded, one)
