"""The one-task pass: the Python checker itself, run in one Spark task over the whole trace in seq order.

By default, and where the shards of keys (sharded.py, `--shards N`) do not cover a trace, validate-replay judges
every kind here: `ks_conformance.checker.Checker` (the very code `check-trace`
runs, so the rules have one implementation) fed every event in seq order inside a single task. The trace is never
collected to the driver: only the anomalies of the kinds asked for, the exercised counts and the contradictions
come back. The checker streams (spec/checking.md section 1, what a checker may forget), so the task's memory
follows the trace's live state; it judges at one core's speed (benchmarks/README.md).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
from ks_conformance.anomalies import Anomaly, listing_order
from ks_spec.trace import batch_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

OUTPUT_DDL = "payload binary"


@dataclass
class SequentialOutcome:
    """What the Python checker found in the whole trace, for the kinds asked for."""

    counts: dict[str, int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)
    """Every anomaly of those kinds when all were asked for; else the first `limit` of each kind."""
    exercised: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)
    events: int = 0


def chosen_anomalies(
    anomalies: Iterable[Anomaly], kinds: Collection[str], limit: int | None
) -> tuple[dict[str, int], list[Anomaly]]:
    """How many anomalies of each kind in `kinds`, and the first `limit` of each (all: None) in listing order (the
    same whether the trace was judged whole or in shards)."""
    wanted = frozenset(kinds)
    counts: dict[str, int] = {}
    chosen: list[Anomaly] = []
    for anomaly in sorted((a for a in anomalies if a.name in wanted), key=listing_order):
        seen = counts.get(anomaly.name, 0)
        counts[anomaly.name] = seen + 1
        if limit is None or seen < limit:
            chosen.append(anomaly)
    return counts, chosen


def judge_function(
    kinds: Collection[str], limit: int | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow body: every event in seq order into one Checker; one row out, the pickled outcome."""
    wanted = frozenset(kinds)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ks_conformance.checker import Checker

        checker = Checker()
        events = 0
        for batch in batches:
            for event in batch_events(batch):
                checker.feed(event)
                events += 1
        checker.finish()
        checker.messages.close()
        outcome = SequentialOutcome(events=events, problems=[(p.seq, p.message) for p in checker.problems])
        outcome.counts, outcome.anomalies = chosen_anomalies(checker.anomalies, wanted, limit)
        outcome.exercised = {name: checker.exercised[name] for name in wanted if checker.applies(name)}
        yield pa.RecordBatch.from_pydict(
            {"payload": [pickle.dumps(outcome)]}, schema=pa.schema([("payload", pa.binary())])
        )

    return run


ROWS_PER_SORTED_PART = 500_000
"""Rows per range of seq sorted apart: each range's sort stays in memory inside the one task."""


def sequential_pass(
    events: DataFrame,
    columns: list[str],
    kinds: Collection[str],
    limit: int | None,
    rows: int = 0,
) -> SequentialOutcome:
    """Run the Python checker over `events` (the trace's columns, about `rows` of them) in one task, in seq order.

    The trace is split into ranges of seq by a shuffle that runs in parallel, and the one task reads the ranges in
    order, sorting each (small) range as it reaches it: one global sort in one task (the first version) spilled
    the whole trace to disk beside the checker and was slower than the checker itself."""
    ranges = max(1, -(-rows // ROWS_PER_SORTED_PART))
    ordered = events.select(*columns).repartitionByRange(ranges, "seq").sortWithinPartitions("seq").coalesce(1)
    found = ordered.mapInArrow(judge_function(kinds, limit), OUTPUT_DDL).collect()
    if not found:  # an empty trace: nothing was judged
        return SequentialOutcome()
    outcome: SequentialOutcome = pickle.loads(found[0].payload)
    return outcome
