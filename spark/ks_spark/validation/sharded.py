"""The sharded pass (`validate-replay --shards N`): the Python checker judging a trace in shards of keys, one Spark
task per shard, with the very code of `check-trace --jobs N` (ks_conformance.sharding). No task sees the whole trace,
and what one shard tells another goes through Spark's shuffle, not the driver.

1. *offsets* (on the driver): each message's shard (two bytes a message, collected from runs of consecutive offsets):
   a row naming an offset goes to the shard of the key that published it;
2. *route*: the trace as Spark reads it, in parallel (an input split holds stretches of consecutive seqs: the format
   pass has checked that the physical order is the seq order); for each stretch, its op starts go to every shard
   and each shard's rows (by the offset they name, else their key, else every shard, with the rows every shard sees
   for their tick phase) go to that shard, as one Arrow IPC piece (Spark moving rows one by one cost more than
   judging them);
3. *predict*: each shard's task reads its records in seq order and predicts its changes to the facts that span keys
   (facts.py), sent to every shard a window of seqs at a time; it passes its records on;
4. *judge*: each shard's task reads, in seq order, the op starts, every shard's changes and its own pieces, and runs
   `ShardChecker` over its rows with the other shards' changes, proving its own; the driver merges the findings.

Each record (`RECORDS`) is sorted by shard, then the seq it is needed from (`KEY`), so a task reads what it needs
just before it needs it: the op starts of a stretch before its rows, the changes of a window before any row of it.
Whatever the shards do not cover yet (`Unsharded`) is judged by the one-task pass (sequential.py), which says why.
Each task stage's body is a plain function over Arrow batches, tested without Spark (tests/test_spark_sharded.py).

Long because the four stages' bodies and the records they exchange belong together; each is short.
"""

from __future__ import annotations

import pickle
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, groupby, pairwise
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
from ks_conformance.checker import Checker
from ks_conformance.sharding.facts import (
    FLUSH_ROW,
    NOTHING,
    UNPUBLISHED_ANSWER,
    Change,
    Prediction,
    ledger_stream,
    pauses,
    unsharded_config,
)
from ks_conformance.sharding.files import Changes
from ks_conformance.sharding.merge import Unsharded, merge
from ks_conformance.sharding.ops import OpWindow, continued
from ks_conformance.sharding.run import (
    KINDS,
    OP_STARTS,
    TICK,
    KeyShards,
    RoutedBatch,
    int_column,
    judge_batches,
    kind_codes,
    ledger_rows,
    measured,
    row_shards,
    shown_rows,
)
from ks_conformance.sharding.shard import ShardJudgment
from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.trace import batch_events

