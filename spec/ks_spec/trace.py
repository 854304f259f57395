"""The event trace format v1 (spec/trace.md): columns, reading, writing and validation.

Everything here is derived from `spec/schemas/trace-event-v1.schema.json`, the single source
of the format: the column list, each event kind's required and optional columns, and the
Arrow schema used for Parquet.

Long because reading, writing and validating the format (JSON lines and Parquet, one-line errors naming file,
line and field) all derive from the one schema here.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from ks_spec import paths
from ks_spec.errors import MissingInput, UserError

Event = dict[str, Any]
"""One trace event: a plain dict with the columns of spec/trace.md (absent means null)."""

OP_EVENTS = frozenset(
    {
        "config",
        "publish",
        "consumer_added",
        "consumer_removed",
        "consumer_disconnected",
        "consumer_reconnected",
        "permits_granted",
        "tick",
        "restart",
        "seek",
        "quiescent",
        "key_released",
        "key_skipped",
        "zombie_ack",
        "zombie_nack",
        "extend",
        "segment_sealed",
        "segment_created",
    }
)
"""Events that record an operation (written by whoever drives the dispatcher)."""

RESOLUTION_EVENTS = {"ack": "acked", "drop": "dropped", "dead_letter": "dead_lettered", "filter": "filtered"}
"""Events that resolve a message, and the resolution kind each records."""


@cache
def schema() -> dict[str, Any]:
    """The trace event JSON Schema (draft-07), loaded once."""
    with open(paths.TRACE_EVENT_SCHEMA, encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


@dataclass(frozen=True)
class EventKind:
    """What the schema says about one event kind."""

    name: str
    required: tuple[str, ...]
    optional: tuple[str, ...]


@cache
def event_kinds() -> dict[str, EventKind]:
    """Every event kind with its required and optional columns (beyond seq, tick, event)."""
    kinds: dict[str, EventKind] = {}
    for name, definition in schema()["definitions"].items():
        if not name.startswith("event_"):
            continue
        kind = name.removeprefix("event_")
        required = tuple(c for c in definition["required"] if c not in ("seq", "tick", "event"))
        used = [
            c
            for c, spec in definition["properties"].items()
            if spec != {"type": "null"} and c not in ("seq", "tick", "event")
        ]
        optional = tuple(c for c in used if c not in required)
        kinds[kind] = EventKind(kind, required, optional)
    return kinds


def _column_types() -> dict[str, Any]:
    columns: dict[str, Any] = {}
    for definition in schema()["definitions"].values():
        if "properties" not in definition:
            continue
        for column, spec in definition["properties"].items():
            if spec != {"type": "null"} and "type" in spec:
                columns.setdefault(column, spec)
    return columns


@cache
def columns() -> tuple[str, ...]:
    """All columns in their canonical order (the order of spec/trace.md)."""
    order = [
        "seq",
        "tick",
        "event",
        "offset",
        "key",
        "consumer",
        "attempt",
        "capacity",
        "filters",
        "ranges",
        "hash_name",
        "reason",
        "cursor",
        "hash",
        "segment",
        "bucket",
        "entry",
        "buckets",
        "range_lo",
        "range_hi",
        "predecessor",
        "second_predecessor",
        "deliver_at",
        "detail",
    ]
    known = set(_column_types()) | {"event"}
    if set(order) != known:
        raise AssertionError(f"trace columns drifted from the schema: {sorted(set(order) ^ known)}")
    return tuple(order)


def _arrow_type(spec: dict[str, Any]) -> pa.DataType:
    kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    base = next(k for k in kinds if k != "null")
    if base == "integer":
        return pa.int64()
    if base == "string":
        return pa.string()
    if base == "array":
        items = spec["items"]
        if items.get("type") == "string":
            return pa.list_(pa.string())
        return pa.list_(pa.list_(pa.int64()))
    raise AssertionError(f"no Arrow type for {spec}")


@cache
def arrow_schema() -> pa.Schema:
    """The Parquet/Arrow schema of a trace: one nullable column per trace column."""
    types = _column_types()
    fields = []
    for column in columns():
        arrow = pa.string() if column == "event" else _arrow_type(types[column])
        fields.append(pa.field(column, arrow, nullable=column not in ("seq", "tick", "event")))
    return pa.schema(fields, metadata={b"keyshared.trace_version": b"1"})


@cache
def _fast_validator(kind: str) -> Callable[[Event], Any]:
    definitions = schema()["definitions"]
    return fastjsonschema.compile({"definitions": definitions, "$ref": f"#/definitions/event_{kind}"})


@cache
def _detailed_validator(kind: str) -> jsonschema.Draft7Validator:
    definitions = schema()["definitions"]
    return jsonschema.Draft7Validator({"definitions": definitions, "$ref": f"#/definitions/event_{kind}"})


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, repr=False)
class NonInteger:
    """A JSON number no int64 column can hold as written (96.0, 1e3, 2**64): it fails every type check."""

    text: str

    def __repr__(self) -> str:
        """The number as written, so schema messages quote it as the file does."""
        return self.text


def _json_int(text: str) -> int | NonInteger:
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else NonInteger(text)


def parse_line(line: str) -> Any:
    """One JSON line as a value; numbers with a fraction or exponent, or beyond int64, become NonInteger."""
    return json.loads(line, parse_float=NonInteger, parse_int=_json_int)


def parquet_type_problem(column: str, actual: pa.DataType) -> str | None:
    """None if a Parquet column of this type reads losslessly as the format's column, else "field 'x': problem".

    Integers of any width whose every value fits in int64 are read as int64 (int8 to int64, uint8 to uint32);
    large strings and large lists read as strings and lists.
    """
    expected = arrow_schema().field(column).type
    if _readable_as(actual, expected):
        return None
    return f"field '{column}': column type {actual}, expected {expected}"


def _readable_as(actual: pa.DataType, expected: pa.DataType) -> bool:
    if actual == expected:
        return True
    if pa.types.is_int64(expected):
        return bool(pa.types.is_signed_integer(actual) or actual in (pa.uint8(), pa.uint16(), pa.uint32()))
    if pa.types.is_string(expected):
        return bool(pa.types.is_string(actual) or pa.types.is_large_string(actual))
    if pa.types.is_list(expected) and (pa.types.is_list(actual) or pa.types.is_large_list(actual)):
        return _readable_as(actual.value_type, expected.value_type)
    return False


def schema_problem(event: Any) -> str | None:
    """None if `event` matches the schema, else "field 'x': problem" for its first problem."""
    if not isinstance(event, dict):
        return f"field '(event)': expected a JSON object, got {type(event).__name__}"
    kind = event.get("event")
    if not isinstance(kind, str) or kind not in event_kinds():
        return f"field 'event': unknown event kind {kind!r}"
    try:
        _fast_validator(kind)(event)
        return None
    except fastjsonschema.JsonSchemaException:
        pass
    errors = sorted(_detailed_validator(kind).iter_errors(event), key=lambda e: list(e.absolute_path))
    if not errors:  # the two libraries disagree; trust the slower, reference one
        return None
    error = errors[0]
    if error.validator == "required":
        missing = str(error.message).split("'")[1]
        return f"field '{missing}': required for a '{kind}' event but missing"
    if error.validator == "additionalProperties":
        return f"field '(event)': {error.message}"
    place = ".".join(str(p) for p in error.absolute_path) or "(event)"
    if list(error.absolute_path) and error.validator == "type" and error.validator_value == "null":
        return f"field '{place}': not used by a '{kind}' event, must be null or absent"
    if isinstance(error.instance, NonInteger) and "integer" in str(error.validator_value):
        return f"field '{place}': {error.instance.text} is not an int64 written as an integer (no fraction or exponent)"
    return f"field '{place}': {error.message}"


@dataclass
class SequenceRules:
    """The rules of spec/trace.md section 2 that span events, checked one event at a time."""

    next_seq: int = 0
    tick: int = 0
    next_offset: int = 0
    seen_config: bool = False
    problems: list[str] = field(default_factory=list)

    def check(self, event: Event) -> str | None:
        """None if `event` may follow the events seen so far, else "field 'x': problem"."""
        kind = event["event"]
        if self.next_seq == 0 and kind != "config":
            return f"field 'event': the first event must be 'config', got '{kind}'"
        if kind == "config" and self.seen_config:
            return "field 'event': a trace has exactly one 'config' event, at seq 0"
        if kind == "config":
            problem = _config_detail_problem(event["detail"])
            if problem:
                return problem
        self.seen_config = True
        if event["seq"] != self.next_seq:
            return f"field 'seq': expected {self.next_seq}, got {event['seq']}"
        self.next_seq += 1
        expected_tick = self.tick + 1 if kind == "tick" else self.tick
        if event["tick"] != expected_tick:
            why = (
                "a 'tick' event advances time by exactly 1" if kind == "tick" else "time advances only at 'tick' events"
            )
            return f"field 'tick': expected {expected_tick}, got {event['tick']} ({why})"
        self.tick = expected_tick
        offset = event.get("offset")
        if kind == "publish":
            if offset != self.next_offset:
                return f"field 'offset': publish offsets are dense from 0; expected {self.next_offset}, got {offset}"
            self.next_offset += 1
        elif offset is not None and offset >= self.next_offset:
            if kind == "seek" and offset == self.next_offset:
                return None  # a seek may name the end of the log (spec section 14)
            if not (kind in ("ack_ignored", "nack_ignored") and event.get("reason") == "unknown-offset"):
                return f"field 'offset': {offset} has not been published"
        return None


def _config_detail_problem(detail: str) -> str | None:
    try:
        parsed = json.loads(detail)
    except json.JSONDecodeError as error:
        return f"field 'detail': not valid JSON ({error.msg})"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("config"), dict):
        return "field 'detail': must be a JSON object with a 'config' object"
    if parsed.get("trace_version") != 1:
        return f"field 'detail': trace_version must be 1, got {parsed.get('trace_version')!r}"
    return None


def _atomic_target(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def write_jsonl(events: Iterable[Event], path: Path) -> int:
    """Write events as JSON lines atomically (all or nothing); return the number written."""
    fd, temporary = _atomic_target(path)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for event in events:
                handle.write(json.dumps(compact(event), ensure_ascii=False, separators=(",", ":")))
                handle.write("\n")
                count += 1
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return count


def compact(event: Event) -> Event:
    """The event without null columns, in canonical column order (the JSON lines form)."""
    return {c: event[c] for c in columns() if event.get(c) is not None}


def to_table(events: Iterable[Event]) -> pa.Table:
    """Events as an Arrow table with the trace schema."""
    data: dict[str, list[Any]] = {c: [] for c in columns()}
    for event in events:
        for column in columns():
            data[column].append(event.get(column))
    return pa.Table.from_pydict(data, schema=arrow_schema())


def write_parquet(events: Iterable[Event], path: Path, rows_per_group: int = 1_000_000) -> int:
    """Write events as one Parquet file atomically; return the number written."""
    fd, temporary = _atomic_target(path)
    os.close(fd)
    count = 0
    try:
        with pq.ParquetWriter(temporary, arrow_schema(), compression="zstd") as writer:
            batch: list[Event] = []
            for event in events:
                batch.append(event)
                if len(batch) >= rows_per_group:
                    writer.write_table(to_table(batch))
                    count += len(batch)
                    batch = []
            if batch:
                writer.write_table(to_table(batch))
                count += len(batch)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return count


def write_trace(events: Iterable[Event], path: Path) -> int:
    """Write a trace, as Parquet when the name ends in .parquet, else as JSON lines."""
    if path.suffix == ".parquet":
        return write_parquet(events, path)
    return write_jsonl(events, path)


def trace_files(path: Path) -> list[Path]:
    """The files of a trace: the file itself, or a folder's Parquet files in name order."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and not p.name.startswith("."))
        if not files:
            raise MissingInput(f"{path}: folder holds no .parquet files")
        return files
    if not path.exists():
        raise MissingInput(f"{path}: no such file or folder")
    return [path]


