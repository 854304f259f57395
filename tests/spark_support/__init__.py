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


AT_DELIVERY_ONLY = frozenset({"key-reorder", "overtaken-hold", "retry-overtaken", "split-owner"})
"""Checks whose exercised count the Python checker also raises at the end of ops where a key *could* be
broken (its "temptations"); the Spark validator counts only the situations at deliveries, so its count
is a lower bound for these and exact for the others."""


def assert_exercised_agree(spark_counts: dict[str, int], python_counts: dict[str, int]) -> None:
    """The Spark validator's exercised counts against the Python checker's (see AT_DELIVERY_ONLY)."""
    for name, count in spark_counts.items():
        if name in AT_DELIVERY_ONLY:
            assert count <= python_counts.get(name, 0), name
        else:
            assert count == python_counts.get(name, 0), name


def parallel_kinds_not_computed(python: Checker) -> list[str]:
    """The trace kinds the Python checker applied to this trace that Spark's parallel passes do not compute, in
    catalogue order (what `--partial` leaves unchecked; capacity and the window too where the configuration takes
    them out of the parallel passes)."""
    from ks_conformance.rules import RULES, Stage
    from ks_spark.validation.catalogue import BY_NAME, not_computed_under

    left_out = not_computed_under(python.config)
    return [
        kind.name
        for kind in RULES
        if kind.stage is not Stage.HARNESS
        and python.applies(kind.name)
        and (kind.name not in BY_NAME or kind.name in left_out)
    ]


def trace_exercised(python: Checker) -> dict[str, int]:
    """The Python checker's exercised counts of the trace kinds that apply (the harness's kinds left out)."""
    from ks_conformance.rules import RULES, Stage

    return {
        kind.name: python.exercised[kind.name]
        for kind in RULES
        if kind.stage is not Stage.HARNESS and python.applies(kind.name)
    }


def assert_partial_agrees(spark: SparkSession, path: str, python: Checker) -> dict[str, int]:
    """validate-replay --partial (the parallel passes) against the Python checker on the kinds it computes: the same
    anomalies (name, seq, witness) and explanations, exercised counts that agree, the verdict the checker's judgement
    implies; a trace whose declarations or spec 1.7 events the parallel passes do not honour is `unknown`. Returns
    the counts."""
    from ks_spark.validation.validator import PARTIAL_PREDATES, unsupported_semantics, validate
    from ks_spec.trace import read_events

    result = validate(spark, path, witnesses=3, everything=True, partial=True)
    assert result.malformed is None
    kinds = {str(event["event"]) for _, event in read_events(Path(path))}
    newer = kinds & set(PARTIAL_PREDATES) or ("publish_entry" in kinds and python.config["selector"] != "buckets")
    if unsupported_semantics(python.config, python.declared) is not None or newer:
        assert result.verdict.value == "unknown" and result.counts == {}
        return {}
    computed = set(result.exercised)
    assert result.not_computed == expected_not_computed(python, partial=True)
    assert computed == set(trace_exercised(python)) - set(result.not_computed)
    assert sorted(result.all_anomalies or []) == sorted(
        (a.name, a.seq, a.witness) for a in python.anomalies if a.name in computed
    )
    assert_exercised_agree(result.exercised, trace_exercised(python))
    texts = {(a.name, a.seq, a.witness): a.explanation.text() for a in python.anomalies}
    for finding in result.findings:
        anomaly = finding.anomaly
        assert anomaly.explanation.text() == texts[(anomaly.name, anomaly.seq, anomaly.witness)]
        assert [e["seq"] for e in finding.events] == list(anomaly.witness)
    assert result.verdict.value == expected_verdict(python, partial=True)
    return result.counts


def assert_same_judgment(
    spark: SparkSession, events: list[dict[str, Any]], path: Path, partial: bool = True
) -> tuple[Checker, dict[str, int]]:
    """Write `events` to `path` and judge them three ways: check-trace; validate-replay (the checker in one Spark
    task), which must agree in everything (verdict, anomalies, exercised counts, contradictions, explanations and
    witness events, nothing left unchecked); and, unless `partial` is False, --partial (`assert_partial_agrees`,
    about 20 Spark jobs). Returns the Python checker and the counts of the parallel passes ({} without them)."""
    from ks_conformance.checker import check_events
    from ks_spark.validation.validator import validate
    from ks_spec.trace import write_trace

    write_trace(events, path)
    python = check_events(events)
    result = validate(spark, str(path), witnesses=8, everything=True)
    assert result.malformed is None
    assert result.not_computed == []
    assert result.verdict.value == python.verdict.value
    assert result.exercised == trace_exercised(python)
    assert sorted(result.all_anomalies or []) == sorted((a.name, a.seq, a.witness) for a in python.anomalies)
    assert sorted(result.problems) == sorted((p.seq, p.message) for p in python.problems)
    texts = {(a.name, a.seq, a.witness): a.explanation.text() for a in python.anomalies}
    for finding in result.findings:
        anomaly = finding.anomaly
        assert anomaly.explanation.text() == texts[(anomaly.name, anomaly.seq, anomaly.witness)]
        assert [e["seq"] for e in finding.events] == list(anomaly.witness)
    return python, assert_partial_agrees(spark, str(path), python) if partial else {}


def expected_not_computed(python: Checker, partial: bool = False) -> list[str]:
    """What validate-replay reports not computed: nothing, unless `--partial` skipped the one-task pass."""
    return parallel_kinds_not_computed(python) if partial else []


def expected_verdict(python: Checker, partial: bool = False) -> str:
    """The Spark verdict the Python checker's judgement implies: the same verdict, or with `--partial` invalid only
    on a MUST anomaly Spark computes in parallel, valid only when those are every kind that applies, else
    valid-partial."""
    if not partial:
        return python.verdict.value
    unchecked = parallel_kinds_not_computed(python)
    if any(a.name not in unchecked and a.level == "MUST" for a in python.anomalies):
        return "invalid"
    if python.problems:
        return "unknown"
    return "valid-partial" if unchecked else "valid"


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