from ks_spark.session import cache_level
from ks_spark.validation.sequential import SequentialOutcome, chosen_anomalies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Body = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""A mapInArrow body."""
SHARD, PART, KEY, TYPE, SOURCE, PAYLOAD = "ks_shard", "ks_part", "ks_key", "ks_type", "ks_source", "ks_payload"
RECORDS = pa.schema(
    [
        (SHARD, pa.int32()),
        (PART, pa.int32()),
        (KEY, pa.int64()),
        (TYPE, pa.int8()),
        (SOURCE, pa.int32()),
        (PAYLOAD, pa.binary()),
    ]
)
"""What the tasks exchange: for a shard (and its task's partition), from a seq on (`KEY`), something of a `TYPE`,
from a source shard."""
RECORDS_DDL = "ks_shard int, ks_part int, ks_key long, ks_type byte, ks_source int, ks_payload binary"
ORDER = (SHARD, KEY, TYPE, SOURCE)
"""The order a task reads its records in."""
REASON, OPS, CHANGES, PIECE = range(4)
"""Record types: why a shard's prediction failed (KEY -1: read first), the op starts of a stretch (KEY: its first
seq), a source shard's changes of a window of seqs (KEY: the window's first seq), a piece of the shard's rows (KEY:
its last seq, so the records it needs sort before it)."""
SHOWN = "ks_shown"
"""The column a piece adds to the trace's: whether a row is another shard's shown for its tick phase only."""
OFFSETS_DDL = "first long, shards binary"
OFFSETS = pa.schema([("first", pa.int64()), ("shards", pa.binary())])
OUTCOME_DDL = "shard int, payload binary"
OUTCOME = pa.schema([("shard", pa.int32()), ("payload", pa.binary())])
WINDOW = 65536
"""Seqs per window of changes (more for a trace of more than MAX_WINDOWS of them)."""
MAX_WINDOWS = 4096
"""At most so many windows: each sends a record from every shard to every shard."""
UNKNOWN_ACKS = 10_000
"""At most so many acks of unknown offsets are looked at; a trace with more is judged in one task."""
LOST = "what the driver collected is incomplete (Spark's driver may have run out of memory)"
"""Why a trace is judged in one task when a message's shard or a shard's judgment is missing (an incomplete collect
is never used: the judgment would leave keys out)."""
START_CODES = np.array([KINDS.index(kind) for kind in OP_STARTS])


class Record(NamedTuple):
    """One row of `RECORDS`."""

    shard: int
    part: int
    key: int
    type: int
    source: int
    payload: bytes


def windows_of(events: int) -> tuple[int, int]:
    """The seqs of a window of changes for a trace of `events` events, and how many windows it has."""
    size = max(WINDOW, -(-events // MAX_WINDOWS))
    return size, -(-events // size)


def _batch(records: list[Record]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=kind.type) for column, kind in zip(zip(*records, strict=True), RECORDS, strict=True)],
        schema=RECORDS,
    )


def shard_records(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, Iterator[Record]]]:
    """A task's records (sorted in ORDER) as each shard's, in order (a task reads one shard, or several when Spark
    put them in one partition)."""

    def records() -> Iterator[Record]:
        for batch in batches:
            yield from map(Record._make, zip(*(batch.column(name).to_pylist() for name in RECORDS.names), strict=True))

    yield from groupby(records(), key=lambda record: record.shard)


# --- 1. offsets -------------------------------------------------------------------------------------------------


def offsets_function(config: dict[str, object], shards: int) -> Body:
    """The offsets stage's body, over the publishes: each run of consecutive offsets, as its first offset and its
    messages' shards (int16 bytes)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key_shards = KeyShards(config, shards)
        for batch in batches:
            if not batch.num_rows:
                continue
            key_shard, _ = key_shards.per_row(batch)  # (a publish has a key: the format pass has checked)
            offsets = int_column(batch, "offset")
            order = np.argsort(offsets, kind="stable")
            offsets, key_shard = offsets[order], key_shard[order].astype(np.int16)
            edges = [0, *(np.flatnonzero(np.diff(offsets) != 1) + 1).tolist(), len(offsets)]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([int(offsets[low]) for low, _ in pairwise(edges)], pa.int64()),
                    pa.array([key_shard[low:high].tobytes() for low, high in pairwise(edges)], pa.binary()),
                ],
                schema=OFFSETS,
            )

    return run


def shard_of_offsets(runs: pa.Table, published: int) -> np.ndarray | Unsharded:
    """Each message's shard, by offset, from the offsets stage's runs; why not when they do not cover every message
    once."""
    shards = np.full(published, -1, dtype=np.int16)
    covered = 0
    for first, blob in zip(runs.column("first").to_pylist(), runs.column("shards").to_pylist(), strict=True):
        part = np.frombuffer(blob, dtype=np.int16)
        if first < 0 or first + len(part) > published:
            return Unsharded(LOST)
        shards[first : first + len(part)] = part
        covered += len(part)
    if covered != published or bool((shards < 0).any()):
        return Unsharded(LOST)
    return shards