def is_parquet(path: Path) -> bool:
    """True if the file starts with Parquet's magic bytes."""
    with open(path, "rb") as handle:
        return handle.read(4) == b"PAR1"


def read_events(path: Path) -> Iterator[tuple[str, Event]]:
    """Yield ("file:line", event) for every event of a trace file or folder.

    Raises UserError naming the file and line for input that is not JSON or not Parquet; the
    events themselves are not validated here (see `validate_trace`).
    """
    for file in trace_files(path):
        reader = _read_parquet(file) if is_parquet(file) else _read_jsonl(file)
        for where, event, _ in reader:
            yield where, event


def read_checked_events(path: Path) -> Iterator[tuple[str, Event, str | None]]:
    """Like `read_events`, with each event's `schema_problem` (None when it matches the schema).

    Rows are checked a batch at a time where Arrow can prove a kind's rows match (`schema_vouched_kinds`) and one
    by one otherwise, so the problem reported is always `schema_problem`'s."""
    for file in trace_files(path):
        yield from _read_parquet(file, checked=True) if is_parquet(file) else _read_jsonl(file, checked=True)


JSON_CHUNK = 4 << 20
"""The bytes of JSON lines read as one Arrow table (`_read_jsonl`): whole lines, so a little more."""
BOM = b"\xef\xbb\xbf"


