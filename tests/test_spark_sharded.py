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
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import ks_conformance.sharding.run as run_module
import ks_spark.validation.sharded as sharded
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from ks_conformance.anomalies import listing_order
from ks_conformance.checker import check_events
from ks_conformance.sharding.facts import Prediction, unsharded_config
from ks_conformance.sharding.merge import Unsharded, judge_in_shards
from ks_conformance.sharding.ops import OpWindow, continued
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spark.validation.sharded import (
    ORDER,
    PART,
    RECORDS,
    SHARD,
    Judged,
    ShardedOutcome,
    judge_function,
    offsets_function,
    outcome,
    predict_function,
    shard_of_offsets,
    unpublished_acks,
)
from ks_spec.trace import SequenceRules, arrow_schema
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES
from test_sharding import WORKLOADS, perturbed, random_faulty_traces

Event = dict[str, Any]
KINDS = sorted({kind for kind, _, _ in ALL_CASES})


@pytest.fixture(autouse=True)
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of changes of six seqs: every trace here spans many, and chunks of changes end inside runs of them."""
    monkeypatch.setattr(sharded, "WINDOW", 6)


def shuffled(batches: Sequence[pa.RecordBatch], shards: int) -> list[list[pa.RecordBatch]]:
    """Spark's repartition and sort: each shard's records in ORDER, in two tasks (the first shard alone, the others
    together: a task may hold several shards), cut into small batches."""
    table = pa.Table.from_batches(batches, schema=RECORDS).sort_by([(name, "ascending") for name in ORDER])
    assert set(table.column(PART).to_pylist()) <= {number * 10 for number in range(shards)}
    first = table.filter(pc.equal(table.column(SHARD), 0))
    others = table.filter(pc.not_equal(table.column(SHARD), 0))
    return [task.to_batches(max_chunksize=3) for task in (first, others)]


def stages(events: Sequence[Event], shards: int, ranges: int = 3, batch: int = 7) -> ShardedOutcome | Unsharded:
    """The sharded pass's stages as Spark runs them, in this process."""
    table = pa.Table.from_pylist(list(events), schema=arrow_schema())
    config = json.loads(str(events[0]["detail"]))["config"]
    why = unsharded_config(config)
    if why is not None:
        return Unsharded(why)
    acks = [(e["seq"], e["offset"]) for e in events if e.get("reason") == "unknown-offset" and "offset" in e]
    published_at = {e["offset"]: e["seq"] for e in events if e["event"] == "publish"}
    unknown = unpublished_acks(acks, published_at)
    if unknown is not None:
        return unknown
    publishes = table.filter(pc.equal(table.column("event"), "publish")).select(["offset", "key"])
    runs = list(offsets_function(config, shards)(iter(publishes.to_batches(max_chunksize=5))))
    shard_of_offset = shard_of_offsets(
        pa.Table.from_batches(runs[::-1], schema=sharded.OFFSETS), len(published_at)
    )  # (any order)
    if isinstance(shard_of_offset, Unsharded):
        return shard_of_offset
    parts = [number * 10 for number in range(shards)]
    route = sharded.route_function(shard_of_offset, config, shards, parts)
    # Splits of consecutive seqs, in no order, two of them in one task (a partition packing several files).
    size = -(-len(events) // ranges)
    splits = [table.slice(low, size) for low in range(0, len(events), size)][::-1]
    tasks = [pa.concat_tables(splits[:2]), *splits[2:]]
    routed = [routed for task in tasks for routed in route(iter(task.to_batches(max_chunksize=batch)))]
    predict = predict_function(shards, parts, len(events))
    predicted = [out for task in shuffled(routed, shards) for out in predict(iter(task))]
    judge = judge_function(shards, len(events))
    results: dict[int, Judged] = {
        number: pickle.loads(row["payload"])
        for task in shuffled(predicted, shards)
        for out in judge(iter(task))
        for number, row in zip(out.column("shard").to_pylist(), out.to_pylist(), strict=True)
    }
    return sharded.outcome(results, shards, len(events), KINDS, None)


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


@pytest.mark.parametrize("workload", ["hot-key-slow-consumer", "crash-restart"])
def test_parked_messages_are_judged_as_check_trace_judges_them(workload: str) -> None:
    """With `park_after` set, the ledger reads each publish's key from the pieces (its parking spans windows of
    changes); faulty versions included."""
    events = run_named(workload, size=200, seed=3, overrides={"park_after": 2}, store=MemoryStore()).events
    assert judged_alike(events, 3)
    rng = random.Random(workload)
    assert sum(judged_alike(faulty, 2) for faulty in (perturbed(rng, events) for _ in range(6)) if well_formed(faulty))


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


def test_ops_whose_first_event_is_counted_in_the_op_before_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: an op index off by one at each op's first event (the shards then close ops at the wrong events)."""

    def late(demux: sharded.Demux, events: int) -> OpWindow:
        shifted = ((through, seqs + 1, codes) for through, seqs, codes in demux.op_starts())
        return OpWindow(continued(shifted, run_module.KINDS), events)

    monkeypatch.setattr(sharded, "op_window", late)
    assert differing_cases() > 0


def test_a_window_of_the_other_shards_changes_skipped_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: a judge task that skips the other shards' changes of the second window (its shards then read wrong
    facts that span keys)."""
    original = sharded.Demux.foreign

    def lossy(self: sharded.Demux, shard: int) -> Any:
        for index, chunk in enumerate(original(self, shard)):
            yield chunk[:1] if index == 1 else chunk

    monkeypatch.setattr(sharded.Demux, "foreign", lossy)
    assert differing_cases() > 0


def test_an_ack_of_an_offset_not_yet_published_leaves_the_trace_to_one_task() -> None:
    events = run_named("steady", size=40, seed=3, store=MemoryStore()).events
    published_at = {e["offset"]: e["seq"] for e in events if e["event"] == "publish"}
    last, seq = max(published_at.items())
    assert unpublished_acks([(seq + 1, last)], published_at) is None
    assert isinstance(unpublished_acks([(seq, last)], published_at), Unsharded)
    assert isinstance(unpublished_acks([(seq + 1, last + 1)], published_at), Unsharded)
    assert isinstance(unpublished_acks([(seq + 1, 0)] * (sharded.UNKNOWN_ACKS + 1), published_at), Unsharded)


def test_a_message_whose_shard_is_missing_leaves_the_trace_to_one_task() -> None:
    """The driver collects each message's shard: runs that miss one, or overlap, are never used."""
    events = run_named("steady", size=40, seed=3, store=MemoryStore()).events
    config = json.loads(str(events[0]["detail"]))["config"]
    table = pa.Table.from_pylist(events, schema=arrow_schema())
    publishes = table.filter(pc.equal(table.column("event"), "publish")).select(["offset", "key"])
    runs = pa.Table.from_batches(
        list(offsets_function(config, 2)(iter(publishes.to_batches(max_chunksize=4)))), schema=sharded.OFFSETS
    )
    published = publishes.num_rows
    assert not isinstance(shard_of_offsets(runs, published), Unsharded)
    assert shard_of_offsets(runs.slice(1), published) == Unsharded(sharded.LOST)
    assert shard_of_offsets(pa.concat_tables([runs, runs.slice(0, 1)]), published) == Unsharded(sharded.LOST)


