"""The ledger's predicted changes as arrays (`Changes`, what validate-replay's tasks send each other), and the
routing's files (check-trace --jobs): arrays written as they grow and read back a stretch at a time, never mapped.
A mapped file's pages stay in a process's memory as it reads on, and the other shards' changes were gathered into
one array: a worker's peak grew with the trace (827 MB at 10M events). Read in stretches, it follows the stretch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from ks_conformance.sharding.facts import Change

STRETCH = 65536
"""The changes a reader holds from each file at a time."""


class ArrayFile:
    """One array in a file of its own (native byte order, no header), appended to and read a stretch at a time."""

    def __init__(self, path: Path, dtype: Any) -> None:
        self.path, self.dtype = path, np.dtype(dtype)

    def append(self, values: np.ndarray) -> None:
        """Add values at the end (the file is created by the first)."""
        with open(self.path, "ab") as handle:
            np.ascontiguousarray(values, dtype=self.dtype).tofile(handle)

    def __len__(self) -> int:
        return self.path.stat().st_size // self.dtype.itemsize if self.path.exists() else 0

    def __getitem__(self, index: int | slice) -> Any:
        """One value, or the values of a slice (without a step), read from the file."""
        if isinstance(index, slice):
            start, stop, _ = index.indices(len(self))
            return self.read(start, stop)
        return self.read(index, index + 1)[0]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Values `start` to `stop` (excluded), in fresh memory."""
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        with open(self.path, "rb") as handle:
            handle.seek(start * self.dtype.itemsize)
            return np.fromfile(handle, dtype=self.dtype, count=stop - start)


