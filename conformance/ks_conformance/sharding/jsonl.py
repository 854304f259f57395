"""`check-trace --jobs N` for a JSON lines trace: the file cut into byte ranges at line ends, each range converted to
a Parquet part by Arrow's JSON reader in a worker (the conversion runs in parallel, as the judging does), and the
folder of parts judged as any Parquet trace is (run.py).

A range is converted exactly or not at all (`ks_spec.trace.json_lines_table`, which the one-process reader uses
too): whatever Arrow may read otherwise than the line reader leaves the trace to one process, which names the line.
A field written `null` is read absent, as the format has it; a row that then does not match the schema (a required
field written `null`) is found by its shard, and one process names it as the line reader does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from ks_spec.trace import json_lines_table

PART_BYTES = 32 << 20
"""The largest byte range one task converts (a task holds its range and its table in memory: memory stays flat in
the trace's size)."""

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


def convert_range(path: Path, start: int, end: int, out: Path) -> int | str:
    """Convert bytes `start` to `end` of a JSON lines file (whole lines) to the Parquet file `out` (none if they hold
    no event): its number of events, or why it cannot be converted exactly."""
    with open(path, "rb") as handle:
        handle.seek(start)
        table = json_lines_table(handle.read(end - start), start == 0)
    if isinstance(table, str):
        return f"{path} bytes {start} to {end}: {table}"
    if table.num_rows:
        pq.write_table(table, out, compression="none")
    return int(table.num_rows)


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
