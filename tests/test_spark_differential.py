"""The Spark validator and the Python checker report the same anomalies on the same traces.

Traces come from the reference dispatcher (named workloads) and from injecting faults of many kinds. Each trace is
judged three ways: check-trace; validate-replay by default (the checker in one Spark task: every anomaly, exercised
count, contradiction, explanation and verdict equal); and validate-replay --shards 2 (the checker in two shards of
keys, one Spark task each: the one task's result, or the reason the shards do not cover the trace).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from ks_conformance.checker import check_events
from ks_reference.store import MemoryStore
from ks_reference.workloads import NAMED_WORKLOADS, run_named
from ks_spec.trace import write_trace
from spark_support import (  # noqa: F401  (spark_fixture: `spark`)
    assert_same_judgment,
    spark_fixture,
    trace_exercised,
)
from spark_support.faults import COMBINED, INJECTIONS, inject_all

pytestmark = pytest.mark.spark

Event = dict[str, Any]


def _workload(name: str, size: int = 300, seed: int = 3) -> list[Event]:
    events: list[Event] = run_named(name, size=size, seed=seed, store=MemoryStore()).events
    return events


def _compare(spark: Any, events: list[Event], path: Path) -> dict[str, int]:
    """Judge `events` three ways and assert they agree (see the module doc); the counts."""
    return assert_same_judgment(spark, events, path)[1]


# the reference's workloads run in the slow tier but crash-restart, whose trace the crash group also injects into
@pytest.mark.parametrize(
    "workload",
    [
        pytest.param("steady", marks=pytest.mark.slow),
        pytest.param("churn", marks=pytest.mark.slow),
        "crash-restart",
        pytest.param("best-effort-saturation", marks=pytest.mark.slow),
    ],
)
def test_reference_workloads_agree(spark: Any, tmp_path: Path, workload: str) -> None:
    counts = _compare(spark, _workload(workload), tmp_path / f"{workload}.parquet")
    assert counts == {}  # the reference is correct: both checkers find nothing


DEFAULT_GROUPS = ("crash",)
"""The fault group judged three ways in the default suite (a restart's cursor faults); the others run in the slow
tier, churn's also here through the capacity test (each group costs ~15 s of Spark jobs)."""


@pytest.mark.parametrize(
    "group", [g if g in DEFAULT_GROUPS else pytest.param(g, marks=pytest.mark.slow) for g in sorted(COMBINED)]
)
def test_injected_faults_agree(spark: Any, tmp_path: Path, group: str) -> None:
    workload, targets = COMBINED[group]
    events = inject_all(_workload(workload), targets)
    counts = _compare(spark, events, tmp_path / f"{group}.parquet")
    for target in targets:
        assert target.split("/")[0] in counts, f"{target} was injected but not found"


@pytest.mark.slow
@pytest.mark.parametrize("workload", sorted(NAMED_WORKLOADS))
@pytest.mark.parametrize("seed", [1, 2, 5])
def test_reference_workloads_agree_at_size(spark: Any, tmp_path: Path, workload: str, seed: int) -> None:
    _compare(spark, _workload(workload, size=3000, seed=seed), tmp_path / "trace.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(INJECTIONS))
@pytest.mark.parametrize("seed", [3, 8])
def test_each_injected_fault_agrees(spark: Any, tmp_path: Path, target: str, seed: int) -> None:
    workload, inject = INJECTIONS[target]
    events = inject(_workload(workload, size=1000, seed=seed))
    if events is None:
        pytest.skip(f"seed {seed} of {workload} offers no place for {target}")
    counts = _compare(spark, events, tmp_path / "trace.jsonl")
    assert target.split("/")[0] in counts


def test_a_message_delivered_again_to_its_holder_still_counts_as_held(spark: Any, tmp_path: Path) -> None:
    """The consumer holds the message when its duplicate delivery arrives: capacity counts both, as the checker
    does (the retired parallel pass ordered the replaced delivery's end first and missed the overrun)."""
    from ks_conformance.builder import TraceBuilder

    trace = TraceBuilder(profile="owner", selector="ring").add("c1", capacity=2)
    trace.deliver(trace.publish("a"), "c1")
    trace.deliver(trace.publish("b"), "c1")
    trace.deliver(1, "c1", attempt=2)
    counts = _compare(spark, trace.events, tmp_path / "trace.parquet")
    assert counts.get("capacity-overrun") == 1


def test_the_one_task_reads_many_seq_ranges_in_order(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-task pass gets the trace as ranges of seq sorted apart and read in order. Here the trace is a folder
    of three files, the later seqs in the larger ones (Spark reads the largest split first), cut in ranges of 37
    rows: the checker must still see every event in seq order and judge as check-trace."""
    from ks_spark.validation import sequential
    from ks_spark.validation.validator import validate

    monkeypatch.setattr(sequential, "ROWS_PER_SORTED_PART", 37)
    group = next(name for name, (_, targets) in sorted(COMBINED.items()) if "duplicate" in targets)
    workload, targets = COMBINED[group]
    events = inject_all(_workload(workload), targets)
    folder = tmp_path / "trace"
    folder.mkdir()
    cuts = [0, len(events) // 7, len(events) // 3, len(events)]
    for number, (start, end) in enumerate(pairwise(cuts)):
        write_trace(events[start:end], folder / f"part-{number}.parquet")
    python = check_events(events)
    result = validate(spark, str(folder), witnesses=3, everything=True)
    assert result.malformed is None
    assert sorted(result.all_anomalies or []) == sorted((a.name, a.seq, a.witness) for a in python.anomalies)
    assert result.exercised == trace_exercised(python)
    assert result.verdict.value == python.verdict.value
