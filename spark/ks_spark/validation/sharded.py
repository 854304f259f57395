"""The sharded pass (`validate-replay --shards N`): the Python checker judging a trace in shards of keys, one Spark
task per shard, with the very code of `check-trace --jobs N` (ks_conformance.sharding).

Four Spark stages, none of which sees the whole trace in one task:

1. *ops*: every op's first event (seq, kind) and, for a publish, its key's shard, in parallel, collected to the driver
   as arrays (eleven bytes an op): the op table every shard reads, and the shard of every message;
2. *route*: the trace as Spark reads it, in parallel (an input split holds stretches of consecutive seqs: the format
   pass has checked that the physical order is the seq order): each row's op index, its shard (by the offset it
   names, else its key, else every shard) and whether every shard sees it for its tick phase (run.py's router);
   each shard's rows of a stretch become one Arrow IPC piece, shuffled to the shard's task and kept on disk
   (Spark moving and sorting the rows one by one cost more than judging them);
3. *predict*: each shard's task reads its pieces in seq order and predicts its changes to the facts that span keys
   (facts.py); the driver collects them (run.py `Changes`, 21 bytes a change) and ships them to every task;
4. *judge*: each shard's task runs `ShardChecker` over its rows with the other shards' changes, proving its own;
   the driver merges the shards' findings (merge.py).

Whatever the shards do not cover yet (`Unsharded`) is judged by the one-task pass (sequential.py), which says why.
Each task stage's body is a plain function over Arrow batches, tested without Spark (tests/test_spark_sharded.py).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby, pairwise
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from ks_conformance.checker import Checker
from ks_conformance.checks.state import ACK_CLASS
from ks_conformance.sharding.facts import unsharded_config
from ks_conformance.sharding.merge import ZOMBIE_OPS, Unsharded, merge
from ks_conformance.sharding.run import (
    KINDS,
    OP_STARTS,
    TICK,
    Changes,
    KeyShards,
    OpTable,
    RoutedBatch,
    int_column,
    judge_batches,
    kind_codes,
    measured,
    predict_batches,
    row_shards,
    shown_for_phases,
)
from ks_conformance.sharding.shard import ShardJudgment
from ks_spec.trace import batch_events

from ks_spark.session import cache_level
from ks_spark.validation.sequential import SequentialOutcome, chosen_anomalies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Body = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""A mapInArrow body."""
SHARD, PART, FIRST, PAYLOAD = "ks_shard", "ks_part", "ks_first", "ks_payload"
OP, SHOWN = "ks_op", "ks_shown"
"""The columns a piece adds to the trace's: each row's op index, and whether it is another shard's row shown for its
tick phase only."""
PIECES = pa.schema([(SHARD, pa.int32()), (PART, pa.int32()), (FIRST, pa.int64()), (PAYLOAD, pa.binary())])
"""What the route stage writes: pieces of one shard's rows (an Arrow IPC stream, LZ4), each from one stretch of
consecutive seqs, with the shard, its task's partition and the piece's first seq."""
OP_SCHEMA = pa.schema([("seq", pa.int64()), ("code", pa.int8()), ("shard", pa.int16())])
OUTCOME = pa.schema([("shard", pa.int32()), ("payload", pa.binary())])


@dataclass
class OpIndex:
    """What the driver knows after the ops stage: every op, the shard of each message, the seqs of the publishes."""

    ops: OpTable
    shard_of_offset: np.ndarray
    publish_seqs: np.ndarray


