"""How often Python's cyclic garbage collector runs while a trace is judged (in one process, or in a shard's worker)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLD = 50_000
"""Allocations between two collections of cyclic garbage while a trace is judged (Python's default is 700)."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often for a while, then as before.

    Judging a trace makes and drops a few objects per event, hardly any in cycles: at the default threshold the
    collector ran every few hundred events and took about 4% of check-trace's time, for nothing to free."""
    thresholds = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
