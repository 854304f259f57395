"""The sequence pass: the format rules of spec/trace.md over the physical order, and the trace's configuration.

Spark reads a trace as splits (a file, or a byte range of one). Within a split, rows arrive in file
order; a *run* is the rows of one split. Each task checks its runs locally (schema columns per event
kind, seq +1, tick rules, dense publish offsets) with vectorised Arrow code and reports a small
summary per run; the driver orders the runs by (file, split start) and checks that they chain. The
same pass sends the config event to the driver.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from ks_spec.trace import columns, event_kinds, schema

from ks_spark.validation.reader import BLOCK_COLUMN, CORRUPT_COLUMN, FILE_COLUMN, ROW_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


LIST_COLUMNS = ("filters", "ranges")
"""Sent to the pass as JSON text (see `sequence_input`): the pass checks where they are set, never their lists."""

RUN, PROBLEM, META = "run", "problem", "meta"
CORRUPT_PREFIX = "corrupt:"
"""A problem row whose text starts with this carries the raw line Spark could not parse."""

OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("rtype", pa.string()),
        pa.field("file", pa.string()),
        pa.field("block", pa.int64()),
        pa.field("idx", pa.int64()),
        pa.field("row", pa.int64()),
        pa.field("seq", pa.int64()),
        pa.field("tick", pa.int64()),
        pa.field("event", pa.string()),
        pa.field("a", pa.int64()),
        pa.field("b", pa.int64()),
        pa.field("c", pa.int64()),
        pa.field("d", pa.int64()),
        pa.field("text", pa.string()),
    ]
)
"""One schema for every row the pass emits; `rtype` says which fields mean what."""

OUTPUT_DDL = (
    "rtype string, file string, block bigint, idx bigint, row bigint, seq bigint, tick bigint, event string, "
    "a bigint, b bigint, c bigint, d bigint, text string"
)


KindRules = dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...] | None, tuple[tuple[str, int], ...]]]
"""Per event kind: required columns, columns that must be null, allowed reasons, integer minimums."""


@cache
def kind_rules() -> KindRules:
    """Per event kind: required columns, columns that must be null, and the allowed reasons (None: any)."""
    definitions = schema()["definitions"]
    rules = {}
    data_columns = [c for c in columns() if c not in ("seq", "tick", "event")]
    for kind, info in event_kinds().items():
        used = set(info.required) | set(info.optional)
        forbidden = tuple(c for c in data_columns if c not in used)
        properties = definitions[f"event_{kind}"]["properties"]
        reason = properties.get("reason", {})
        reasons = tuple(reason["enum"]) if "enum" in reason else None
        minimums = tuple(
            (name, int(spec["minimum"]))
            for name, spec in properties.items()
            if name in used and isinstance(spec, dict) and "minimum" in spec
        )
        rules[kind] = (info.required, forbidden, reasons, minimums)
    return rules


@dataclass
class RunState:
    """What a task knows about one run (split) while it reads it, carried across Arrow batches."""

    file: str
    block: int
    first_row: int | None = None
    rows: int = 0
    first_seq: int | None = None
    first_tick: int | None = None
    first_event: str | None = None
    last_seq: int | None = None
    last_tick: int | None = None
    publishes: int = 0
    first_pub: int | None = None
    first_pub_idx: int = 0
    last_pub: int | None = None
    excess: int | None = None  # max over offsets of non-publish events of (offset - publishes before it)
    excess_idx: int = -1
    excess_seq: int = -1
    excess_offset: int = -1
    problem: tuple[int, int | None, str] | None = None  # (local index, seq, "field 'x': problem")
    out: dict[str, list[Any]] = field(default_factory=lambda: {f.name: [] for f in OUTPUT_SCHEMA})

    def note_problem(self, index: int, seq: int | None, text: str) -> None:
        """Keep the earliest problem of the run."""
        if self.problem is None or index < self.problem[0]:
            self.problem = (index, seq, text)

    def add(self, **values: Any) -> None:
        """Queue one output row."""
        for name, column in self.out.items():
            column.append(values.get(name))


def sequence_input(events: DataFrame) -> DataFrame:
    """The events as the pass reads them: the list columns as JSON text, null where the list is null.

    Spark's Arrow writer fills a run of null lists in time quadratic in its length (40 us a row at 65,536
    rows a batch), and `filters` and `ranges` are null in nearly every row; text columns cost nothing.
    """
    from pyspark.sql import functions as F

    return events.select(*[F.to_json(F.col(c)).alias(c) if c in LIST_COLUMNS else F.col(c) for c in events.columns])


def _np(array: pa.Array | pa.ChunkedArray, fill: int = -1) -> np.ndarray[Any, Any]:
    return np.asarray(pc.fill_null(array, fill).to_numpy(zero_copy_only=False))


def _bool(array: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, Any]:
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)


def _check_slice(state: RunState, batch: pa.RecordBatch, rules: KindRules) -> None:
    """Check and summarise rows that all belong to `state`'s run (vectorised over the slice)."""
    base = state.rows
    n = batch.num_rows
    if n == 0:
        return
    col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    seq_arr, tick_arr, event_arr = col["seq"], col["tick"], col["event"]
    seq = _np(seq_arr)
    tick = _np(tick_arr)
    if state.first_seq is None:
        state.first_row = col[ROW_COLUMN][0].as_py()
        state.first_seq = seq_arr[0].as_py()
        state.first_tick = tick_arr[0].as_py()
        state.first_event = event_arr[0].as_py()
    # Rows Spark could not parse at all (JSON lines only).
    corrupt = col[CORRUPT_COLUMN]
    if corrupt.null_count < n:
        index = int(np.flatnonzero(_bool(pc.is_valid(corrupt)))[0])
        # The driver re-reads this one line to name the field (tasks do not load the JSON Schema).
        state.note_problem(base + index, None, f"{CORRUPT_PREFIX}{corrupt[index].as_py()}")
    for name in ("seq", "tick", "event"):
        nulls = col[name].null_count
        if nulls:
            index = int(np.flatnonzero(_bool(pc.is_null(col[name])))[0])
            if corrupt.null_count == n or not corrupt[index].is_valid:
                state.note_problem(base + index, seq_arr[index].as_py(), f"field '{name}': required but missing")
    # Per event kind: known kind, required columns present, unused columns null, reasons from the enum.
    encoded = pc.dictionary_encode(event_arr)
    kinds = encoded.dictionary.to_pylist()
    codes = _np(encoded.indices)
    for code, kind in enumerate(kinds):
        mask = codes == code
        first = int(np.argmax(mask))
        if kind not in rules:
            state.note_problem(base + first, int(seq[first]), f"field 'event': unknown event kind {kind!r}")
            continue
        required, forbidden, reasons, minimums = rules[kind]
        for name, minimum in minimums:
            values = col[name]
            low = _bool(pc.less(values, minimum)) & mask
            if low.any():
                index = int(np.argmax(low))
                state.note_problem(
                    base + index,
                    int(seq[index]),
                    f"field '{name}': {values[index].as_py()} is less than the minimum of {minimum}",
                )
        for name in required:
            nulls = _bool(pc.is_null(col[name])) & mask
            if nulls.any():
                index = int(np.argmax(nulls))
                state.note_problem(
                    base + index, int(seq[index]), f"field '{name}': required for a '{kind}' event but missing"
                )
        for name in forbidden:
            if col[name].null_count == n:
                continue
            present = _bool(pc.is_valid(col[name])) & mask
            if present.any():
                index = int(np.argmax(present))
                state.note_problem(
                    base + index,
                    int(seq[index]),
                    f"field '{name}': not used by a '{kind}' event, must be null or absent",
                )
        if reasons is not None:
            allowed = _bool(pc.is_in(col["reason"], value_set=pa.array(reasons)))
            wrong = mask & ~allowed & _bool(pc.is_valid(col["reason"]))
            if wrong.any():
                index = int(np.argmax(wrong))
                state.note_problem(
                    base + index,
                    int(seq[index]),
                    f"field 'reason': {col['reason'][index].as_py()!r} is not a reason of a '{kind}' event",
                )
    is_tick = np.zeros(n, dtype=bool)
    is_pub = np.zeros(n, dtype=bool)
    is_config = np.zeros(n, dtype=bool)
    for code, kind in enumerate(kinds):
        if kind == "tick":
            is_tick = codes == code
        elif kind == "publish":
            is_pub = codes == code
        elif kind == "config":
            is_config = codes == code
    # seq +1 per row, tick +1 exactly at tick events.
    previous_seq = np.concatenate(([state.last_seq if state.last_seq is not None else seq[0] - 1], seq[:-1]))
    wrong_seq = seq != previous_seq + 1
    if state.last_seq is None:
        wrong_seq[0] = False  # the run's first row is chained by the driver
    if wrong_seq.any():
        index = int(np.argmax(wrong_seq))
        state.note_problem(
            base + index, int(seq[index]), f"field 'seq': expected {previous_seq[index] + 1}, got {seq[index]}"
        )
    previous_tick = np.concatenate(([state.last_tick if state.last_tick is not None else tick[0]], tick[:-1]))
    expected_tick = previous_tick + is_tick
    wrong_tick = tick != expected_tick
    if state.last_tick is None:
        wrong_tick[0] = False
    if wrong_tick.any():
        index = int(np.argmax(wrong_tick))
        why = "a 'tick' event advances time by exactly 1" if is_tick[index] else "time advances only at 'tick' events"
        state.note_problem(
            base + index, int(seq[index]), f"field 'tick': expected {expected_tick[index]}, got {tick[index]} ({why})"
        )
    wrong_config = is_config & (seq != 0)
    if wrong_config.any():
        index = int(np.argmax(wrong_config))
        state.note_problem(base + index, int(seq[index]), "field 'event': a trace has exactly one 'config' event")
    # Publish offsets dense; other offsets already published (checked against the run's base by the driver).
    offsets = _np(col["offset"])
    pubs_before = state.publishes + np.cumsum(is_pub) - is_pub
    pub_offsets = offsets[is_pub]
    if pub_offsets.size:
        previous = np.concatenate(
            ([state.last_pub if state.last_pub is not None else pub_offsets[0] - 1], pub_offsets[:-1])
        )
        wrong_pub = pub_offsets != previous + 1
        if wrong_pub.any():
            where = np.flatnonzero(is_pub)[int(np.argmax(wrong_pub))]
            state.note_problem(
                base + int(where),
                int(seq[where]),
                f"field 'offset': publish offsets are dense; expected {previous[int(np.argmax(wrong_pub))] + 1}, "
                f"got {offsets[where]}",
            )
        if state.first_pub is None:
            state.first_pub = int(pub_offsets[0])
            state.first_pub_idx = base + int(np.flatnonzero(is_pub)[0])
        state.last_pub = int(pub_offsets[-1])
    unknown_offset = _bool(pc.equal(col["reason"], "unknown-offset"))
    named = (offsets >= 0) & ~is_pub & ~unknown_offset
    if named.any():
        excess = np.where(named, offsets - pubs_before, np.iinfo(np.int64).min)
        index = int(np.argmax(excess))
        if state.excess is None or excess[index] > state.excess:
            state.excess = int(excess[index])
            state.excess_idx = base + index
            state.excess_seq = int(seq[index])
            state.excess_offset = int(offsets[index])
    for row in np.flatnonzero(is_config).tolist():  # (the first row's config event: the driver reads it)
        detail = col["detail"][row].as_py()
        state.add(rtype=META, file=state.file, block=state.block, seq=int(seq[row]), event="config", text=detail)
    state.publishes += int(is_pub.sum())
    state.rows += n
    state.last_seq = int(seq[-1])
    state.last_tick = int(tick[-1])