def op_rows_function(config: dict[str, object], shards: int) -> Body:
    """The ops stage's body: each op start's seq, kind code and (a publish) its key's shard, else -1."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key_shards = KeyShards(config, shards)
        for batch in batches:
            key_shard, _ = key_shards.per_row(batch)  # (a publish has a key: the format pass has checked)
            code = kind_codes(batch.column("event"))
            shard = np.where(code == KINDS.index("publish"), key_shard, -1).astype(np.int16)
            yield pa.RecordBatch.from_arrays(
                [pa.array(int_column(batch, "seq")), pa.array(code.astype(np.int8)), pa.array(shard)],
                schema=OP_SCHEMA,
            )

    return run


def op_index(starts: pa.Table, events: int) -> OpIndex | Unsharded:
    """The op table from every op start (any order), without the first ack-class effect of a zombie op (which
    continues it, KS-ACK-3, as the router of run.py does), and each message's shard in offset order."""
    seqs = np.asarray(starts.column("seq").to_numpy(), dtype=np.int64)
    order = np.argsort(seqs, kind="stable")
    seqs = seqs[order]
    codes = np.asarray(starts.column("code").to_numpy(), dtype=np.int8)[order]
    shards = np.asarray(starts.column("shard").to_numpy(), dtype=np.int16)[order]
    if not len(seqs) or seqs[0] != 0:
        return Unsharded("an event before the first op")
    is_zombie = np.isin(codes, [KINDS.index(kind) for kind in ZOMBIE_OPS])
    continues = np.zeros(len(seqs), dtype=bool)
    continues[1:] = np.isin(codes[1:], [KINDS.index(kind) for kind in ACK_CLASS]) & is_zombie[:-1]
    kept = ~continues
    seqs, codes, shards = seqs[kept], codes[kept], shards[kept]
    is_publish = codes == KINDS.index("publish")
    ends = np.append(seqs[1:] - 1, events - 1)
    return OpIndex(OpTable(KINDS, codes, seqs, ends), shards[is_publish], seqs[is_publish])


MAX_EVENTS = 2_500_000
"""The largest trace judged in shards: the driver collects and ships, and each shard's task holds, every op's
boundaries and every shard's predicted changes. Under Spark's default 1g driver, 2.5M events were judged in two
shards and 5M lost a shard's result to an out-of-memory in Spark's serving thread; 10M needed a 2g driver
(benchmarks/README.md). Past this a trace is judged in one task, whose memory is flat."""
LOST = "what the driver collected is incomplete (Spark's driver may have run out of memory)"
"""Why a trace is judged in one task when the op table lacks a publish or a shard's prediction or judgment is missing
(an incomplete collect is never used: the judgment would leave keys out)."""
UNKNOWN_ACKS = 10_000
"""At most so many acks of unknown offsets are looked at; a trace with more is judged in one task."""


def unpublished_acks(index: OpIndex, acks: list[tuple[int, int]]) -> Unsharded | None:
    """Why the trace is not sharded if an ack of an unknown offset (seq, offset) names one not published before it
    (no key to route it by: run.py's screen refuses it too), or if there are too many such acks to look at."""
    if len(acks) > UNKNOWN_ACKS:
        return Unsharded(f"more than {UNKNOWN_ACKS} acks of unknown offsets")
    for seq, offset in acks:
        if offset >= int(np.searchsorted(index.publish_seqs, seq)):
            return Unsharded("an ack names an offset not published yet")
    return None


