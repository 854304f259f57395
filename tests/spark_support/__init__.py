"""Shared helpers for the Spark tests: one SparkSession for the whole run, traces to judge, faults to inject.

Imported explicitly (`from spark_support import spark_fixture` gives a test module the `spark` fixture):
pytest runs with importlib mode. Every module gets the same session (it is created once per process).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ks_conformance.checker import Checker
    from ks_spark.validation.validator import ValidationResult
    from pyspark.sql import SparkSession


def spark_missing() -> str | None:
    """Why Spark tests cannot run here (pyspark or Java missing), or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (make installs the spark extra)"
    from ks_spec.errors import Unavailable
    from ks_spec.java import require_java

    if shutil.which("java") is None and not __import__("os").environ.get("JAVA_HOME"):
        return "Java 17+ is not installed (Spark needs it)"
    try:
        require_java()
    except Unavailable as error:
        return str(error)
    return None


def trace_exercised(python: Checker) -> dict[str, int]:
    """The Python checker's exercised counts of the trace kinds that apply (the harness's kinds left out)."""
    from ks_conformance.rules import RULES, Stage

    return {
        kind.name: python.exercised[kind.name]
        for kind in RULES
        if kind.stage is not Stage.HARNESS and python.applies(kind.name)
    }


def assert_same_judgment(
    spark: SparkSession, events: list[dict[str, Any]], path: Path, shards: int = 2
) -> tuple[Checker, dict[str, int]]:
    """Write `events` to `path` and judge them three ways: check-trace; validate-replay in one Spark task, which must
    agree in everything (verdict, anomalies, exercised counts, contradictions, explanations and witness events); and,
    unless `shards` is 1, validate-replay in `shards` shards of keys, which must give the one task's result, or say
    why the shards do not cover the trace. Returns the Python checker and the counts."""
    from ks_conformance.checker import check_events
    from ks_spark.validation.validator import validate
    from ks_spec.trace import write_trace

    write_trace(events, path)
    python = check_events(events)
    result = validate(spark, str(path), witnesses=8, everything=True)
    assert result.malformed is None
    assert result.verdict.value == python.verdict.value
    assert result.exercised == trace_exercised(python)
    assert sorted(result.all_anomalies or []) == sorted((a.name, a.seq, a.witness) for a in python.anomalies)
    assert sorted(result.problems) == sorted((p.seq, p.message) for p in python.problems)
    texts = {(a.name, a.seq, a.witness): a.explanation.text() for a in python.anomalies}
    for finding in result.findings:
        anomaly = finding.anomaly
        assert anomaly.explanation.text() == texts[(anomaly.name, anomaly.seq, anomaly.witness)]
        assert [e["seq"] for e in finding.events] == list(anomaly.witness)
    if shards > 1:
        sharded = validate(spark, str(path), witnesses=8, everything=True, shards=shards)
        assert sharded.judged == f"in {shards} shards of keys" or sharded.judged.startswith("in one task: ")
        assert_judged_alike(sharded, result)
    return python, result.counts


def assert_judged_alike(sharded: ValidationResult, one: ValidationResult) -> None:
    """Two validate-replay results agree in everything: verdict, counts, exercised checks, every anomaly, the
    contradictions, the witnesses shown and their events."""
    assert (sharded.verdict, sharded.counts, sharded.exercised) == (one.verdict, one.counts, one.exercised)
    assert sharded.all_anomalies == one.all_anomalies and sharded.problems == one.problems
    shown = [(f.anomaly.explanation.text(), f.events) for f in sharded.findings]
    assert shown == [(f.anomaly.explanation.text(), f.events) for f in one.findings]


@cache
def _session() -> SparkSession:
    from ks_spark.session import SessionOptions, get_session

    # Small and quick: two cores, loopback, no UI, few shuffle partitions, serial GC, 1g driver (spark.md).
    return get_session(
        SessionOptions(
            master="local[2]",
            app_name="keyshared-tests",
            shuffle_partitions=2,
            driver_memory="1g",
            quick=True,
        )
    )


@pytest.fixture(scope="session", name="spark")
def spark_fixture() -> Iterator[SparkSession]:
    """The one SparkSession of the test run; tests that use it skip where Spark cannot run."""
    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    yield _session()


def watch_stream_command(
    tmp: Path,
    variant: str | None,
    partitions: int,
    extra: list[str],
    module: str = "ks_spark.capture.examples.keyed_totals",
    judge: str = "none",
) -> list[str]:
    """`keyshared watch-stream` on an example query module (keyed_totals by default; log, output, capture under
    `tmp`), with its `variant` if one is given, judging with `judge` (none: nothing)."""
    return [
        sys.executable,
        "-m",
        "keyshared",
        "watch-stream",
        module,
        "--capture",
        str(tmp / "capture"),
        "--set",
        f"log={tmp / 'log'}",
        "--set",
        f"out={tmp / 'out'}",
        *(["--set", f"variant={variant}"] if variant is not None else []),
        "--partitions",
        str(partitions),
        "--judge",
        judge,
        *extra,
    ]