def _finish(state: RunState) -> pa.RecordBatch:
    extra = {
        "last_pub": state.last_pub,
        "first_pub_idx": state.first_pub_idx,
        "excess": state.excess,
        "excess_idx": state.excess_idx,
        "excess_seq": state.excess_seq,
        "excess_offset": state.excess_offset,
        "first_row": state.first_row,
    }
    state.add(
        rtype=RUN,
        file=state.file,
        block=state.block,
        idx=state.rows,
        row=state.first_row,
        seq=state.first_seq,
        tick=state.first_tick,
        event=state.first_event,
        a=state.last_seq,
        b=state.last_tick,
        c=state.publishes,
        d=state.first_pub,
        text=json.dumps(extra),
    )
    if state.problem is not None:
        index, seq, text = state.problem
        state.add(rtype=PROBLEM, file=state.file, block=state.block, idx=index, seq=seq, text=text)
    return pa.RecordBatch.from_pydict(state.out, schema=OUTPUT_SCHEMA)


def sequence_function(rules: KindRules) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow body, with the schema's rules computed on the driver (tasks never read spec files)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return sequence_pass(batches, rules)

    return run


def sequence_pass(batches: Iterator[pa.RecordBatch], rules: KindRules) -> Iterator[pa.RecordBatch]:
    """Split each partition's rows into runs, check them, emit their summaries and the config event."""
    state: RunState | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        files = batch.column(batch.schema.get_field_index(FILE_COLUMN))
        blocks = batch.column(batch.schema.get_field_index(BLOCK_COLUMN))
        # Boundaries where the split changes inside this batch.
        file_codes = _np(pc.dictionary_encode(files).indices)
        block_values = _np(blocks)
        change = np.flatnonzero((file_codes[1:] != file_codes[:-1]) | (block_values[1:] != block_values[:-1])) + 1
        starts = [0, *change.tolist()]
        ends = [*change.tolist(), batch.num_rows]
        for start, end in zip(starts, ends, strict=True):
            file = files[start].as_py()
            block = int(block_values[start])
            if state is None or state.file != file or state.block != block:
                if state is not None:
                    yield _finish(state)
                state = RunState(file, block)
            _check_slice(state, batch.slice(start, end - start), rules)
            if len(state.out["rtype"]) > 65536:
                yield pa.RecordBatch.from_pydict(state.out, schema=OUTPUT_SCHEMA)
                state.out = {f.name: [] for f in OUTPUT_SCHEMA}
    if state is not None:
        yield _finish(state)