def unpublished_acks(acks: list[tuple[int, int]], published_at: Mapping[int, int]) -> Unsharded | None:
    """Why the trace is not sharded if an ack of an unknown offset (seq, offset) names one not published before it
    (no key to route it by: run.py's screen refuses it too), given the seq each of their offsets was published at,
    or if there are too many such acks to look at."""
    if len(acks) > UNKNOWN_ACKS:
        return Unsharded(f"more than {UNKNOWN_ACKS} acks of unknown offsets")
    for seq, offset in acks:
        if published_at.get(offset, seq) >= seq:
            return Unsharded(f"{UNPUBLISHED_ANSWER} (seq {seq}, offset {offset})")
    return None


# --- 2. route ---------------------------------------------------------------------------------------------------


def route_function(shard_of_offset: np.ndarray, config: dict[str, object], shards: int, parts: list[int]) -> Body:
    """The route stage's body: for each stretch of consecutive seqs, its op starts (to every shard) and each shard's
    rows with whether each is shown for its phase only (one Arrow IPC piece); see `RECORDS`."""

    buckets = {**CONFIG_DEFAULTS, **config}["selector"] == "buckets"  # (every publish shown to every shard)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        key_shards = KeyShards(config, shards)
        for batch in batches:
            if batch.num_rows:
                yield _batch(list(_route(batch, key_shards, shard_of_offset, shards, parts, buckets)))

    return run


def _route(
    batch: pa.RecordBatch,
    key_shards: KeyShards,
    shard_of_offset: np.ndarray,
    shards: int,
    parts: list[int],
    buckets: bool,
) -> Iterator[Record]:
    rows = batch.num_rows
    seqs = int_column(batch, "seq")
    code = kind_codes(batch.column("event"))
    key_shard, has_key = key_shards.per_row(batch)
    shard = row_shards(code, int_column(batch, "offset"), key_shard, has_key, shard_of_offset)
    is_start = np.isin(code, START_CODES)
    rank = np.arange(rows)
    begins = np.ones(rows, dtype=bool)
    begins[1:] = np.diff(seqs) != 1
    stretch_start = np.maximum.accumulate(np.where(begins, rank, 0))
    opened = np.maximum.accumulate(np.where(is_start, rank, -1))
    # A row before its stretch's first op start is in an op begun elsewhere: taken as a tick's (a row shown that is
    # no boundary of a tick's phases changes nothing).
    in_tick = np.where(opened >= stretch_start, code[np.maximum(opened, 0)] == TICK, True)
    shown = shown_rows(batch, code, np.cumsum(is_start), in_tick, buckets)
    everyone = shard == -1
    for low, high in pairwise([*np.flatnonzero(begins).tolist(), rows]):
        starts = is_start[low:high]
        ops = (
            np.array([seqs[high - 1]], dtype=np.int64).tobytes()
            + seqs[low:high][starts].astype(np.int64).tobytes()
            + code[low:high][starts].astype(np.int8).tobytes()
        )
        for number in range(shards):
            yield Record(number, parts[number], int(seqs[low]), OPS, 0, ops)
            mine = everyone[low:high] | (shard[low:high] == number)
            wanted = mine | shown[low:high]
            if wanted.any():
                piece = batch.slice(low, high - low).filter(pa.array(wanted))
                piece = piece.append_column(SHOWN, pa.array(~mine[wanted]))
                last = int(seqs[low:high][wanted][-1])
                yield Record(number, parts[number], last, PIECE, 0, _ipc(piece))


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def read_piece(payload: bytes) -> tuple[pa.RecordBatch, list[bool]]:
    """A piece's rows (the trace's columns) and, for each, whether it is shown for its phase only."""
    batch = pa.ipc.open_stream(payload).read_next_batch()
    shown = batch.column(SHOWN).to_pylist()
    return batch.drop_columns([SHOWN]), shown


