"""`check-trace --jobs N` for a Parquet trace (JSON lines are converted to one first, jsonl.py): route it into shards
column by column, predict the ledger, judge the shards in N processes, merge (merge.py). Anything the shards do not
cover yet is judged in one process instead, and the result says why (`TraceCheck.judged`).

Routing (`route_to_files`), batch by batch with numpy: a row naming an offset goes to the shard of the key that
published it (so a key contradicting its offset is seen, and refused, by the shard holding the message), a row
naming a key only to its key's shard, every other row to every shard. Every row gets the index of its op, and the
boundaries of a tick's phases are shown to every shard (merge.phase_boundaries explains why; at a batch's edges a
row is shown even when it may not be a boundary, which changes nothing). State kept across batches: the shard of
each offset published (two bytes a message), each key's shard, the ops (seventeen bytes an op).

Long because its pieces serve two callers: check-trace's processes here, and validate-replay's Spark tasks
(ks_spark.validation.sharded), which route, predict and judge with these same functions.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import chain, compress
from operator import not_
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from ks_spec.config import CONFIG_DEFAULTS, config_problem
from ks_spec.trace import (
    OP_EVENTS,
    SequenceRules,
    batch_events,
    columns,
    is_parquet,
    parquet_type_problem,
    schema_problem,
    schema_vouched_kinds,
    trace_files,
)

from ks_conformance.anomalies import Anomaly
from ks_conformance.checker import Checker
from ks_conformance.checks.records import Problem
from ks_conformance.checks.state import ACK_CLASS, DANUBE_PHASE_3
from ks_conformance.pacing import fewer_collections, peak_rss
from ks_conformance.sharding.facts import (
    FLUSH_ROW,
    UNPUBLISHED_ANSWER,
    Change,
    Prediction,
    Row,
    ledger_stream,
    pauses,
)
from ks_conformance.sharding.files import ArrayFile, ChangeFiles, merged_chunks
from ks_conformance.sharding.jsonl import Mapper, convert_jsonl
from ks_conformance.sharding.merge import ZOMBIE_OPS, Unsharded, merge, shard_of_key
from ks_conformance.sharding.ops import OpChunk, OpWindow, table_chunks
from ks_conformance.sharding.shard import ShardChecker, ShardJudgment

BATCH = 65536
OP_STARTS = sorted(OP_EVENTS | ACK_CLASS)
KINDS = sorted(
    {*OP_EVENTS, *ACK_CLASS, "deliver", "held", "filter", "drop", "timeout", "dead_letter", "key_blocked"}
    | {"consumer_evicted", "cursor_persisted", "checkpoint", "bucket_withheld", "bucket_assigned"}
)
"""The event kinds the router tells apart (op starts and effects with a tick phase); any other kind is coded past
the end."""
PHASES = {"timeout": 1, "dead_letter": 2, "key_blocked": 2, "consumer_evicted": 4, "cursor_persisted": 6}
PHASES |= {"checkpoint": 6, **{kind: 5 for kind in ("deliver", "held", "filter", "bucket_withheld", "bucket_assigned")}}
PHASES["drop"] = 5
"""Each effect's tick phase (checks/state.py `phase_of`; a `drop` is 2 for poison, else 5)."""
PHASE_OF_CODE = np.array([PHASES.get(kind, 0) for kind in KINDS] + [0], dtype=np.int64)
"""Each kind code's tick phase (0: none)."""
KIND_CODES = pa.array(KINDS, pa.string())
SEEK, TICK, PUBLISH = KINDS.index("seek"), KINDS.index("tick"), KINDS.index("publish")


def kind_codes(kinds: pa.Array) -> np.ndarray:
    """Each row's kind as its index in KINDS (len(KINDS) for a kind the router does not tell apart)."""
    return np.asarray(pc.index_in(kinds, value_set=KIND_CODES).fill_null(len(KINDS)).to_numpy(), dtype=np.int64)


class OpTable:
    """Every op of a trace as two files of the routing's folder (kind code, first seq), read a chunk at a time."""

    def __init__(self, kinds: list[str], codes: ArrayFile, starts: ArrayFile) -> None:
        self.kinds, self.codes, self.starts = kinds, codes, starts

    def __len__(self) -> int:
        return len(self.starts)

    def chunks(self, events: int) -> Iterator[OpChunk]:
        """The ops as an `OpWindow` reads them (ops.py `table_chunks`)."""
        kinds, codes = self.kinds, self.codes
        return table_chunks(self.starts, lambda low, high: [kinds[code] for code in codes[low:high].tolist()], events)


