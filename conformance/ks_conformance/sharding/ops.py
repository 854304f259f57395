"""The ops a shard reads, streamed: every op's kind and first and last seqs, loaded a chunk at a time as the shard's
rows reach them and dropped once passed, so a shard's memory does not grow with the trace (`OpWindow`).

A chunk (`OpChunk`) holds the op starts of one stretch of seqs; chunks come in seq order and cover every seq. Where
they come from: check-trace's router has the whole op table (`table_chunks`); validate-replay's tasks get each input
split's raw op starts through Spark's shuffle and apply the rule of zombie ops themselves (`continued`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from ks_conformance.checks.resolution import ZOMBIE_OPS
from ks_conformance.checks.state import ACK_CLASS

TRIM = 65536
"""Passed ops are dropped once there are this many (dropping costs a copy of the rest)."""


class OpChunk(NamedTuple):
    """The op starts (seqs and kinds, in order) of the seqs up to `through`, after the previous chunk's."""

    through: int
    starts: list[int]
    kinds: list[str]


class OpWindow:
    """The ops from the `base`-th on (0-based), as three lists: kinds, first seqs and last seqs. The last op's end is
    known once the next op's start (or the trace's end) is: a shard reads an op's end only after a row past it."""

    def __init__(self, chunks: Iterable[OpChunk], events: int) -> None:
        self.kinds: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.base = 0
        """How many ops were dropped before `starts[0]`."""
        self.start_array = np.zeros(0, dtype=np.int64)
        """`starts` as an array (for the op index of a batch of rows)."""
        self.chunks = iter(chunks)
        self.events = events
        self.known_through = -1
        """Every op start at or below this seq is loaded."""
        self.complete = False

    def __len__(self) -> int:
        """How many ops are known (dropped ones included)."""
        return self.base + len(self.starts)

    def load_through(self, seq: int, keep_from: int | None = None) -> None:
        """Load the chunks until every op start at or below `seq` is known; drop the ops before the `keep_from`-th
        (0-based; None: drop nothing), which the caller will not read again."""
        if keep_from is not None and keep_from - self.base >= TRIM:
            drop = keep_from - self.base
            del self.kinds[:drop], self.starts[:drop], self.ends[:drop]
            self.start_array = self.start_array[drop:]
            self.base = keep_from
        added: list[list[int]] = []
        while self.known_through < seq and not self.complete:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.complete = True
                if self.ends:
                    self.ends[-1] = self.events - 1
                break
            if chunk.starts:
                if self.ends:
                    self.ends[-1] = chunk.starts[0] - 1
                self.starts += chunk.starts
                self.kinds += chunk.kinds
                self.ends += [start - 1 for start in chunk.starts[1:]]
                self.ends.append(chunk.through)  # (until the next start is known)
                added.append(chunk.starts)
            self.known_through = chunk.through
        if added:
            self.start_array = np.concatenate([self.start_array, *(np.asarray(a, dtype=np.int64) for a in added)])

    def load_all(self) -> None:
        """Load every op left (the last op ends at the trace's last event)."""
        self.load_through(self.events + 1)
        while not self.complete:
            self.load_through(self.known_through + 1)

    def index_of(self, seqs: np.ndarray) -> np.ndarray:
        """The op index (from 1) of each of these seqs, loaded through the last of them."""
        return self.base + np.searchsorted(self.start_array, seqs, side="right")


class Indexed(Protocol):
    """What `table_chunks` reads the first seqs from: a list, an array, or a file of them (files.py `ArrayFile`)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any, /) -> Any: ...


def table_chunks(starts: Indexed, kinds_of: Callable[[int, int], list[str]], events: int) -> Iterator[OpChunk]:
    """The chunks of an op table (its first seqs, and the kinds of the ops from `low` to `high` as `kinds_of` reads
    them; zombie ops' continuations already left out), TRIM ops at a time."""
    size = TRIM
    for low in range(0, len(starts), size):
        high = low + size
        through = int(starts[high]) - 1 if high < len(starts) else events - 1
        yield OpChunk(through, np.asarray(starts[low:high], dtype=np.int64).tolist(), kinds_of(low, high))


def continued(raw: Iterable[tuple[int, np.ndarray, np.ndarray]], kinds: Sequence[str]) -> Iterator[OpChunk]:
    """The chunks of raw op starts (each: the last seq it covers, the starts' seqs and kind codes in `kinds`), without
    the first ack-class effect of a zombie op, which continues it (KS-ACK-3), across chunks too."""
    zombie = np.isin(np.arange(len(kinds) + 1), [kinds.index(kind) for kind in ZOMBIE_OPS if kind in kinds])
    ack = np.isin(np.arange(len(kinds) + 1), [kinds.index(kind) for kind in ACK_CLASS if kind in kinds])
    after_zombie = False
    """Whether the last raw start before this chunk is a zombie op's."""
    for through, seqs, codes in raw:
        if len(codes):
            previous = np.empty(len(codes), dtype=bool)
            previous[0] = after_zombie
            previous[1:] = zombie[codes[:-1]]
            kept = ~(ack[codes] & previous)
            after_zombie = bool(zombie[codes[-1]])
            seqs, codes = seqs[kept], codes[kept]
        yield OpChunk(int(through), seqs.tolist(), [kinds[code] for code in codes.tolist()])
