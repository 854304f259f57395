"""`check-trace --jobs N` for a JSON lines trace: the file cut into byte ranges at line ends, each range converted to
a Parquet part by pyarrow's JSON reader in a worker (the conversion runs in parallel, as the judging does), and the
folder of parts judged as any Parquet trace is (run.py).

The conversion is exact or refused. Given the format's schema, Arrow's reader refuses a number with a fraction or
exponent or beyond int64 in an integer field, a value of another type, a field the format has not, a line that is no
object (and a few lines the one-process reader does read: a key given twice, a lone surrogate). The rest is checked
here: a range's rows must be as many as its lines that are not blank (two objects on one line, or a carriage return
the one-process reader ends a line at, make them differ), its strings valid UTF-8, and a byte order mark may open
the file only. A JSON `null` reads as an absent field, as the format has it ("null or absent"). Whatever is refused
leaves the trace to one process, which names the line.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
from ks_spec.trace import arrow_schema

PART_BYTES = 64 << 20
"""The largest byte range one task converts (a task holds its range in memory: memory stays flat in the trace's
size)."""
BOM = b"\xef\xbb\xbf"
BLANK = b" \t\r"
"""JSON's whitespace within a line (spec/trace.md section 6: a line of nothing else holds no event)."""

Mapper = Callable[[Callable[[Any], Any], list[Any]], Iterable[Any]]
"""How the shards' tasks run: `map` itself (in this process, one after the other) or a process pool's `map`."""


def byte_ranges(path: Path, parts: int, part_bytes: int | None = None) -> list[tuple[int, int]]:
    """The file cut into at least `parts` ranges (more if a range would exceed `part_bytes`, PART_BYTES if None), each
    ending at a line end (or the file's end); fewer if the file has fewer lines."""
    size = path.stat().st_size
    count = max(parts, -(-size // (part_bytes or PART_BYTES)), 1)
    bounds = [0]
    with open(path, "rb") as handle:
        for number in range(1, count):
            guess = size * number // count
            if guess <= bounds[-1]:
                continue
            handle.seek(guess - 1)
            handle.readline()  # the rest of the line the guess falls in (all of it if it begins one)
            position = handle.tell()
            if bounds[-1] < position < size:
                bounds.append(position)
    bounds.append(size)
    return [(low, high) for low, high in itertools.pairwise(bounds) if high > low]


def lines_holding_events(data: bytes, first: bool) -> int | str:
    """How many lines of `data` hold something (one event each, if the range is well formed), or why the range is
    not read as the one-process reader reads it (Arrow skips a byte order mark where the range begins)."""
    if data.startswith(BOM) and not first:
        return "a byte order mark after the file's start"
    return sum(1 for line in data.split(b"\n") if line.strip(BLANK))


def convert_range(path: Path, start: int, end: int, out: Path) -> int | str:
    """Convert bytes `start` to `end` of a JSON lines file to the Parquet file `out`: its number of events, or why it
    cannot be converted exactly (then `out` may be left half-written: the caller's folder is temporary)."""
    place = f"{path} bytes {start} to {end}"
    schema = arrow_schema()
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    rows = 0
    with pa.memory_map(str(path)) as source:
        source.seek(start)
        data = source.read_buffer(end - start)
        expected = lines_holding_events(data.to_pybytes(), first=start == 0)
        if isinstance(expected, str):
            return f"{place}: {expected}"
        if expected == 0:  # (Arrow refuses a range of blank lines)
            return 0
        try:
            reader = pj.open_json(pa.BufferReader(data), parse_options=options)
            with pq.ParquetWriter(out, schema, compression="none") as writer:
                for batch in reader:
                    batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)  # (the reader refused nulls)
                    batch.validate(full=True)  # (strings that are not UTF-8 are found here)
                    writer.write_batch(batch)
                    rows += batch.num_rows
        except (pa.ArrowException, ValueError) as error:
            text = str(error).strip()
            return f"{place}: {text.splitlines()[0] if text else type(error).__name__}"
    if rows != expected:
        return f"{place}: {rows} events read from {expected} lines (a line holds more than one JSON value)"
    return rows


def _convert_task(task: tuple[Path, int, int, Path]) -> int | str:
    return convert_range(*task)


def convert_jsonl(path: Path, folder: Path, parts: int, mapper: Mapper = map) -> str | None:
    """Convert a JSON lines trace to Parquet files in `folder` (in name order, the trace's), at least `parts` tasks
    run by `mapper`: None, or why it is not converted (the trace is judged in one process)."""
    ranges = byte_ranges(path, parts)
    tasks = [(path, low, high, folder / f"part-{number:06d}.parquet") for number, (low, high) in enumerate(ranges)]
    results = list(mapper(_convert_task, tasks))
    refused = [result for result in results if isinstance(result, str)]
    if refused:
        return f"a JSON line could not be read exactly as the format's columns ({refused[0]})"
    if not any(results):
        return "the trace is empty"
    return None