@dataclass
class Routing:
    """A trace routed into shards, in files of its folder (so that memory stays flat, and a worker reads what it needs
    a stretch at a time rather than receiving it, files.py): per row, its shard (-1: every shard), its op's index, and
    whether every shard sees it for its tick phase; every op's first seq and kind; each shard's predicted changes
    once predicted."""

    trace: Path
    folder: Path
    events: int
    published: int
    batch_size: int
    """The size of the batches the trace is read in (the routing's files follow the trace's rows batch by batch)."""

    @property
    def ops(self) -> OpTable:
        """Every op (read from the folder's files)."""
        return OpTable(
            KINDS, ArrayFile(self.folder / "op-codes", np.int8), ArrayFile(self.folder / "op-starts", np.int64)
        )

    def changes(self, shard: int) -> ChangeFiles:
        """A shard's predicted changes (`predict_shard` wrote them to the folder)."""
        return ChangeFiles.open(self.folder / f"changes-{shard}")

    def rows(
        self, shard: int, columns: Sequence[str] | None = None
    ) -> Iterator[tuple[pa.RecordBatch, list[int], list[bool]]]:
        """The trace's batches as `shard` sees them (only `columns`, if given): its rows, each with its op's index and
        whether it is another shard's shown for its phase only (read from the trace again, batch by batch)."""
        shards = ArrayFile(self.folder / "shard", np.int16)
        ops = ArrayFile(self.folder / "op", np.int64)
        shown = ArrayFile(self.folder / "shown", np.bool_)
        start = 0
        for batch in trace_batches(self.trace, self.batch_size, columns):
            end = start + batch.num_rows
            owner = shards.read(start, end)
            mine = (owner == shard) | (owner == -1)
            wanted = mine | shown.read(start, end)
            yield batch.filter(pa.array(wanted)), ops.read(start, end)[wanted].tolist(), (~mine[wanted]).tolist()
            start = end


def trace_batches(path: Path, batch_size: int, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """A Parquet trace's batches (a file, or a folder's files in name order), of `columns` where a file has them: the
    same batches every time (the routing's files follow them)."""
    for file in trace_files(path):
        parquet = pq.ParquetFile(file, pre_buffer=False)
        present = None if columns is None else [name for name in columns if name in parquet.schema_arrow.names]
        yield from parquet.iter_batches(batch_size=batch_size, columns=present)


def is_in(column: pa.Array, values: Iterable[str]) -> np.ndarray:
    """Where a string column holds one of `values` (Arrow compute: no Python per row)."""
    found = pc.is_in(column, value_set=pa.array(sorted(values), pa.string()))
    return np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)