@dataclass
class Changes:
    """The ledger's predicted changes as arrays (cheap to send to a Spark task): seq, what, offset, consumer code
    (check-trace's workers write and read them as files instead, `ChangeFiles`)."""

    seqs: np.ndarray
    what: np.ndarray
    offsets: np.ndarray
    consumers: np.ndarray
    names: list[str | None]

    @classmethod
    def of(cls, changes: list[Change]) -> Changes:
        # Written for speed (once per change): each column read and coded by C loops (map, itemgetter, fromiter).
        count = len(changes)
        names: list[str | None] = [None, *sorted(set(map(itemgetter(3), changes)) - {None})]
        code = {name: number for number, name in enumerate(names)}
        return cls(
            np.fromiter(map(itemgetter(0), changes), dtype=np.int64, count=count),
            np.fromiter(map(itemgetter(1), changes), dtype=np.int8, count=count),
            np.fromiter(map(itemgetter(2), changes), dtype=np.int64, count=count),
            np.fromiter(map(code.__getitem__, map(itemgetter(3), changes)), dtype=np.int32, count=count),
            names,
        )

    @classmethod
    def concatenate(cls, parts: Sequence[Changes]) -> Changes:
        """Several shards' changes in one seq order (a change's shard keeps its own changes' order)."""
        names: dict[str | None, int] = {None: 0}
        recoded = []
        for part in parts:
            mapping = np.array([names.setdefault(name, len(names)) for name in part.names], dtype=np.int32)
            recoded.append(mapping[part.consumers] if len(part.consumers) else part.consumers)
        seqs = np.concatenate([part.seqs for part in parts]) if parts else np.zeros(0, np.int64)
        order = np.argsort(seqs, kind="stable")

        def ordered(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
            return (np.concatenate(arrays) if arrays else np.zeros(0, dtype))[order]

        return cls(
            seqs[order],
            ordered([p.what for p in parts], np.int8),
            ordered([p.offsets for p in parts], np.int64),
            ordered(recoded, np.int32),
            list(names),
        )

    def chunks(self, chunk: int = 65536) -> Iterator[list[Change]]:
        """The changes as lists of (seq, what, offset, consumer) tuples, made a chunk at a time (never all in
        memory)."""
        for start in range(0, len(self.seqs), chunk):
            yield self.tuples(slice(start, start + chunk))

    def tuples(self, part: slice) -> list[Change]:
        """The changes of a slice as (seq, what, offset, consumer) tuples."""
        consumers = map(self.names.__getitem__, self.consumers[part].tolist())
        seqs, what, offsets = self.seqs[part].tolist(), self.what[part].tolist(), self.offsets[part].tolist()
        return list(zip(seqs, what, offsets, consumers, strict=True))


class ChangeFiles:
    """One shard's predicted changes (facts.py), in seq order: a file per column (seq, what, offset, consumer's code)
    and one of the consumers' names; written a batch at a time as the prediction goes, read a stretch at a time."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.seqs = ArrayFile(prefix.with_name(f"{prefix.name}.seqs"), np.int64)
        self.what = ArrayFile(prefix.with_name(f"{prefix.name}.what"), np.int8)
        self.offsets = ArrayFile(prefix.with_name(f"{prefix.name}.offsets"), np.int64)
        self.consumers = ArrayFile(prefix.with_name(f"{prefix.name}.consumers"), np.int32)
        self.names: list[str | None] = [None]
        self.codes: dict[str | None, int] = {None: 0}

    def append(self, changes: list[Change]) -> None:
        """Add changes (later in seq order than those before), their consumers coded as in every earlier batch."""
        part = Changes.of(changes)
        for name in part.names:
            if name not in self.codes:
                self.codes[name] = len(self.names)
                self.names.append(name)
        mapping = np.array([self.codes[name] for name in part.names], dtype=np.int32)
        self.seqs.append(part.seqs)
        self.what.append(part.what)
        self.offsets.append(part.offsets)
        self.consumers.append(mapping[part.consumers])

    def close(self) -> None:
        """Write the names (after the last `append`); the files exist even with no change."""
        for column in (self.seqs, self.what, self.offsets, self.consumers):
            column.append(np.zeros(0))
        self.prefix.with_name(f"{self.prefix.name}.names.json").write_text(json.dumps(self.names))

    @classmethod
    def open(cls, prefix: Path) -> ChangeFiles:
        """The changes `close` finished writing."""
        files = cls(prefix)
        files.names = json.loads(prefix.with_name(f"{prefix.name}.names.json").read_text())
        return files

    def __len__(self) -> int:
        return len(self.seqs)

    def changes(self, start: int, stop: int) -> tuple[np.ndarray, list[Change]]:
        """Changes `start` to `stop` (excluded): their seqs, and the changes as tuples."""
        seqs = self.seqs.read(start, stop)
        read = Changes(
            seqs,
            self.what.read(start, stop),
            self.offsets.read(start, stop),
            self.consumers.read(start, stop),
            self.names,
        )
        return seqs, read.tuples(slice(None))

    def chunks(self, size: int = STRETCH) -> Iterator[list[Change]]:
        """All the changes, a list of `size` at a time."""
        total = len(self)
        for start in range(0, total, size):
            yield self.changes(start, min(start + size, total))[1]


def merged_chunks(parts: Sequence[ChangeFiles], size: int = STRETCH) -> Iterator[list[Change]]:
    """Several shards' changes in one seq order, a chunk at a time, the changes of one seq in the order of `parts`
    (as a stable sort of them all puts them): each round takes every change below the least of the seqs that end
    each part's next `size` changes, or, if there is none, every change at that seq."""
    if len(parts) == 1:
        yield from parts[0].chunks(size)
        return
    positions = [0] * len(parts)
    totals = [len(part) for part in parts]
    while True:
        live = [number for number, part in enumerate(parts) if positions[number] < totals[number]]
        if not live:
            return
        ends = [min(positions[number] + size, totals[number]) for number in live]
        bound = min(int(parts[number].seqs.read(end - 1, end)[0]) for number, end in zip(live, ends, strict=True))
        taken = [
            read_below(parts[number], positions[number], end, bound) for number, end in zip(live, ends, strict=True)
        ]
        if not any(len(seqs) for seqs, _ in taken):
            taken = [read_at(parts[number], positions[number], totals[number], bound) for number in live]
        for number, (seqs, _) in zip(live, taken, strict=True):
            positions[number] += len(seqs)
        seqs = np.concatenate([seqs for seqs, _ in taken])
        changes = list(chain.from_iterable(changes for _, changes in taken))
        if len(changes) > 1:
            changes = list(itemgetter(*np.argsort(seqs, kind="stable").tolist())(changes))
        yield changes


def read_below(part: ChangeFiles, start: int, end: int, bound: int) -> tuple[np.ndarray, list[Change]]:
    """The part's changes from `start` below seq `bound` (all before `end`, whose last seq is at least `bound`)."""
    seqs = part.seqs.read(start, end)
    return part.changes(start, start + int(np.searchsorted(seqs, bound, side="left")))


def read_at(part: ChangeFiles, start: int, total: int, bound: int) -> tuple[np.ndarray, list[Change]]:
    """The part's changes from `start` at seq `bound` (none below it are left), read on until a later seq."""
    stop = start
    while stop < total:
        seqs = part.seqs.read(stop, min(stop + STRETCH, total))
        equal = int(np.searchsorted(seqs, bound, side="right"))
        stop += equal
        if equal < len(seqs):
            break
    return part.changes(start, stop)
