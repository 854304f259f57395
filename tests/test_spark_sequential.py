"""The one-task pass of validate-replay is the Python checker itself: fed Arrow batches, it judges as check-trace.

`ks_spark.validation.sequential.judge_function` is the body Spark runs in its single task; here it runs without Spark,
on the checker's own bad and good cases and on reference workloads, cut into small batches so that columns a
batch never fills are left out (as Spark's batches do). Its outcome must be exactly the checker's.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest
from ks_conformance.anomalies import listing_order
from ks_conformance.builder import TraceBuilder
from ks_conformance.checker import check_events
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spark.validation.sequential import SequentialOutcome, judge_function
from ks_spec.trace import arrow_schema
from test_checker import ALL_CASES

Event = dict[str, Any]
KINDS = sorted({kind for kind, _, _ in ALL_CASES})


def outcome_of(events: list[Event], kinds: list[str], limit: int | None = None) -> Any:
    schema = arrow_schema()
    table = pa.Table.from_pylist(events, schema=schema)
    run = judge_function(kinds, limit)
    (batch,) = list(run(iter(table.to_batches(max_chunksize=7))))
    outcome: SequentialOutcome = pickle.loads(batch.column(0)[0].as_py())
    return outcome


def assert_judged_as_check_trace(events: list[Event]) -> None:
    python = check_events(events)
    outcome = outcome_of(events, KINDS)
    assert [(a.name, a.seq, a.witness, a.explanation.text()) for a in outcome.anomalies] == [
        (a.name, a.seq, a.witness, a.explanation.text())
        for a in sorted(python.anomalies, key=listing_order)
        if a.name in KINDS
    ]
    assert outcome.problems == [(p.seq, p.message) for p in python.problems]
    assert outcome.exercised == {name: python.exercised[name] for name in KINDS if python.applies(name)}
    assert outcome.events == len(events)


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_the_checker_cases_are_judged_as_check_trace_judges_them(name: str, number: int, pair: Any) -> None:
    for recipe in pair:
        assert_judged_as_check_trace(recipe().events)


@pytest.mark.parametrize("workload", ["steady", "churn", "crash-restart", "best-effort-saturation", "poison-drop"])
def test_reference_workloads_are_judged_as_check_trace_judges_them(workload: str) -> None:
    assert_judged_as_check_trace(run_named(workload, size=300, seed=3, store=MemoryStore()).events)


def test_only_the_kinds_asked_for_come_back_counted_and_the_first_few_explained() -> None:
    trace = TraceBuilder(profile="strict", selector="ring")
    trace.add("c1")
    for number in range(5):
        offset = trace.publish(f"k{number}")
        trace.deliver(offset, "c1")
        trace.ack(offset, "c1")
    for offset in range(5):
        trace.deliver(offset, "c1", attempt=2)
    python = check_events(trace.events)
    duplicates = [a for a in python.anomalies if a.name == "duplicate"]
    assert len(duplicates) == 5
    outcome = outcome_of(trace.events, ["duplicate"], limit=2)
    assert outcome.counts == {"duplicate": 5}
    assert [a.seq for a in outcome.anomalies] == [a.seq for a in duplicates[:2]]
    assert {a.name for a in outcome.anomalies} == {"duplicate"}