def route_function(index: OpIndex, config: dict[str, object], shards: int, parts: list[int]) -> Body:
    """The route stage's body: for each shard, the rows it sees of each stretch of consecutive seqs, with their op
    indexes and whether each is shown for its phase only, as one Arrow IPC piece (Spark shuffles a few pieces, not
    every row: moving rows one by one cost Spark more than judging them); see `PIECES`."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key_shards = KeyShards(config, shards)
        starts, op_codes = index.ops.starts, index.ops.codes
        for batch in batches:
            if not batch.num_rows:
                continue
            seqs = int_column(batch, "seq")
            code = kind_codes(batch.column("event"))
            op = np.searchsorted(starts, seqs, side="right")
            key_shard, has_key = key_shards.per_row(batch)
            shard = row_shards(code, int_column(batch, "offset"), key_shard, has_key, index.shard_of_offset)
            shown = shown_for_phases(batch, code, op, op_codes[op - 1] == TICK)
            everyone = shard == -1
            edges = [0, *(np.flatnonzero(np.diff(seqs) != 1) + 1).tolist(), batch.num_rows]
            for low, high in pairwise(edges):  # (a stretch's pieces sort by their first seq)
                for number in range(shards):
                    mine = everyone[low:high] | (shard[low:high] == number)
                    wanted = mine | shown[low:high]
                    if not wanted.any():
                        continue
                    rows = batch.slice(low, high - low).filter(pa.array(wanted))
                    piece = pa.RecordBatch.from_arrays(
                        [*rows.columns, pa.array(op[low:high][wanted]), pa.array(~mine[wanted])],
                        names=[*batch.schema.names, OP, SHOWN],
                    )
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array([number], pa.int32()),
                            pa.array([parts[number]], pa.int32()),
                            pa.array([int(rows.column("seq")[0].as_py())], pa.int64()),
                            pa.array([_ipc(piece)], pa.binary()),
                        ],
                        schema=PIECES,
                    )

    return run


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def by_shard(pieces: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, Iterator[RoutedBatch]]]:
    """A task's pieces (sorted by shard, then first seq) as each shard's batches in seq order: the trace's columns,
    op indexes and phase-only flags (a task reads one shard, or several when Spark put them in one partition)."""

    def batches() -> Iterator[tuple[int, RoutedBatch]]:
        for rows in pieces:
            for number, payload in zip(rows.column(SHARD).to_pylist(), rows.column(PAYLOAD).to_pylist(), strict=True):
                for batch in pa.ipc.open_stream(payload):
                    trace = batch.select([name for name in batch.schema.names if name not in (OP, SHOWN)])
                    yield number, (trace, batch.column(OP).to_pylist(), batch.column(SHOWN).to_pylist())

    for number, group in groupby(batches(), key=itemgetter(0)):
        yield number, (routed for _, routed in group)


def _payload(shard: int, value: object) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([shard], pa.int32()), pa.array([pickle.dumps(value)])], schema=OUTCOME)


@dataclass
class Prediction:
    """One shard's predicted changes (or why the trace is not sharded) and the trace's config event."""

    changes: Changes | str
    config_event: dict[str, Any] | None


def predict_function() -> Body:
    """The predict stage's body: each shard's changes to the facts that span keys (run.py `predict_batches`)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for number, group in by_shard(batches):
            first = next(group)
            event = next(batch_events(first[0].slice(0, 1)))
            if event.get("event") != "config" or event.get("seq") != 0:
                yield _payload(number, Prediction("the trace does not begin with its config event", None))
                continue
            changes = predict_batches(_chain(first, group), str(event.get("detail")))
            yield _payload(number, Prediction(changes, event))

    return run


def _chain(first: RoutedBatch, rest: Iterator[RoutedBatch]) -> Iterator[RoutedBatch]:
    yield first
    yield from rest


