"""`check-trace --jobs N` on Parquet traces (ks_conformance.sharding.run): its own column-wise router, the ledger
predicted in each shard, and real worker processes give the one-process judgment (see tests/test_sharding.py for
the judgment itself, proven on events in memory)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ks_conformance.sharding.ops as ops_module
import pyarrow.parquet as pq
import pytest
from ks_conformance.anomalies import verdict_of
from ks_conformance.sharding.merge import Unsharded, anomaly_order, judge_in_shards
from ks_conformance.sharding.run import judge_in_shards_with
from ks_conformance.tracefile import check_trace
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spec.trace import SequenceRules, to_table, write_jsonl, write_parquet
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES
from test_sharding import whole

Event = dict[str, Any]


def whole_file(path: Path) -> tuple[list[tuple[Any, ...]], dict[str, int], str]:
    result = check_trace(path)
    anomalies = [(*anomaly_order(a), repr(a.details)) for a in sorted(result.anomalies, key=anomaly_order)]
    return anomalies, result.exercised, result.verdict.value


def parquet_judged_alike(events: Sequence[Event], tmp_path: Path, shards: int, batch: int) -> bool:
    """Assert the Parquet path's sharded judgment (batches of `batch` rows) equals one process's; True if it sharded.
    It shards exactly the traces the in-memory path shards (the same prediction, another router)."""
    path = tmp_path / "trace.parquet"
    write_parquet(events, path)
    judged = judge_in_shards_with(path, shards, map, batch)
    in_memory = judge_in_shards(events, shards)
    if isinstance(judged, Unsharded):
        assert isinstance(in_memory, Unsharded) or whole(events)[2], judged.reason
        return False
    assert not isinstance(in_memory, Unsharded), in_memory
    anomalies = [(*anomaly_order(a), repr(a.details)) for a in judged.anomalies]
    verdict = verdict_of(judged.anomalies, undecidable=False).value
    assert (anomalies, judged.exercised, verdict) == whole_file(path)
    assert judged.messages == sum(event["event"] == "publish" for event in events)
    return True


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_checker_cases_are_judged_alike_from_parquet(name: str, number: int, pair: Any, tmp_path: Path) -> None:
    for recipe in pair:
        parquet_judged_alike(recipe().events, tmp_path, 3, batch=5)


@pytest.mark.parametrize("target", sorted(INJECTIONS))
def test_injected_faults_are_judged_alike_from_parquet(target: str, tmp_path: Path) -> None:
    workload, inject = INJECTIONS[target]
    events = run_named(workload, size=300, seed=3, store=MemoryStore()).events
    mutated = inject(events)
    assert mutated is not None
    for shards, batch in ((2, 64), (7, 1000)):
        parquet_judged_alike(mutated, tmp_path, shards, batch)


@pytest.mark.parametrize("target", ["capacity-overrun", "lost", "cursor-skip/holes", "stuck-key"])
def test_the_ops_read_a_few_at_a_time(target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard holds the ops a chunk at a time and drops those it has passed (memory flat in the trace): with
    chunks of three ops, every op's end is read across chunk edges and after drops, and the judgment is still the
    whole trace's."""
    monkeypatch.setattr(ops_module, "TRIM", 3)
    workload, inject = INJECTIONS[target]
    events = inject(run_named(workload, size=300, seed=9, store=MemoryStore()).events)
    assert events is not None
    assert parquet_judged_alike(events, tmp_path, 3, batch=16)


def test_the_router_screen_accepts_no_trace_the_sequence_rules_refuse(tmp_path: Path) -> None:
    """The router screens seqs, ticks and offsets column by column; a trace it lets through must keep every rule of
    spec/trace.md section 2 (else the shards would judge a trace the one-process reader calls malformed)."""
    rng = random.Random(7)
    refused = 0
    for _ in range(40):
        events = [dict(e) for e in run_named("churn", size=40, seed=rng.randrange(100), store=MemoryStore()).events]
        at = rng.randrange(1, len(events))
        field, change = rng.choice((("seq", 1), ("seq", -1), ("tick", 1), ("tick", -1), ("offset", 1), ("offset", 7)))
        if field not in events[at]:
            continue
        events[at][field] += change
        path = tmp_path / "trace.parquet"
        write_parquet(events, path)
        rules = SequenceRules()
        breaks = any(rules.check(event) is not None for event in events)
        judged = judge_in_shards_with(path, 2, map, 16)
        refused += breaks
        if breaks:
            assert isinstance(judged, Unsharded)
    assert refused >= 10


