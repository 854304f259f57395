"""How a process judging a trace uses its resources (in one process, or in a shard's worker): how often Python's cyclic
garbage collector runs, and how its peak memory is read."""

from __future__ import annotations

import gc
import resource
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


def vm_hwm(pid: int | str = "self") -> int:
    """A process's peak resident memory in bytes (its VmHWM, which a new program starts afresh); 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_rss() -> int:
    """This process's peak resident memory in bytes: its VmHWM, where getrusage's ru_maxrss keeps the peak of the
    process that started it (a benchmark's child would report its parent's); ru_maxrss only without /proc."""
    return vm_hwm() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