def judge_function(ops: OpTable, predicted: list[Changes]) -> Body:
    """The judge stage's body: each shard's rows through `ShardChecker` (run.py `judge_batches`; the format pass has
    already checked every row against the schema)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for number, group in by_shard(batches):
            yield _payload(number, measured(lambda: judge_batches(group, ops, predicted, number, schema=False)))  # noqa: B023

    return run


@dataclass
class ShardedOutcome(SequentialOutcome):
    """What the checker found in shards of keys (as the one-task pass reports it), and where the time went."""

    shards: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    workers_peak_rss: int = 0


def sharded_pass(
    session: SparkSession,
    events: DataFrame,
    config: dict[str, Any],
    rows: int,
    published: int,
    shards: int,
    kinds: Collection[str],
    limit: int | None,
) -> ShardedOutcome | Unsharded:
    """Judge `events` (the trace's columns: `rows` events, `published` messages, of configuration `config`) in
    `shards` shards of keys; why not, when it cannot be (the caller runs the one-task pass)."""
    from pyspark.sql import functions as F

    reason = unsharded_config(config)
    if reason is not None:
        return Unsharded(reason)
    if rows == 0:
        return Unsharded("the trace is empty")
    if rows > MAX_EVENTS:
        return Unsharded(
            f"{rows:,} events: past {MAX_EVENTS:,}, every shard's task would hold the op table and the predicted "
            "changes of the whole trace (their memory grows with it; the one task's does not)"
        )
    unknown = events.where(
        F.col("event").isin("ack_ignored", "nack_ignored")
        & (F.col("reason") == "unknown-offset")
        & F.col("offset").isNotNull()
    ).select("seq", "offset")
    started = time.perf_counter()
    starts = events.where(F.col("event").isin(OP_STARTS)).select("seq", "event", "key")
    collected = starts.mapInArrow(op_rows_function(config, shards), "seq long, code byte, shard short").toArrow()
    index = op_index(collected, rows)
    if isinstance(index, Unsharded):
        return index
    if len(index.publish_seqs) != published:
        return Unsharded(LOST)
    acks = [(int(row.seq), int(row.offset)) for row in unknown.limit(UNKNOWN_ACKS + 1).collect()]
    unpublished = unpublished_acks(index, acks)
    if unpublished is not None:
        return unpublished
    route = route_function(index, config, shards, partition_for_each_shard(session, shards))

    # Every shard's pieces in its own task, in seq order, kept on disk for the two stages that read them (as bytes
    # they cost Spark little to keep, less than routing again).
    schema = "ks_shard int, ks_part int, ks_first long, ks_payload binary"
    routed = events.mapInArrow(route, schema).repartition(shards, PART).sortWithinPartitions(SHARD, FIRST)
    routed = routed.persist(cache_level())
    try:
        found = routed.mapInArrow(predict_function(), "shard int, payload binary").collect()
        predictions: dict[int, Prediction] = {int(row.shard): pickle.loads(row.payload) for row in found}
        changes = predicted_changes(predictions, shards)
        if isinstance(changes, Unsharded):
            return changes
        judged = routed.mapInArrow(judge_function(index.ops, changes), "shard int, payload binary").collect()
        judgments: dict[int, ShardJudgment] = {int(row.shard): pickle.loads(row.payload) for row in judged}
    finally:
        routed.unpersist()
    return outcome(predictions, judgments, rows, kinds, limit, time.perf_counter() - started)


def predicted_changes(predictions: dict[int, Prediction], shards: int) -> list[Changes] | Unsharded:
    """Every shard's predicted changes, in shard order; or why the trace is not sharded."""
    reasons = [p.changes for p in predictions.values() if isinstance(p.changes, str)]
    if reasons:
        return Unsharded(reasons[0])
    if sorted(predictions) != list(range(shards)):
        return Unsharded(LOST)
    return [c for number in range(shards) for c in [predictions[number].changes] if isinstance(c, Changes)]


def outcome(
    predictions: dict[int, Prediction],
    judgments: dict[int, ShardJudgment],
    rows: int,
    kinds: Collection[str],
    limit: int | None,
    seconds: float = 0.0,
) -> ShardedOutcome | Unsharded:
    """The shards' judgments merged (merge.py) and told as the one-task pass tells its own (the kinds asked for,
    the first `limit` of each); why not, when the merge refuses them."""
    if len(judgments) != len(predictions):
        return Unsharded(LOST)
    merged = merge([judgments[number] for number in sorted(judgments)])
    if isinstance(merged, Unsharded):
        return merged
    whole = Checker()
    whole.feed(predictions[0].config_event or {})
    wanted = list(kinds)
    counts, anomalies = chosen_anomalies(merged.anomalies, wanted, limit)
    return ShardedOutcome(
        counts=counts,
        anomalies=anomalies,
        exercised={name: merged.exercised.get(name, 0) for name in wanted if whole.applies(name)},
        events=rows,
        shards=len(judgments),
        seconds={"all": seconds} | {f"shard {number}": judgment.seconds for number, judgment in judgments.items()},
        workers_peak_rss=max(judgment.peak_rss for judgment in judgments.values()),
    )


def partition_for_each_shard(session: SparkSession, shards: int) -> list[int]:
    """For each shard, a value whose hash puts it in its own partition of `repartition(shards, column)` (Spark
    hashes a column's value with Murmur3, seed 42, modulo the partitions): one task per shard."""
    from pyspark.sql import functions as F

    candidates = session.range(0, 64 * shards).select(
        F.col("id").cast("int").alias("value"), F.pmod(F.hash(F.col("id").cast("int")), F.lit(shards)).alias("part")
    )
    first: dict[int, int] = {}
    for row in candidates.collect():
        first.setdefault(int(row.part), int(row.value))
    return [first.get(number, number) for number in range(shards)]
