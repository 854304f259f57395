"""A small driver for scenario tests: a traced dispatcher and helpers to read what it did."""

from __future__ import annotations

from typing import Any

from ks_conformance.checker import check_events
from ks_reference.dispatcher import Dispatcher, Outcome
from ks_reference.store import Store
from ks_reference.trace import TraceRecorder


class Harness:
    """A traced dispatcher; `events` is the whole trace so far."""

    def __init__(self, store: Store | None = None, **config: Any) -> None:
        self.trace = TraceRecorder()
        self.d = Dispatcher(config, store, self.trace)

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.trace.events

    def publish(self, *keys: str) -> list[dict[str, Any]]:
        effects: list[dict[str, Any]] = []
        for key in keys:
            effects += self.d.publish(key).events
        return effects

    def deliveries(self, since: int = 0) -> list[tuple[int, str, int]]:
        """(offset, consumer, attempt) of every delivery from trace position `since` on."""
        return [(e["offset"], e["consumer"], e["attempt"]) for e in self.events[since:] if e["event"] == "deliver"]

    def kinds(self, outcome: Outcome) -> list[str]:
        return [e["event"] for e in outcome.events]

    def anomalies(self) -> list[str]:
        """What the kit's checker (spec/checking.md) finds in the trace so far: anomalies, then contradictions."""
        checker = check_events(self.events)
        found = [f"{a.name}@{a.seq}: {a.explanation.then}" for a in checker.anomalies]
        return found + [f"contradiction@{p.seq}: {p.message}" for p in checker.problems]

    def mark(self) -> int:
        return len(self.events)
