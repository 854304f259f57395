"""validate-replay and check-trace agree on every anomaly kind of spec/checking.md, and on random faulty traces.

For each anomaly kind the checker's own cases (tests/test_checker.py) hold a trace that shows it and a close valid
twin. validate-replay (the checker in one Spark task) must give each the same verdict, anomalies (name, seq,
witness), exercised counts, contradictions and explanations as check-trace, and validate-replay --shards 2 the one
task's result. The default run takes the first case of a sample of kinds across the stages (--shards 2 on the first);
the slow tier takes every case, and random reference traces with random faults injected.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from ks_reference.store import MemoryStore
from ks_reference.workloads import NAMED_WORKLOADS, run_named
from spark_support import assert_same_judgment, spark_fixture  # noqa: F401  (spark_fixture: `spark`)
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES

pytestmark = pytest.mark.spark

Event = dict[str, Any]
SAMPLE = (
    "key-reorder",  # per key
    "early-retry",  # at each event, timing
    "entry-split",  # end of op, buckets and batches (not judged in shards yet: one task, saying why)
    "stuck-key",  # at quiescence
    "unjustified-outcome",  # declared outcomes (protocol v2)
)
FIRST_CASES = [case for case in ALL_CASES if case[1] == 0 and case[0] in SAMPLE]


def judged_kinds(spark: Any, events: list[Event], path: Path, shards: int = 2) -> set[str]:
    """The three judges agree on one trace (`assert_same_judgment`; the shards left out if `shards` is 1); the kinds
    found."""
    python, _ = assert_same_judgment(spark, events, path, shards)
    return {a.name for a in python.anomalies}


def test_the_sample_spans_every_stage() -> None:
    from ks_conformance.rules import BY_NAME, Stage

    assert {BY_NAME[name].stage for name in SAMPLE} == {Stage.EVENT, Stage.OP, Stage.QUIESCENT}
    assert len(FIRST_CASES) == len(SAMPLE)


@pytest.mark.parametrize(("name", "number", "pair"), FIRST_CASES, ids=[c[0] for c in FIRST_CASES])
def test_a_sample_of_kinds_shown_and_their_twins_clean(
    spark: Any, tmp_path: Path, name: str, number: int, pair: Any
) -> None:
    # --shards 2 (a few seconds of Spark jobs a trace) on the first kind only; the slow tier on every case
    shards = 2 if name == SAMPLE[0] else 1
    bad, good = pair
    assert name in judged_kinds(spark, bad().events, tmp_path / "bad.parquet", shards)
    judged_kinds(spark, good().events, tmp_path / "good.jsonl", shards)


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