def read_ops(payload: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    """A stretch's op starts: the last seq it covers, the starts' seqs and their kind codes."""
    count = (len(payload) - 8) // 9
    through = int(np.frombuffer(payload, dtype=np.int64, count=1)[0])
    seqs = np.frombuffer(payload, dtype=np.int64, count=count, offset=8)
    return through, seqs, np.frombuffer(payload, dtype=np.int8, count=count, offset=8 + 8 * count).astype(np.int64)


# --- 3. predict -------------------------------------------------------------------------------------------------


def config_event(records: Iterator[Record], head: list[Record]) -> dict[str, Any] | str:
    """Read a shard's records up to its first piece (kept in `head`): the trace's first event if it is the config
    event (every shard sees it), else why not."""
    for record in records:
        head.append(record)
        if record.type == PIECE:
            event = next(batch_events(read_piece(record.payload)[0].slice(0, 1)))
            if event.get("event") == "config" and event.get("seq") == 0:
                return event
            break
    return "the trace does not begin with its config event"


def predict_function(shards: int, parts: list[int], events: int) -> Body:
    """The predict stage's body: each shard's records passed on, with its predicted changes to the facts that span
    keys, a window at a time, for every shard (or, when the prediction fails, why, for every shard)."""
    size, windows = windows_of(events)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for number, records in shard_records(batches):
            yield from _predict(number, records, shards, parts, size, windows)

    return run


def _predict(
    number: int, records: Iterator[Record], shards: int, parts: list[int], size: int, windows: int
) -> Iterator[pa.RecordBatch]:
    head: list[Record] = []
    event = config_event(records, head)
    out: list[Record] = []
    if isinstance(event, str):
        yield _batch(head + [Record(t, parts[t], -1, REASON, number, event.encode()) for t in range(shards)])
        return
    changes: list[Change] = []
    read_through = -1
    """The last seq of this shard's rows read so far."""

    def rows() -> Iterator[Any]:
        nonlocal read_through
        for record in chain(head, records):
            out.append(record)
            if record.type == PIECE:
                yield from ledger_rows(*read_piece(record.payload))
                read_through = record.key
            yield FLUSH_ROW

    outcome: list[Prediction] = []
    sent = 0
    """Windows sent so far."""
    for _ in pauses(ledger_stream(rows(), str(event.get("detail")), changes), outcome):
        complete = min((read_through + 1) // size, windows)
        if complete > sent or len(out) >= RECORDS_PER_BATCH:
            out += _windows(number, changes, range(sent, complete), shards, parts, size)
            sent = max(sent, complete)
            yield _batch(out)
            out.clear()
    reason = outcome[0].reason
    if reason is not None:
        out += [Record(t, parts[t], -1, REASON, number, reason.encode()) for t in range(shards)]
    else:
        out += _windows(number, changes, range(sent, windows), shards, parts, size)
    if out:
        yield _batch(out)


def _windows(
    number: int, changes: list[Change], indexes: range, shards: int, parts: list[int], size: int
) -> Iterator[Record]:
    """The changes of these windows (taken out of `changes`), one record per window for every shard."""
    for index in indexes:
        cut = bisect_left(changes, (index + 1) * size, key=itemgetter(0))
        payload = pickle.dumps(Changes.of(changes[:cut]))
        del changes[:cut]
        for target in range(shards):
            yield Record(target, parts[target], index * size, CHANGES, number, payload)


# --- 4. judge ---------------------------------------------------------------------------------------------------


class Demux:
    """A shard's records, read once in order, handed out by type: op starts, pieces, and each window's changes (a
    reader that needs a type the next records are not of reads on, keeping what it passes: the order bounds it)."""

    def __init__(self, records: Iterator[Record], shards: int, size: int, windows: int) -> None:
        self.records = records
        self.shards, self.size, self.windows = shards, size, windows
        self.ops: deque[bytes] = deque()
        self.pieces: deque[bytes] = deque()
        self.changes: dict[int, dict[int, Changes]] = {}
        self.taken: dict[int, int] = {}

    def read(self) -> bool:
        """Read one more record; False at the end."""
        record = next(self.records, None)
        if record is None:
            return False
        if record.type == OPS:
            self.ops.append(record.payload)
        elif record.type == PIECE:
            self.pieces.append(record.payload)
        elif record.type == CHANGES:
            self.changes.setdefault(record.key // self.size, {})[record.source] = pickle.loads(record.payload)
        return True  # (a shard's reasons are all read before its first piece: `_judge` looks there)

    def op_starts(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Every stretch's raw op starts, in seq order."""
        while self.ops or self.read():
            if self.ops:
                yield read_ops(self.ops.popleft())

    def piece_batches(self) -> Iterator[tuple[pa.RecordBatch, list[bool]]]:
        """The shard's pieces, in seq order."""
        while self.pieces or self.read():
            if self.pieces:
                yield read_piece(self.pieces.popleft())

    def window(self, index: int) -> dict[int, Changes]:
        """Every shard's changes of window `index` (kept until both the own and the other shards' readers took it)."""
        while len(self.changes.get(index, ())) < self.shards:
            if not self.read():
                raise LookupError(f"window {index} of the changes is incomplete")
        found = self.changes[index]
        self.taken[index] = self.taken.get(index, 0) + 1
        if self.taken[index] == 2:
            del self.changes[index], self.taken[index]
        return found

    def foreign(self, shard: int) -> Iterator[list[Change]]:
        """The other shards' changes, a window at a time, in seq order (each window opening with a change of
        nothing at its first seq: the checker then never looks past the next window)."""
        for index in range(self.windows):
            found = self.window(index)
            merged = Changes.concatenate([found[source] for source in sorted(found) if source != shard])
            yield [(index * self.size, NOTHING, -1, None), *(c for chunk in merged.chunks() for c in chunk)]

    def own(self, shard: int) -> Iterator[Change]:
        """This shard's predicted changes, in seq order (with the windows' changes of nothing)."""
        for index in range(self.windows):
            yield (index * self.size, NOTHING, -1, None)
            for chunk in self.window(index)[shard].chunks():
                yield from chunk


@dataclass
class Judged:
    """A shard's judge task's result: its judgment, or why the trace is not sharded; and the trace's config event."""

    judgment: ShardJudgment | None
    reason: str | None
    config_event: dict[str, Any] | None


def judge_function(shards: int, events: int) -> Body:
    """The judge stage's body: each shard's rows through `ShardChecker` (run.py `judge_batches`; the format pass has
    already checked every row against the schema)."""
    size, windows = windows_of(events)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for number, records in shard_records(batches):
            judged = _judge(number, records, shards, events, size, windows)
            yield pa.RecordBatch.from_arrays(
                [pa.array([number], pa.int32()), pa.array([pickle.dumps(judged)], pa.binary())], schema=OUTCOME
            )

    return run


def op_window(demux: Demux, events: int) -> OpWindow:
    """The ops a judge task reads, from the stretches' raw op starts."""
    return OpWindow(continued(demux.op_starts(), KINDS), events)


def _judge(number: int, records: Iterator[Record], shards: int, events: int, size: int, windows: int) -> Judged:
    head: list[Record] = []
    event = config_event(records, head)
    if head and head[0].type == REASON:
        return Judged(None, head[0].payload.decode(), None)
    if isinstance(event, str):
        return Judged(None, event, None)
    demux = Demux(chain(head, records), shards, size, windows)
    ops = op_window(demux, events)

    def routed() -> Iterator[RoutedBatch]:
        for batch, shown in demux.piece_batches():
            seqs = int_column(batch, "seq")
            ops.load_through(int(seqs[-1]))
            yield batch, ops.index_of(seqs).tolist(), shown

    judgment = measured(lambda: judge_batches(routed(), ops, demux.foreign(number), demux.own(number), number, False))
    return Judged(judgment, None, event)


# --- the pass ---------------------------------------------------------------------------------------------------


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
    started = time.perf_counter()
    unknown = events.where(
        F.col("event").isin("ack_ignored", "nack_ignored")
        & (F.col("reason") == "unknown-offset")
        & F.col("offset").isNotNull()
    ).select("seq", "offset")
    acks = [(int(row.seq), int(row.offset)) for row in unknown.limit(UNKNOWN_ACKS + 1).collect()]
    named = sorted({offset for _, offset in acks})[: UNKNOWN_ACKS + 1]
    publishes = events.where(F.col("event") == "publish")
    wanted = publishes.where(F.col("offset").isin(named)).select("offset", "seq")
    published_at = {int(r.offset): int(r.seq) for r in wanted.collect()} if 0 < len(acks) <= UNKNOWN_ACKS else {}
    unpublished = unpublished_acks(acks, published_at)
    if unpublished is not None:
        return unpublished
    runs = publishes.select("offset", "key").mapInArrow(offsets_function(config, shards), OFFSETS_DDL).toArrow()
    shard_of_offset = shard_of_offsets(runs, published)
    if isinstance(shard_of_offset, Unsharded):
        return shard_of_offset
    parts = partition_for_each_shard(session, shards)
    routed = events.mapInArrow(route_function(shard_of_offset, config, shards, parts), RECORDS_DDL)
    # Routed apart (the trace read in Spark's large batches), kept on disk, then read a few records a batch.
    routed = routed.repartition(shards, PART).sortWithinPartitions(*ORDER).persist(cache_level())
    try:
        routed.count()
        with arrow_batches_of(session, RECORDS_PER_BATCH):
            predicted = routed.mapInArrow(predict_function(shards, parts, rows), RECORDS_DDL)
            predicted = predicted.repartition(shards, PART).sortWithinPartitions(*ORDER)
            found = predicted.mapInArrow(judge_function(shards, rows), OUTCOME_DDL).collect()
    finally:
        routed.unpersist()
    results: dict[int, Judged] = {int(row.shard): pickle.loads(row.payload) for row in found}
    return outcome(results, shards, rows, kinds, limit, time.perf_counter() - started)


def outcome(
    results: dict[int, Judged],
    shards: int,
    rows: int,
    kinds: Collection[str],
    limit: int | None,
    seconds: float = 0.0,
) -> ShardedOutcome | Unsharded:
    """The shards' judgments merged (merge.py) and told as the one-task pass tells its own (the kinds asked for,
    the first `limit` of each); why not, when a shard says why or the merge refuses them."""
    reasons = [result.reason for _, result in sorted(results.items()) if result.reason is not None]
    if reasons:
        return Unsharded(reasons[0])
    judgments = {number: result.judgment for number, result in results.items() if result.judgment is not None}
    if sorted(judgments) != list(range(shards)):
        return Unsharded(LOST)
    merged = merge([judgments[number] for number in range(shards)])
    if isinstance(merged, Unsharded):
        return merged
    whole = Checker()
    whole.feed(results[0].config_event or {})
    wanted = list(kinds)
    counts, anomalies = chosen_anomalies(merged.anomalies, wanted, limit)
    return ShardedOutcome(
        counts=counts,
        anomalies=anomalies,
        exercised={name: merged.exercised.get(name, 0) for name in wanted if whole.applies(name)},
        events=rows,
        shards=shards,
        seconds={"all": seconds} | {f"shard {number}": judgment.seconds for number, judgment in judgments.items()},
        workers_peak_rss=max(judgment.peak_rss for judgment in judgments.values()),
    )


RECORDS_PER_BATCH = 16
"""Records in an Arrow batch Spark hands a task that reads records: one carries a piece of a shard's rows (up to a
megabyte), and the session's 65,536 rows a batch asked for more direct memory than a 1g driver has (10M events)."""


@contextmanager
def arrow_batches_of(session: SparkSession, size: int) -> Iterator[None]:
    """Spark's Arrow batches to Python tasks at most `size` rows while the block runs (the setting restored after;
    the byte limit stays off: Spark measures it row by row)."""
    name = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = session.conf.get(name, None)
    session.conf.set(name, str(size))
    try:
        yield
    finally:
        if before is None:
            session.conf.unset(name)
        else:
            session.conf.set(name, before)


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