def json_lines_table(data: bytes, at_start: bool) -> pa.Table | str:
    """Whole JSON lines (`at_start`: the file's first) as an Arrow table of the format's columns, holding the events
    the line reader reads from them (a field written `null` left out); or why it may not (the line reader must read
    them then).

    Given the schema, Arrow's reader refuses a number with a fraction or exponent or beyond int64, a value of
    another type, a field the format has not, a line that is no object, a raw control character in a string (and
    a few lines the line reader reads: a key given twice, a lone surrogate). Checked here: as many rows as lines
    that are not blank (two values on a line, or a line the line reader ends at a lone carriage return, differ),
    strings that are UTF-8, and a byte order mark at the file's start only. A field written `null` is read absent,
    as the format has it (an `Event` may leave a null field out; the schema takes null as absent)."""
    if data.startswith(BOM) and not at_start:
        return "a byte order mark after the file's start"
    if data.count(b"\r") != data.count(b"\r\n") + data.endswith(b"\r"):
        return "a carriage return that ends a line alone"
    lines = sum(1 for line in data.split(b"\n") if line.strip(JSON_BLANK_BYTES))
    schema = arrow_schema()
    if lines == 0:
        return schema.empty_table()
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    try:
        read = pa_json.read_json(pa.BufferReader(data), parse_options=options)
        table = pa.Table.from_arrays(read.columns, schema=schema)  # (Arrow refused nulls in the required columns)
        table.validate(full=True)  # (strings that are not UTF-8 are found here)
    except (pa.ArrowException, ValueError) as error:
        return _first_line(error)
    if table.num_rows != lines:
        return f"{table.num_rows} events read from {lines} lines (a line holds more than one JSON value)"
    return table


