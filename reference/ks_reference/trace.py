"""Recording the trace (spec/trace.md): op events and effect events, `seq` dense, `tick` the time of each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Event = dict[str, Any]


class TraceRecorder:
    """Numbers events and hands them to a sink (by default, an in-memory list)."""

    def __init__(self, sink: Callable[[Event], None] | None = None) -> None:
        self.events: list[Event] = []
        self._sink = sink if sink is not None else self.events.append
        self.seq = 0

    def record(self, event: Event, tick: int) -> None:
        """Append one event, giving it the next `seq` and the current tick."""
        self._sink({"seq": self.seq, "tick": tick, **event})
        self.seq += 1