def test_a_shard_result_lost_on_the_way_to_the_driver_is_never_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark's collect can lose rows when the driver runs out of memory: a missing shard leaves the trace to one
    task, never a judgment without that shard's keys."""
    events = run_named("churn", size=120, seed=4, store=MemoryStore()).events
    captured: dict[str, Any] = {}
    original = sharded.outcome

    def spy(results: dict[int, Judged], *args: Any) -> Any:
        captured.update(results=results)
        return original(results, *args)

    monkeypatch.setattr(sharded, "outcome", spy)
    assert not isinstance(stages(events, 2), Unsharded)
    results = captured["results"]
    assert outcome({0: results[0]}, 2, len(events), KINDS, None) == Unsharded(sharded.LOST)
    failed = {**results, 1: Judged(None, "why", None)}
    assert outcome(failed, 2, len(events), KINDS, None) == Unsharded("why")


def test_a_failed_prediction_reaches_every_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard whose ledger pass gives up tells every shard's judge task, which says why instead of judging."""
    events = run_named("churn", size=120, seed=4, store=MemoryStore()).events
    monkeypatch.setattr(sharded, "ledger_stream", _giving_up)
    assert stages(events, 3) == Unsharded("gave up")


def _giving_up(rows: Any, detail: Any, changes: Any) -> Any:
    yield from ()
    return Prediction([], "gave up")


def test_a_router_that_hides_the_tick_phases_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: a router that shows no other shard's row for its tick phase (the shards then disagree on the phases of
    KS-GEN-7). The checker's cases do not need those rows; reference runs do."""
    monkeypatch.setattr(sharded, "shown_rows", lambda batch, *_: np.zeros(batch.num_rows, dtype=bool))
    differs = 0
    for workload in WORKLOADS:
        events = run_named(workload, size=120, seed=5, store=MemoryStore()).events
        try:
            judged_alike(events, 3)
        except AssertionError:
            differs += 1
    assert differs > 0


def test_bad_shard_options_are_a_usage_error_before_spark_starts(capsys: pytest.CaptureFixture[str]) -> None:
    from keyshared.cli import main

    assert main(["validate-replay", "trace.parquet", "--shards", "0"]) == 64
    assert "--shards: must be 1 or more" in capsys.readouterr().err


def test_the_retired_partial_screen_is_an_unknown_option(capsys: pytest.CaptureFixture[str]) -> None:
    """--partial's parallel passes were a second implementation of 16 kinds: retired, the option is unknown."""
    from keyshared.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["validate-replay", "trace.parquet", "--partial"])
    assert stopped.value.code == 64
    assert "unrecognized arguments: --partial" in capsys.readouterr().err


def test_list_checks_names_every_trace_kind_with_its_requirement_and_scope(capsys: pytest.CaptureFixture[str]) -> None:
    """--list-checks reads the rule registry: every kind judged from a trace, once, with its rule's requirement and
    scope (and no Spark started)."""
    from keyshared.cli import main
    from ks_conformance.rules import RULES, Stage

    assert main(["validate-replay", "--list-checks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    kinds = [rule for rule in RULES if rule.stage is not Stage.HARNESS]
    assert [line.split() for line in lines[:-1]] == [[r.name, r.requirement, r.scope.value] for r in kinds]
    assert lines[-1].startswith(f"all {len(kinds)} kinds judged by the Python checker")