def _unproven_events(batches: list[pa.RecordBatch], vouched: list[frozenset[str]]) -> Iterator[Event]:
    """The events of the rows whose kind is not among their batch's `vouched` kinds, batch by batch (grouped by
    kind)."""
    for batch, clean in zip(batches, vouched, strict=True):
        kinds = batch.column("event")
        distinct = pc.unique(kinds)
        for position, kind in enumerate(distinct.to_pylist()):
            if kind not in clean:
                yield from batch_events(batch.filter(pc.equal(kinds, distinct[position])))


def _read_jsonl(file: Path, checked: bool = False) -> Iterator[tuple[str, Event, str | None]]:
    """The file's events with their place and, if `checked`, each one's `schema_problem`: read by Arrow a stretch
    of lines at a time (`json_lines_table`), with the line reader from the first stretch Arrow may not read, or,
    checked, whose rows do not all match the schema: a problem is named as the line reader names it (a required
    field written `null`, which Arrow reads absent, included). Arrow leaves a field written `null` out of its event,
    the line reader keeps it as None: the checker judges both alike (tests/test_trace_jsonl_reader.py)."""
    start = lines_before = 0
    place = f"{file}:"
    with open(file, "rb") as handle:
        while data := handle.read(JSON_CHUNK):
            if not data.endswith(b"\n"):
                data += handle.readline()
            table = json_lines_table(data, start == 0)
            batches = [] if isinstance(table, str) else table.to_batches()
            vouched = [schema_vouched_kinds(batch) for batch in batches] if checked else []
            if isinstance(table, str) or (checked and any(map(schema_problem, _unproven_events(batches, vouched)))):
                yield from _read_json_lines(file, start, lines_before, checked)
                return
            lines = data.count(b"\n") + (not data.endswith(b"\n"))
            numbers: Iterable[int] = (
                range(lines_before + 1, lines_before + 1 + lines)  # (no blank line: one event a line)
                if table.num_rows == lines
                else (n for n, line in enumerate(data.split(b"\n"), lines_before + 1) if line.strip(JSON_BLANK_BYTES))
            )
            numbered = iter(numbers)
            for index, batch in enumerate(batches):
                clean = vouched[index] if checked else None
                for event, number in zip(batch_events(batch), numbered, strict=False):
                    problem = None if clean is None or event["event"] in clean else schema_problem(event)
                    yield f"{place}{number}", event, problem
            start += len(data)
            lines_before += data.count(b"\n")