def test_check_trace_with_jobs_judges_in_processes(tmp_path: Path) -> None:
    """The real thing: `check_trace(jobs=2)` runs two worker processes and agrees with one process, on Parquet and
    on JSON lines (converted by the workers, ks_conformance.sharding.jsonl)."""
    events = INJECTIONS["capacity-overrun"][1](run_named("churn", size=400, seed=5, store=MemoryStore()).events)
    assert events is not None
    path = tmp_path / "trace.parquet"
    write_parquet(events, path)
    sharded = check_trace(path, jobs=2)
    assert sharded.judged == "in 2 shards of keys"
    anomalies = [(*anomaly_order(a), repr(a.details)) for a in sharded.anomalies]
    assert anomalies
    assert (anomalies, sharded.exercised, sharded.verdict.value) == whole_file(path)
    lines = tmp_path / "trace.jsonl"
    write_jsonl(events, lines)
    from_lines = check_trace(lines, jobs=2)
    assert from_lines.judged == "in 2 shards of keys" and "convert" in from_lines.seconds
    anomalies = [(*anomaly_order(a), repr(a.details)) for a in from_lines.anomalies]
    assert (anomalies, from_lines.exercised, from_lines.verdict.value) == whole_file(lines) == whole_file(path)


def _folder(events: Sequence[Event], folder: Path, cuts: Sequence[int]) -> Path:
    """The trace as a folder of Parquet files cut at `cuts` (as Spark writes one): names in order, the second file
    without the columns none of its rows fills."""
    folder.mkdir()
    edges = [0, *cuts, len(events)]
    for number, (low, high) in enumerate(itertools.pairwise(edges)):
        table = to_table(events[low:high])
        if number == 1:
            table = table.drop_columns(
                [name for name in table.column_names if table.column(name).null_count == len(table)]
            )
        pq.write_table(table, folder / f"part-{number:05d}.parquet")
    return folder


def test_a_folder_of_parquet_files_is_judged_in_shards(tmp_path: Path) -> None:
    """A trace Spark wrote as a folder of part files is routed and judged across its files, in name order: the
    judgment is one process's of the folder, and the single file's; a seq gap between two files leaves the folder
    to one process, which names the file and line."""
    events = INJECTIONS["capacity-overrun"][1](run_named("churn", size=400, seed=5, store=MemoryStore()).events)
    assert events is not None
    folder = _folder(events, tmp_path / "trace", [len(events) // 3, len(events) // 3 + 7])
    assert len(pq.ParquetFile(folder / "part-00001.parquet").schema_arrow) < len(to_table(events[:1]).schema)
    single = tmp_path / "trace.parquet"
    write_parquet(events, single)
    for shards, batch in ((2, 64), (3, 5)):
        judged = judge_in_shards_with(folder, shards, map, batch)
        assert not isinstance(judged, Unsharded), judged.reason
        anomalies = [(*anomaly_order(a), repr(a.details)) for a in judged.anomalies]
        verdict = verdict_of(judged.anomalies, undecidable=False).value
        assert anomalies and (anomalies, judged.exercised, verdict) == whole_file(folder) == whole_file(single)
    assert check_trace(folder, jobs=2).judged == "in 2 shards of keys"
    gap = _folder([*events[:100], *events[101:]], tmp_path / "gap", [100])
    result = check_trace(gap, jobs=2)
    assert result.judged.startswith("in one process: ") and result.verdict.value == "unknown"
    assert result.malformed is not None and "part-00001.parquet" in result.malformed


def test_an_ignored_answer_of_an_unpublished_offset_is_judged_whole_saying_so(tmp_path: Path) -> None:
    """An `ack_ignored` of an unknown offset (legal: spec/trace.md section 2) names no message to route it by: the
    Parquet router and the in-memory one both leave the trace to one process, saying why in the same words."""
    from ks_conformance.sharding.facts import UNPUBLISHED_ANSWER
    from spark_support.faults import renumber

    events = [dict(event) for event in run_named("steady", size=30, seed=3, store=MemoryStore()).events]
    at = next(at for at, event in enumerate(events) if event["event"] == "ack")
    stray = {**events[at], "event": "ack_ignored", "offset": 999, "reason": "unknown-offset"}
    stray.pop("key", None)
    events.insert(at, stray)
    events = renumber(events)
    assert not whole(events)[2]  # well formed
    path = tmp_path / "trace.parquet"
    write_parquet(events, path)
    for judged in (judge_in_shards_with(path, 2, map, 64), judge_in_shards(events, 2)):
        assert isinstance(judged, Unsharded) and judged.reason.startswith(UNPUBLISHED_ANSWER), judged