def int_column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """An integer column with nulls as -1 (all -1 for a column the file lacks)."""
    if name not in batch.schema.names:
        return np.full(batch.num_rows, -1, dtype=np.int64)
    return np.asarray(batch.column(name).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


BROKEN = "its seqs, ticks or offsets break spec/trace.md section 2"
"""Why the screen leaves a trace to one process, which names the problem exactly."""


class Screen:
    """The rules of spec/trace.md section 2 that span events (seqs, ticks, offsets), column by column: a screen that
    never accepts what `ks_spec.trace.SequenceRules` refuses; when it doubts, the trace is judged in one process,
    which names the problem exactly."""

    def __init__(self) -> None:
        self.seq = self.tick = self.published = 0

    def breaks(self, batch: pa.RecordBatch, kinds: pa.Array, is_publish: np.ndarray, offsets: np.ndarray) -> str | None:
        """Why this batch, following the ones screened before, is not judged in shards, or None if it keeps the
        rules."""
        rows = batch.num_rows
        if self.seq == 0 and SequenceRules().check(next(batch_events(batch.slice(0, 1)))) is not None:
            return BROKEN
        configs = int(pc.sum(pc.equal(kinds, "config")).as_py() or 0)
        if configs > (1 if self.seq == 0 else 0):
            return BROKEN
        if not np.array_equal(int_column(batch, "seq"), np.arange(self.seq, self.seq + rows)):
            return BROKEN
        is_tick = np.asarray(pc.equal(kinds, "tick").to_numpy(zero_copy_only=False), dtype=bool)
        if not np.array_equal(int_column(batch, "tick"), self.tick + np.cumsum(is_tick)):
            return BROKEN
        before = self.published + np.cumsum(is_publish) - is_publish  # messages published before each row
        if not np.array_equal(offsets[is_publish], before[is_publish]):
            return BROKEN
        named = (offsets >= 0) & ~is_publish
        is_seek = np.asarray(pc.equal(kinds, "seek").to_numpy(zero_copy_only=False), dtype=bool)
        unknown = (named & (offsets > before)) | (named & ~is_seek & (offsets == before))
        if np.any(unknown):  # (an unknown-offset ack_ignored is legal, but such a trace is judged in one process)
            if not is_in(kinds, ("ack_ignored", "nack_ignored"))[unknown].all():
                return BROKEN
            return f"{UNPUBLISHED_ANSWER} (seq {int(self.seq + np.argmax(unknown))})"
        self.seq += rows
        self.tick += int(is_tick.sum())
        self.published += int(is_publish.sum())
        return None


class KeyShards:
    """Each routing key's shard, computed once per distinct key."""

    def __init__(self, config: dict[str, object], shards: int) -> None:
        self.by_key = shard_of_key(config, shards)
        self.known: dict[str, int] = {}

    def per_row(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        """The shard of each row's key (0 where it has none), and where it has one."""
        rows = batch.num_rows
        keys = batch.column("key") if "key" in batch.schema.names else pa.nulls(rows, pa.string())
        encoded = pc.dictionary_encode(keys)
        distinct = encoded.dictionary.to_pylist()
        known, by_key = self.known, self.by_key
        for key in distinct:
            if key not in known:
                known[key] = by_key(key)
        key_shard = np.array([known[key] for key in distinct] or [0], dtype=np.int16)
        indices = np.asarray(encoded.indices.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        return key_shard[indices], np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def row_shards(
    code: np.ndarray, offsets: np.ndarray, key_shard: np.ndarray, has_key: np.ndarray, shard_of_offset: np.ndarray
) -> np.ndarray:
    """Each row's shard: by the offset it names (its message's key), else by the key it names, else all (-1)."""
    shard = np.full(len(code), -1, dtype=np.int16)
    named = (offsets >= 0) & (code != SEEK)
    shard[named] = shard_of_offset[offsets[named]]
    keyed = has_key & ~named
    shard[keyed] = key_shard[keyed]
    return shard


def route_to_files(
    path: Path, shards: int, config: dict[str, object], out: Path, batch_size: int = BATCH
) -> Routing | Unsharded:
    """Screen the trace (`Screen`) and write, for each row, its shard, its op's index and whether every shard sees it
    for its phase (or, selector buckets, as a publish), to files in `out` (see the module doc and `Routing`)."""
    key_shards = KeyShards(config, shards)
    buckets = {**CONFIG_DEFAULTS, **config}["selector"] == "buckets"
    shard_of_offset = np.zeros(1 << 16, dtype=np.int16)
    screen = Screen()
    op_starts, op_codes = ArrayFile(out / "op-starts", np.int64), ArrayFile(out / "op-codes", np.int8)
    op_count = 0
    zombie_open = False
    in_tick = False
    """Whether the op open at the end of the last batch is a tick."""
    files = [(out / name).open("wb") for name in ("shard", "op", "shown")]
    read = ("event", "seq", "tick", "key", "offset", "reason", "detail")
    try:
        for batch in trace_batches(path, batch_size, read):
            rows = batch.num_rows
            kinds = batch.column("event")
            offsets = int_column(batch, "offset")
            is_publish = np.asarray(pc.equal(kinds, "publish").to_numpy(zero_copy_only=False), dtype=bool)
            broken = screen.breaks(batch, kinds, is_publish, offsets)
            if broken is not None:
                return Unsharded(broken)
            seqs = int_column(batch, "seq")
            is_start = is_in(kinds, OP_STARTS)
            if zombie_open or bool(is_in(kinds, ZOMBIE_OPS).any()):
                names = kinds.to_pylist()
                for row in np.flatnonzero(is_start):  # a zombie op's first ack-class effect opens no op (KS-ACK-3)
                    if names[row] in ACK_CLASS and zombie_open:
                        is_start[row] = False
                        zombie_open = False
                    else:
                        zombie_open = names[row] in ZOMBIE_OPS
            op = op_count + np.cumsum(is_start)
            if op[0] == 0:
                return Unsharded("an event before the first op")
            code = kind_codes(kinds)
            op_starts.append(seqs[is_start])
            op_codes.append(code[is_start].astype(np.int8))
            op_count = int(op[-1])
            key_shard, has_key = key_shards.per_row(batch)
            published = screen.published
            new = int(is_publish.sum())
            if published > len(shard_of_offset):
                shard_of_offset = np.resize(shard_of_offset, max(2 * len(shard_of_offset), published))
            shard_of_offset[published - new : published] = key_shard[is_publish]
            shard = row_shards(code, offsets, key_shard, has_key, shard_of_offset)
            opened = np.where(is_start, np.arange(rows), -1)
            np.maximum.accumulate(opened, out=opened)
            is_tick = code == TICK
            tick_rows = np.where(opened >= 0, is_tick[np.maximum(opened, 0)], in_tick)
            in_tick = bool(tick_rows[-1])
            shown = shown_rows(batch, code, op, tick_rows, buckets)
            for file, column in zip(files, (shard, op.astype(np.int64), shown), strict=True):
                file.write(column.tobytes())
    finally:
        for file in files:
            file.close()
    events = screen.seq
    if events == 0:
        return Unsharded("the trace is empty")
    return Routing(path, out, events, screen.published, batch_size)


def shown_rows(
    batch: pa.RecordBatch, code: np.ndarray, op: np.ndarray, tick_rows: np.ndarray, buckets: bool
) -> np.ndarray:
    """Rows every shard sees, whichever key they name: the boundaries of a tick's phases (`shown_for_phases`) and,
    with selector buckets, every publish (the bucket checks read the other shards' messages, shard.py)."""
    shown = shown_for_phases(batch, code, op, tick_rows)
    if buckets:
        shown |= code == PUBLISH
    return shown


def shown_for_phases(batch: pa.RecordBatch, code: np.ndarray, op: np.ndarray, tick_rows: np.ndarray) -> np.ndarray:
    """Rows every shard sees for its tick's phases: in a tick, first and last of each run of one phase
    (merge.phase_boundaries), and the first and last phase rows of the batch and of each stretch of consecutive seqs
    in it (the run may go on elsewhere: a Spark partition may hold several files' rows in any order)."""
    shown = np.zeros(batch.num_rows, dtype=bool)
    phase = PHASE_OF_CODE[code]
    if "reason" in batch.schema.names:
        poison = pc.and_(pc.equal(batch.column("event"), "drop"), pc.equal(batch.column("reason"), "poison"))
        phase[np.asarray(poison.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)] = 2
    at = np.flatnonzero((phase > 0) & tick_rows)
    if not len(at):
        return shown
    danube = np.isin(code[at], [KINDS.index(kind) for kind in DANUBE_PHASE_3])
    mark = phase[at] * 2 + danube
    ops = op[at]
    first = np.ones(len(at), dtype=bool)
    first[1:] = (mark[1:] != mark[:-1]) | (ops[1:] != ops[:-1])
    seqs = int_column(batch, "seq")
    stretch = np.cumsum(np.diff(seqs, prepend=seqs[0]) != 1)[at]  # (consecutive seqs: one stretch)
    first[1:] |= stretch[1:] != stretch[:-1]
    last = np.ones(len(at), dtype=bool)
    last[:-1] = first[1:]
    shown[at[first | last]] = True
    return shown


def ledger_rows(batch: pa.RecordBatch, phase_only: list[bool]) -> Iterator[Row]:
    """The rows of a shard's batch the ledger pass reads (facts.py), leaving out rows shown for their phase only."""
    if not batch.num_rows:
        return
    names = batch.schema.names
    delayed = batch.column("deliver_at").is_valid().to_pylist() if "deliver_at" in names else [False] * batch.num_rows
    nothing = [None] * batch.num_rows
    cursors = batch.column("cursor").to_pylist() if "cursor" in names else nothing
    ranges = batch.column("ranges").to_pylist() if "ranges" in names else nothing
    persisted = [None if cursor is None else (cursor, held) for cursor, held in zip(cursors, ranges, strict=True)]
    rows = zip(
        batch.column("event").to_pylist(),
        batch.column("seq").to_pylist(),
        batch.column("offset").to_pylist() if "offset" in names else nothing,
        batch.column("consumer").to_pylist() if "consumer" in names else nothing,
        delayed,
        persisted,
        batch.column("key").to_pylist() if "key" in names else nothing,
        strict=True,
    )
    yield from compress(rows, map(not_, phase_only))  # (C loops: no Python frame per row)


def predict_shard(routing: Routing, shard: int, detail: str) -> str | None:
    """Predict the ledger's changes for one shard's keys from its own rows (in a worker: every change belongs to one
    key, and the rows that end a consumer's deliveries are every shard's) and write them to the routing's folder; or
    why the trace is not sharded."""
    files = ChangeFiles(routing.folder / f"changes-{shard}")
    made: list[Change] = []
    outcome: list[Prediction] = []
    for _ in pauses(ledger_stream(ledger_batches(routing.rows(shard, LEDGER_COLUMNS)), detail, made), outcome):
        if len(made) >= BATCH:  # (a change as a tuple costs five times its 21 bytes in the files)
            files.append(made)
            made.clear()
    if outcome[0].reason is not None:
        return outcome[0].reason
    files.append(made)
    files.close()
    return None


LEDGER_COLUMNS = ("event", "seq", "offset", "consumer", "deliver_at", "cursor", "ranges", "key")
"""The columns the ledger pass reads."""
RoutedBatch = tuple[pa.RecordBatch, list[int], list[bool]]
"""A batch of one shard's rows, each row's op index, and whether each is another shard's shown for its phase only."""


def ledger_batches(batches: Iterable[RoutedBatch]) -> Iterator[Row]:
    """The rows the ledger pass reads of a shard's routed batches, a FLUSH row after each batch."""
    for batch, _, phase_only in batches:
        yield from ledger_rows(batch, phase_only)
        yield FLUSH_ROW


def judge_shard(routing: Routing, shards: int, shard: int) -> ShardJudgment:
    """Judge one shard (in a worker process): its rows checked against the schema, then fed to its checker, with its
    own predicted changes to prove and the other shards' to apply (read from the routing's folder)."""
    ops = OpWindow(routing.ops.chunks(routing.events), routing.events)
    own = chain.from_iterable(routing.changes(shard).chunks())
    foreign = merged_chunks([routing.changes(number) for number in range(shards) if number != shard])
    return judge_batches(routing.rows(shard), ops, foreign, own, shard)


def judge_batches(
    batches: Iterable[RoutedBatch],
    ops: OpWindow,
    foreign: Iterable[list[Change]],
    own: Iterable[Change],
    shard: int,
    schema: bool = True,
) -> ShardJudgment:
    """Judge one shard's routed batches given the ops, the other shards' predicted changes (in seq order, a chunk at
    a time) and its own (check-trace's workers, validate-replay's tasks); `schema`: check each row against the schema
    first (validate-replay's format pass has)."""
    checker = ShardChecker(ops, foreign, own, shard == 0)
    for batch, indexes, phase_only in batches:
        if batch.num_rows:
            ops.load_through(int(batch.column("seq")[-1].as_py()), keep_from=max(checker.op_index - 1, 0))
        clean = schema_vouched_kinds(batch) if schema else None
        for event, index, shown in zip(batch_events(batch), indexes, phase_only, strict=True):
            if clean is not None and not shown and event["event"] not in clean:
                problem = schema_problem(event)
                if problem:
                    return ShardJudgment([], [Problem(int(event.get("seq", -1)), problem)], {}, {})
            checker.feed_routed(event, index, shown)
        if batch.num_rows:  # the changes before its last event are all made (an op's end is at or after it)
            checker.proof.settle(checker.current_seq)
    return checker.finish_shard()


def _ready() -> None:
    """A worker's first task: nothing (it starts the worker, which imports the checker, while the trace is routed)."""


def _predict_task(task: tuple[Routing, int, str]) -> str | None:
    return predict_shard(*task)


def _judge_task(task: tuple[Routing, int, int]) -> ShardJudgment:
    return measured(lambda: judge_shard(*task))


def measured(judge: Callable[[], ShardJudgment]) -> ShardJudgment:
    """A shard's judgment with its time and its process's peak memory; a shard that fails leaves the trace to one
    process, which says why."""
    started = time.perf_counter()
    try:
        with fewer_collections():
            judgment = judge()
    except Exception as error:
        judgment = ShardJudgment([], [Problem(-1, f"its checker failed ({type(error).__name__}: {error})")], {}, {})
    judgment.seconds = time.perf_counter() - started
    judgment.peak_rss = peak_rss()
    return judgment


@dataclass
class Sharded:
    """A trace's judgment in shards of keys (tracefile.check_trace makes it a TraceCheck)."""

    events: int
    anomalies: list[Anomaly]
    exercised: dict[str, int]
    config: dict[str, object]
    messages: int
    seconds: dict[str, float]
    """Where the time went: routing (in this process), the shards' processes, the merge, each shard."""
    workers_peak_rss: int
    """The peak memory of the largest worker, in bytes."""


def check_in_shards(path: Path, jobs: int) -> Sharded | Unsharded:
    """Judge a trace (JSON lines, a Parquet file or a folder of them) in `jobs` shards in `jobs` processes; why not,
    when it cannot be."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])  # forked from a server that imported the checker once
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        # The workers start (and the forkserver imports the checker) in a thread, while this one routes the trace.
        starting = threading.Thread(target=_start_workers, args=(pool, jobs), daemon=True)
        starting.start()
        try:
            return judge_in_shards_with(path, jobs, pool.map)
        finally:
            starting.join()


def _start_workers(pool: ProcessPoolExecutor, jobs: int) -> None:
    """Start the pool's workers (submitting a task waits until the forkserver has imported the checker)."""
    for _ in range(jobs):
        pool.submit(_ready)


def judge_jsonl_in_shards(path: Path, shards: int, mapper: Mapper, batch: int) -> Sharded | Unsharded:
    """A JSON lines trace: converted to Parquet parts by `mapper`'s tasks (jsonl.py), then judged as their folder."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ks-jsonl-") as folder:
        refused = convert_jsonl(path, Path(folder), shards, mapper)
        if refused is not None:
            return Unsharded(refused)
        converted = time.perf_counter() - started
        judged = judge_in_shards_with(Path(folder), shards, mapper, batch)
    if isinstance(judged, Sharded):
        judged.seconds = {"convert": converted, **judged.seconds}
    return judged


def judge_in_shards_with(path: Path, shards: int, mapper: Mapper = map, batch: int = BATCH) -> Sharded | Unsharded:
    """Judge a trace (JSON lines, a Parquet file, or a folder of them in name order) in `shards` shards, running the
    shards' tasks with `mapper` (tests: in this process)."""
    files = trace_files(path)
    if not path.is_dir() and not is_parquet(path):
        return judge_jsonl_in_shards(path, shards, mapper, batch)
    if not all(is_parquet(file) for file in files):
        return Unsharded("a file of the folder is not Parquet")
    try:
        first = next(batch_events(next(trace_batches(path, 1))))
        config = json.loads(str(first["detail"]))["config"]
    except (ValueError, KeyError, TypeError, IndexError, StopIteration, pa.ArrowInvalid, OSError):
        return Unsharded("its first row is not a config event that can be read")
    if not isinstance(config, dict) or config_problem(config) is not None:
        return Unsharded("its configuration is one the spec refuses")
    for file in files:
        schema = pq.ParquetFile(file).schema_arrow
        if {"seq", "tick", "event"} - set(schema.names) or set(schema.names) - set(columns()):
            return Unsharded("its columns are not the trace format's")
        if any(parquet_type_problem(name, schema.field(name).type) for name in schema.names):
            return Unsharded("a column's type is not the trace format's")
    detail = str(first["detail"])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ks-shards-") as folder:
        routing = route_to_files(path, shards, config, Path(folder), batch)
        if isinstance(routing, Unsharded):
            return routing
        routed = time.perf_counter()
        predicted = list(mapper(_predict_task, [(routing, shard, detail) for shard in range(shards)]))
        reasons = [reason for reason in predicted if reason is not None]
        if reasons:
            return Unsharded(reasons[0])
        judgments: list[ShardJudgment] = list(
            mapper(_judge_task, [(routing, shards, shard) for shard in range(shards)])
        )
        judged = time.perf_counter()
    merged = merge(judgments)
    if isinstance(merged, Unsharded):
        return merged
    whole = Checker()
    whole.feed(first)
    seconds = {"route": routed - started, "shards": judged - routed, "merge": time.perf_counter() - judged}
    seconds |= {f"shard {shard}": judgment.seconds for shard, judgment in enumerate(judgments)}
    return Sharded(
        routing.events,
        merged.anomalies,
        {name: count for name, count in merged.exercised.items() if whole.applies(name)},
        dict(whole.config),
        routing.published,
        seconds,
        max(judgment.peak_rss for judgment in judgments),
    )