def _read_json_lines(
    file: Path, start: int, lines_before: int, checked: bool
) -> Iterator[tuple[str, Event, str | None]]:
    """The line reader: the file's events from byte `start` (a line's start, after `lines_before` lines) one line at
    a time, each line's problem named with its number."""
    # utf-8-sig: a byte order mark opening the file is skipped (spec/trace.md section 6); one elsewhere is an error.
    # surrogateescape keeps a bad byte in its line, so the error names that line, not the first of its buffer.
    with open(file, "rb") as raw:
        raw.seek(start)
        handle = io.TextIOWrapper(raw, encoding="utf-8-sig" if start == 0 else "utf-8", errors="surrogateescape")
        for line_no, line in enumerate(handle, start=lines_before + 1):
            if not line.isascii() and not _is_utf8(line):
                raise UserError(f"{file}:{line_no}: field '(line)': not valid UTF-8")
            if not line.strip(JSON_BLANK):  # a blank line holds no event; line numbers still count it
                continue
            try:
                event = parse_line(line)
            except json.JSONDecodeError as error:
                raise UserError(f"{file}:{line_no}: field '(line)': not valid JSON ({error.msg})") from None
            yield f"{file}:{line_no}", event, schema_problem(event) if checked else None


def line_problem(line: str) -> str | None:
    """The first problem of one JSON line read with surrogateescape, as `field 'x': problem`, or None."""
    if not line.isascii() and not _is_utf8(line):
        return "field '(line)': not valid UTF-8"
    try:
        return schema_problem(parse_line(line))
    except json.JSONDecodeError as error:
        return f"field '(line)': not valid JSON ({error.msg})"


JSON_BLANK = " \t\r\n"
JSON_BLANK_BYTES = JSON_BLANK.encode()
"""JSON's whitespace: a JSON line of nothing else is blank, and skipped (by the Spark reader too)."""


def _is_utf8(line: str) -> bool:
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a byte surrogateescape kept: the file's bytes were not UTF-8 there
        return False
    return True


def _read_parquet(file: Path, checked: bool = False) -> Iterator[tuple[str, Event, str | None]]:
    """The file's events with their place and, if `checked`, each one's `schema_problem` (else None): a batch's
    rows of the kinds `schema_vouched_kinds` proves are None at once, the others are validated one by one."""
    try:
        # pre_buffer off: with it, iter_batches kept every row group's buffers (100M events: 700 MB and growing).
        parquet = pq.ParquetFile(file, pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as error:
        raise UserError(f"{file}: not a readable Parquet file ({_first_line(error)})") from None
    names = set(parquet.schema_arrow.names)
    missing = [c for c in ("seq", "tick", "event") if c not in names]
    if missing:
        raise UserError(f"{file}: field '{missing[0]}': required column is missing")
    unknown = sorted(names - set(columns()))
    if unknown:
        raise UserError(f"{file}: field '{unknown[0]}': not a column of the trace format v1")
    for name in parquet.schema_arrow.names:
        problem = parquet_type_problem(name, parquet.schema_arrow.field(name).type)
        if problem:
            raise UserError(f"{file}: {problem}")
    place = f"{file}:"
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=65536):
            clean = schema_vouched_kinds(batch) if checked else None
            for event in batch_events(batch):
                row += 1
                problem = None if clean is None or event["event"] in clean else schema_problem(event)
                yield f"{place}{row}", event, problem
    except (pa.ArrowInvalid, OSError) as error:
        raise UserError(f"{file}:{row + 1}: not a readable Parquet file ({_first_line(error)})") from None


def batch_events(batch: pa.RecordBatch) -> Iterator[Event]:
    """The events of an Arrow batch of trace columns, null columns left out of each event.

    Column by column, skipping the columns the batch never fills: three times faster than row dicts. (Each row's
    values are as many as `names` by construction: a `strict` zip per row would cost a quarter of the reading.)
    """
    filled = [i for i, column in enumerate(batch.columns) if column.null_count < len(column)]
    names = [batch.schema.names[i] for i in filled]
    for values in zip(*(batch.column(i).to_pylist() for i in filled), strict=True):
        yield {k: v for k, v in zip(names, values) if v is not None}  # noqa: B905 (as many by construction)


