"""validate-replay's sharded pass (ks_spark.validation.sharded) gives check-trace's judgment.

Each Spark stage's body is a plain function over Arrow batches: here they run without Spark, wired as Spark wires
them (op starts in any order; the trace routed from splits of consecutive seqs given in no order, two in one task,
cut into small batches; each shard's pieces in seq order, several shards in one task), on the checker's bad and good
cases, the injected faults and random faulty traces. The outcome must be the one-process checker's, or the trace
must be left to the one-task pass where the in-memory sharding leaves it too. Real Spark runs are in
tests/test_spark_validator.py.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Sequence
from typing import Any

import ks_spark.validation.sharded as sharded
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from ks_conformance.anomalies import listing_order
from ks_conformance.checker import check_events
from ks_conformance.sharding.facts import unsharded_config
from ks_conformance.sharding.merge import Unsharded, judge_in_shards
from ks_conformance.sharding.run import OP_STARTS, OpTable
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spark.validation.sharded import (
    FIRST,
    OP_SCHEMA,
    PART,
    SHARD,
    OpIndex,
    Prediction,
    ShardedOutcome,
    judge_function,
    op_index,
    op_rows_function,
    outcome,
    predict_function,
    predicted_changes,
    unpublished_acks,
)
from ks_spec.trace import SequenceRules, arrow_schema
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES
from test_sharding import WORKLOADS, random_faulty_traces

Event = dict[str, Any]
KINDS = sorted({kind for kind, _, _ in ALL_CASES})


def stages(events: Sequence[Event], shards: int, ranges: int = 3, batch: int = 7) -> ShardedOutcome | Unsharded:
    """The sharded pass's stages as Spark runs them, in this process."""
    table = pa.Table.from_pylist(list(events), schema=arrow_schema())
    config = json.loads(str(events[0]["detail"]))["config"]
    why = unsharded_config(config)
    if why is not None:
        return Unsharded(why)
    starts = table.filter(pc.is_in(table.column("event"), pa.array(OP_STARTS))).select(["seq", "event", "key"])
    pieces = list(op_rows_function(config, shards)(iter(starts.to_batches(max_chunksize=5))))
    index = op_index(pa.Table.from_batches(pieces[::-1], schema=OP_SCHEMA), len(events))  # (any order)
    if isinstance(index, Unsharded):
        return index
    acks = [(e["seq"], e["offset"]) for e in events if e.get("reason") == "unknown-offset" and "offset" in e]
    unknown = unpublished_acks(index, acks)
    if unknown is not None:
        return unknown
    route = sharded.route_function(index, config, shards, [number * 10 for number in range(shards)])
    # Splits of consecutive seqs, in no order, two of them in one task (a partition packing several files).
    size = -(-len(events) // ranges)
    splits = [table.slice(low, size) for low in range(0, len(events), size)][::-1]
    tasks = [pa.concat_tables(splits[:2]), *splits[2:]]
    routed = [routed for task in tasks for routed in route(iter(task.to_batches(max_chunksize=batch)))]
    pieces = pa.Table.from_batches(routed).sort_by([(SHARD, "ascending"), (FIRST, "ascending")])
    assert set(pieces.column(PART).to_pylist()) <= {number * 10 for number in range(shards)}
    # Two tasks: the first shard alone, the others together (a task may hold several shards).
    first = pieces.filter(pc.equal(pieces.column(SHARD), 0))
    others = pieces.filter(pc.not_equal(pieces.column(SHARD), 0))
    tasks = [task.to_batches(max_chunksize=3) for task in (first, others)]
    predictions: dict[int, Prediction] = {
        number: pickle.loads(row["payload"])
        for task in tasks
        for out in predict_function()(iter(task))
        for number, row in zip(out.column("shard").to_pylist(), out.to_pylist(), strict=True)
    }
    changes = predicted_changes(predictions, shards)
    if isinstance(changes, Unsharded):
        return changes
    judgments = {
        number: pickle.loads(row["payload"])
        for task in tasks
        for out in judge_function(index.ops, changes)(iter(task))
        for number, row in zip(out.column("shard").to_pylist(), out.to_pylist(), strict=True)
    }
    return sharded.outcome(predictions, judgments, len(events), KINDS, None)


def judged_alike(events: Sequence[Event], shards: int) -> bool:
    """Assert the sharded pass judges `events` as one process does; True if it sharded them. When it does not, the
    in-memory sharding does not either (or the trace is one the checker finds problems in)."""
    judged = stages(events, shards)
    if isinstance(judged, Unsharded):
        in_memory = judge_in_shards(events, shards)
        python = check_events(events)
        assert isinstance(in_memory, Unsharded) or python.problems, judged.reason
        return False
    python = check_events(events)
    assert not python.problems
    assert [(*listing_order(a), repr(a.details)) for a in judged.anomalies] == [
        (*listing_order(a), repr(a.details)) for a in sorted(python.anomalies, key=listing_order) if a.name in KINDS
    ]
    found = Counter(a.name for a in python.anomalies if a.name in KINDS)
    assert judged.counts == dict(found)
    assert judged.exercised == {name: python.exercised[name] for name in KINDS if python.applies(name)}
    return True


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_checker_cases_are_judged_as_check_trace_judges_them(name: str, number: int, pair: Any) -> None:
    for recipe in pair:
        judged_alike(recipe().events, 3)


@pytest.mark.parametrize("target", sorted(INJECTIONS))
def test_injected_faults_are_judged_as_check_trace_judges_them(target: str) -> None:
    workload, inject = INJECTIONS[target]
    events = run_named(workload, size=300, seed=3, store=MemoryStore()).events
    assert judged_alike(inject(events), 2) or target in UNSHARDED_TARGETS


UNSHARDED_TARGETS: set[str] = set()


def well_formed(events: Sequence[Event]) -> bool:
    """Whether the format pass lets the trace through (it stops a malformed one before any judging)."""
    rules = SequenceRules()
    return all(rules.check(event) is None for event in events)


@pytest.mark.parametrize("seed", range(6))
def test_random_faulty_traces_are_judged_as_check_trace_judges_them(seed: int) -> None:
    sharded = 0
    for faulty, shards in random_faulty_traces(seed):
        if well_formed(faulty):
            sharded += judged_alike(faulty, shards)
    assert sharded >= 2


def test_most_checker_cases_shard() -> None:
    """The pass shards the cases the in-memory sharding shards (not a test that only ever falls back)."""
    sharded = sum(judged_alike(recipe().events, 2) for _, _, pair in ALL_CASES for recipe in pair)
    in_memory = sum(
        not isinstance(judge_in_shards(recipe().events, 2), Unsharded) for _, _, pair in ALL_CASES for recipe in pair
    )
    assert sharded == in_memory > 0


def differing_cases() -> int:
    """How many of the checker's cases the sharded pass judges otherwise than the checker."""
    differs = 0
    for _, _, pair in ALL_CASES:
        for recipe in pair:
            try:
                judged_alike(recipe().events, 3)
            except AssertionError:
                differs += 1
    return differs


def test_a_router_that_gives_the_subscriptions_events_to_one_shard_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: a router that sends the events naming no key (joins, leaves, ticks) to the first shard only."""
    original = sharded.row_shards

    def first_only(*args: Any) -> np.ndarray:
        shard = original(*args)
        shard[shard == -1] = 0
        return shard

    monkeypatch.setattr(sharded, "row_shards", first_only)
    assert differing_cases() > 0


def test_a_router_that_gives_an_ops_first_event_to_the_op_before_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: an op index off by one at each op's first event (the shards then close ops at the wrong events)."""
    original = sharded.route_function

    def shifted(index: OpIndex, *args: Any) -> Any:
        ops = index.ops
        late = OpTable(ops.kinds, ops.codes, ops.starts + 1, ops.ends)  # (each op's first event: the op before's)
        return original(OpIndex(late, index.shard_of_offset, index.publish_seqs), *args)

    monkeypatch.setattr(sharded, "route_function", shifted)
    assert differing_cases() > 0


def test_an_ack_of_an_offset_not_yet_published_leaves_the_trace_to_one_task() -> None:
    events = run_named("steady", size=40, seed=3, store=MemoryStore()).events
    config = json.loads(str(events[0]["detail"]))["config"]
    starts = pa.Table.from_pylist(events, schema=arrow_schema())
    pieces = list(
        op_rows_function(config, 2)(
            iter(starts.filter(pc.is_in(starts.column("event"), pa.array(OP_STARTS))).to_batches())
        )
    )
    index = op_index(pa.Table.from_batches(pieces, schema=OP_SCHEMA), len(events))
    assert not isinstance(index, Unsharded)
    last_publish = max(e["seq"] for e in events if e["event"] == "publish")
    published = sum(e["event"] == "publish" for e in events)
    assert unpublished_acks(index, [(last_publish + 1, published - 1)]) is None
    assert isinstance(unpublished_acks(index, [(last_publish, published - 1)]), Unsharded)
    assert isinstance(unpublished_acks(index, [(last_publish + 1, published)]), Unsharded)


def test_a_shard_result_lost_on_the_way_to_the_driver_is_never_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark's collect can lose rows when the driver runs out of memory: a missing shard leaves the trace to one
    task, never a judgment without that shard's keys."""
    events = run_named("churn", size=120, seed=4, store=MemoryStore()).events
    assert not isinstance(stages(events, 2), Unsharded)
    captured: dict[str, Any] = {}
    original = sharded.outcome

    def spy(predictions: dict[int, Prediction], judgments: dict[int, Any], *args: Any) -> Any:
        captured.update(predictions=predictions, judgments=judgments)
        return original(predictions, judgments, *args)

    monkeypatch.setattr(sharded, "outcome", spy)
    stages(events, 2)
    predictions, judgments = captured["predictions"], captured["judgments"]
    assert predicted_changes({0: predictions[0]}, 2) == Unsharded(sharded.LOST)
    assert outcome(predictions, {0: judgments[0]}, len(events), KINDS, None) == Unsharded(sharded.LOST)


def test_a_router_that_hides_the_tick_phases_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: a router that shows no other shard's row for its tick phase (the shards then disagree on the phases of
    KS-GEN-7). The checker's cases do not need those rows; reference runs do."""
    monkeypatch.setattr(sharded, "shown_for_phases", lambda batch, *_: np.zeros(batch.num_rows, dtype=bool))
    differs = 0
    for workload in WORKLOADS:
        events = run_named(workload, size=120, seed=5, store=MemoryStore()).events
        try:
            judged_alike(events, 3)
        except AssertionError:
            differs += 1
    assert differs > 0


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--shards", "0"], "--shards: must be 1 or more"), (["--shards", "2", "--partial"], "--shards with --partial")],
)
def test_bad_shard_options_are_a_usage_error_before_spark_starts(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from keyshared.cli import main

    assert main(["validate-replay", "trace.parquet", *options]) == 64
    assert message in capsys.readouterr().err
