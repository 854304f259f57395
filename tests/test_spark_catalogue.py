"""validate-replay and check-trace agree on every anomaly kind of spec/checking.md, and on random faulty traces.

For each anomaly kind the checker's own cases (tests/test_checker.py) hold a trace that shows it and a close valid
twin. validate-replay (the checker in one Spark task) must give each the same verdict, anomalies (name, seq,
witness), exercised counts, contradictions and explanations as check-trace; validate-replay --partial (the parallel
passes) the same anomalies and explanations on the kinds it computes and the verdict that implies. The default run
takes the first case of a sample of kinds across the stages and passes (--partial on the kinds it computes); the slow
tier takes every case, and random reference traces with random faults injected.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from ks_reference.store import MemoryStore
from ks_reference.workloads import NAMED_WORKLOADS, run_named
from ks_spec.trace import write_trace
from spark_support import assert_same_judgment, spark_fixture  # noqa: F401  (spark_fixture: `spark`)
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES

pytestmark = pytest.mark.spark

Event = dict[str, Any]
SAMPLE = (
    "key-reorder",  # per key, parallel
    "early-retry",  # at each event, timing, one task
    "entry-split",  # end of op, buckets and batches (capacity and the window in the one task too)
    "stuck-key",  # at quiescence, parallel
    "unjustified-outcome",  # declared outcomes (protocol v2): every kind in the one task
)
FIRST_CASES = [case for case in ALL_CASES if case[1] == 0 and case[0] in SAMPLE]


def judged_kinds(spark: Any, events: list[Event], path: Path, partial: bool = True) -> set[str]:
    """The three judges agree on one trace (`assert_same_judgment`; `--partial` left out if not `partial`); the
    kinds found."""
    python, _ = assert_same_judgment(spark, events, path, partial)
    return {a.name for a in python.anomalies}


def test_the_sample_spans_every_stage_and_both_passes() -> None:
    from ks_conformance.rules import BY_NAME, Stage
    from ks_spark.validation.catalogue import CHECKS

    assert {BY_NAME[name].stage for name in SAMPLE} == {Stage.EVENT, Stage.OP, Stage.QUIESCENT}
    parallel = {check.anomaly for check in CHECKS}
    assert set(SAMPLE) & parallel and set(SAMPLE) - parallel
    assert len(FIRST_CASES) == len(SAMPLE)


@pytest.mark.parametrize(("name", "number", "pair"), FIRST_CASES, ids=[c[0] for c in FIRST_CASES])
def test_a_sample_of_kinds_shown_and_their_twins_clean(
    spark: Any, tmp_path: Path, name: str, number: int, pair: Any
) -> None:
    from ks_spark.validation.catalogue import BY_NAME

    # --partial (about 6 s of Spark jobs a trace) only for the per-key kind, the one the sharded passes compute on
    # every key; tests/test_spark_partial.py judges a clean and a faulty trace with it, the slow tier every case
    parallel = name in BY_NAME and name == "key-reorder"
    bad, good = pair
    assert name in judged_kinds(spark, bad().events, tmp_path / "bad.parquet", parallel)
    judged_kinds(spark, good().events, tmp_path / "good.jsonl", parallel)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_every_kind_shown_and_its_twin_clean(spark: Any, tmp_path: Path, name: str, number: int, pair: Any) -> None:
    bad, good = pair
    assert name in judged_kinds(spark, bad().events, tmp_path / "bad.parquet")
    judged_kinds(spark, good().events, tmp_path / "good.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200))
def test_random_reference_traces_with_random_faults(spark: Any, tmp_path: Path, seed: int) -> None:
    """A random workload, size and seed, and up to three faults drawn from every injector that finds a place."""
    rng = random.Random(seed)
    workload = rng.choice(sorted(NAMED_WORKLOADS))
    events = run_named(workload, size=rng.randint(50, 400), seed=seed, store=MemoryStore()).events
    for target in rng.sample(sorted(INJECTIONS), k=rng.randint(0, 3)):
        mutated = INJECTIONS[target][1](events)
        events = mutated if mutated is not None else events
    assert_same_judgment(spark, events, tmp_path / ("trace.parquet" if seed % 2 else "trace.jsonl"))


def test_with_partial_a_trace_the_parallel_passes_cannot_judge_is_unknown_with_the_reason(
    spark: Any, tmp_path: Path
) -> None:
    from ks_spark.validation.validator import validate

    bad, _ = dict((case[0], case[2]) for case in FIRST_CASES)["unjustified-outcome"]
    write_trace(bad().events, tmp_path / "trace.jsonl")
    result = validate(spark, str(tmp_path / "trace.jsonl"), partial=True)
    assert result.verdict.value == "unknown" and result.counts == {}
    ((seq, reason),) = result.problems
    assert seq == 0 and "without --partial" in reason


def test_with_partial_a_trace_with_spec_1_7_events_is_unknown_with_the_reason(spark: Any, tmp_path: Path) -> None:
    """The parallel passes predate the zombie ops (KS-ACK-3): on such a trace they named the finding
    stale-ack-accepted where the checker says zombie-accepted, so they refuse it instead of judging it wrong."""
    from ks_spark.validation.validator import validate

    bad, _ = dict((case[0], case[2]) for case in ALL_CASES if case[1] == 0)["zombie-accepted"]
    events = bad().events
    assert any(event["event"] in ("zombie_ack", "zombie_nack") for event in events)
    write_trace(events, tmp_path / "trace.jsonl")
    result = validate(spark, str(tmp_path / "trace.jsonl"), partial=True)
    assert result.verdict.value == "unknown" and result.counts == {}
    ((seq, reason),) = result.problems
    assert seq == 0 and "zombie_" in reason and "without --partial" in reason