def schema_vouched_kinds(batch: pa.RecordBatch) -> frozenset[str]:
    """The event kinds whose every row in `batch` (of the format's column types) is proven to match the schema.

    Column by column with Arrow compute, a fraction of the cost of validating each row. A kind left out is not
    known to be bad, only unproven (a constraint this does not prove, such as a list column's items): its rows are
    validated one by one. The proof never accepts a row `schema_problem` refuses (tests/test_trace_format.py).

    No Python value is turned into an Arrow one here (a kind is compared as the batch's own scalar, constants and
    enums on the column's distinct values in Python): pyarrow imports pandas to convert one, a second at start-up."""
    if "event" not in batch.schema.names:
        return frozenset()
    kinds = batch.column("event")
    vouched = set()
    distinct = pc.unique(kinds)
    for position, kind in enumerate(distinct.to_pylist()):
        if isinstance(kind, str) and kind in event_kinds():
            rows = batch.filter(pc.equal(kinds, distinct[position]))
            if _rows_match(schema()["definitions"][f"event_{kind}"], rows):
                vouched.add(kind)
    return frozenset(vouched)


def _rows_match(definition: dict[str, Any], rows: pa.RecordBatch) -> bool:
    """True if every row matches the event definition (null columns being absent, as `batch_events` makes them)."""
    properties: dict[str, Any] = definition["properties"]
    required = set(definition["required"])
    if set(definition) - {"type", "required", "additionalProperties", "properties", "description"}:
        return False
    names = rows.schema.names
    for name in names:  # additionalProperties is false: a column the kind does not name must be null
        if name not in properties and rows.column(name).null_count < rows.num_rows:
            return False
    for name, spec in properties.items():
        column = rows.column(name) if name in names else None
        filled = 0 if column is None else len(column) - column.null_count
        if name in required and filled < rows.num_rows:
            return False
        if filled and column is not None and not _values_match(spec, column.drop_null()):
            return False
    return True


def _values_match(spec: dict[str, Any], values: pa.Array) -> bool:
    """True if every value meets the property's schema; False too for any keyword or type this does not prove."""
    rules = {k: v for k, v in spec.items() if k != "description"}
    if set(rules) == {"const"}:
        const = rules["const"]
        return all(type(value) is type(const) and value == const for value in pc.unique(values).to_pylist())
    declared = rules.pop("type", None)
    types = set(declared if isinstance(declared, list) else [declared]) - {"null"}
    if types == {"integer"} and pa.types.is_integer(values.type):
        low, high = rules.pop("minimum", None), rules.pop("maximum", None)
        bounds = pc.min_max(values)
        if low is not None and bounds["min"].as_py() < low:
            return False
        if high is not None and bounds["max"].as_py() > high:
            return False
        return not rules
    if types == {"string"} and (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        shortest, allowed = rules.pop("minLength", None), rules.pop("enum", None)
        if shortest is not None and pc.min(pc.utf8_length(values)).as_py() < shortest:
            return False
        if allowed is not None and not all(value in allowed for value in pc.unique(values).to_pylist()):
            return False
        return not rules
    return False


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def validate_trace(path: Path) -> tuple[int, str | None]:
    """Check a trace against the schema and the sequence rules.

    Returns (events read, None) when well formed, or (events read, "file:line: field 'x':
    problem") for the first problem.
    """
    rules = SequenceRules()
    count = 0
    try:
        for where, event, schema_issue in read_checked_events(path):
            count += 1
            problem = schema_issue or rules.check(event)
            if problem:
                return count, f"{where}: {problem}"
    except UserError as error:
        return count, str(error)
    if count == 0:
        return 0, f"{path}: the trace is empty (it needs at least a 'config' event)"
    return count, None


def load_trace(path: Path) -> list[Event]:
    """Read a whole trace into memory, validating it; raise UserError on the first problem."""
    rules = SequenceRules()
    events: list[Event] = []
    for where, event, schema_issue in read_checked_events(path):
        problem = schema_issue or rules.check(event)
        if problem:
            raise UserError(f"{where}: {problem}")
        events.append(event)
    if not events:
        raise UserError(f"{path}: the trace is empty (it needs at least a 'config' event)")
    return events


def config_of(events: list[Event]) -> dict[str, Any]:
    """The configuration recorded in a trace's `config` event."""
    detail = json.loads(events[0]["detail"])
    config = detail.get("config", {})
    if not isinstance(config, dict):
        raise UserError("seq 0: field 'detail': 'config' must be a JSON object")
    return config
