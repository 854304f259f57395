"""The cursor (spec section 14): the contiguous resolved prefix and the ack holes above it.

Holes live in a 64-bit roaring bitmap, so their number is never capped (KS-CUR-6). The store
persists them in chunks of 65,536 offsets so that one resolution rewrites one small chunk, not
the whole set; `dirty_chunks` says which chunks changed since the last persistence.
"""

from __future__ import annotations

from collections.abc import Container
from typing import cast

from pyroaring import BitMap64

CHUNK_BITS = 16
"""Holes are persisted in chunks of 2**16 offsets: one chunk is at most 8 KiB serialized."""


def advance_cursor(cursor: int, resolved: Container[int]) -> int:
    """The smallest offset at or after `cursor` that is not in `resolved` (the contiguous prefix, KS-CUR-1).

    pre: cursor >= 0
    post: __return__ >= cursor
    post: __return__ not in resolved
    post: all(offset in resolved for offset in range(cursor, __return__))
    """
    while cursor in resolved:
        cursor += 1
    return cursor


def hole_ranges(offsets: list[int]) -> list[list[int]]:
    """Sorted distinct offsets as inclusive `[lo, hi]` runs (the `ranges` column of `cursor_persisted`).

    pre: all(a < b for a, b in zip(offsets, offsets[1:]))
    post: sum(hi - lo + 1 for lo, hi in __return__) == len(offsets)
    post: all(a[1] + 1 < b[0] for a, b in zip(__return__, __return__[1:]))
    """
    runs: list[list[int]] = []
    for offset in offsets:
        if runs and runs[-1][1] + 1 == offset:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])
    return runs


class Cursor:
    """The cursor position and the resolved offsets above it, with change tracking for persistence."""

    def __init__(self, position: int = 0, holes: BitMap64 | None = None) -> None:
        self.position = position
        self.holes = holes if holes is not None else BitMap64()
        self.dirty_chunks: set[int] = set()
        self.changed = False
        """True when the position or the holes changed since the last persistence."""

    def is_resolved(self, offset: int) -> bool:
        """True for offsets below the cursor and holes above it."""
        return offset < self.position or offset in self.holes

    def resolve(self, offset: int) -> None:
        """Record that `offset` was resolved (KS-RES-3: every resolution counts); advance over the prefix."""
        # req: KS-RES-3
        self.changed = True
        if offset != self.position:
            self.holes.add(offset)
            self.dirty_chunks.add(offset >> CHUNK_BITS)
            return
        # req: KS-CUR-1
        # BitMap64 is a container of ints; its stub types `__contains__` narrower than Container does.
        new_position = advance_cursor(offset + 1, cast("Container[int]", self.holes))
        if new_position > offset + 1:
            self.holes.remove_range(offset + 1, new_position)
        self.position = new_position
        self.dirty_chunks.add(new_position >> CHUNK_BITS)

    def hole_count(self) -> int:
        """The number of resolved offsets above the cursor."""
        return len(self.holes)

    def ranges(self) -> list[list[int]]:
        """The holes as inclusive runs."""
        return hole_ranges(list(self.holes))

    def chunk(self, number: int) -> BitMap64:
        """The holes that fall in one chunk of 2**16 offsets (what the store writes for that chunk)."""
        start = number << CHUNK_BITS
        span = BitMap64()
        span.add_range(start, start + (1 << CHUNK_BITS))
        return self.holes & span

    def take_dirty_chunks(self) -> set[int]:
        """The chunks changed since the last call, at or above the cursor's chunk; clears the change flags."""
        floor = self.position >> CHUNK_BITS
        dirty = {chunk for chunk in self.dirty_chunks if chunk >= floor}
        self.dirty_chunks.clear()
        self.changed = False
        return dirty
