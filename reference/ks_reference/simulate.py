"""Running scenarios through the reference: scripted consumers, quiescence, and a run summary.

A `Simulation` wraps a traced `Dispatcher` and plays the consumers' side: each consumer answers
its deliveries after a delay (acks, or nacks and hangs for poison keys), at most so many per
tick when it is slow. `settle` brings a run to quiescence as spec section 19 defines it and
records the `quiescent` event; `Summary` counts what happened from the events themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ks_spec.errors import UserError
from ks_spec.trace import RESOLUTION_EVENTS

from ks_reference.config import Config
from ks_reference.core import Event, Refusal
from ks_reference.dispatcher import Dispatcher, Outcome
from ks_reference.store import Store
from ks_reference.trace import TraceRecorder


@dataclass(frozen=True)
class Behaviour:
    """How a simulated consumer answers: `delay` ticks after a delivery, at most `per_tick` answers a tick."""

    delay: int = 1
    per_tick: int | None = None


@dataclass
class Summary:
    """What a run did, counted from its events (the `keyshared simulate` table)."""

    published: int = 0
    delivered: int = 0
    redeliveries: int = 0
    resolved: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    held_events: Counter[str] = field(default_factory=Counter)
    ignored_acks: int = 0
    timeouts: int = 0
    nacks: int = 0
    restarts: int = 0
    duplicates_after_restart: int = 0
    evictions: int = 0
    persists: int = 0
    ticks: int = 0
    events: int = 0
    max_held_per_key: int = 0
    peak_stuck_keys: int = 0
    stuck_keys_at_end: int = 0
    refused_ops: int = 0
    quiescent: bool = False
    _resolved_offsets: set[int] = field(default_factory=set)
    _resolved_before_restart: set[int] = field(default_factory=set)

    def observe(self, event: Event) -> None:
        """Count one recorded event."""
        self.events += 1
        kind = event["event"]
        if kind == "publish":
            self.published += 1
        elif kind == "deliver":
            self.delivered += 1
            if event["attempt"] > 1:
                self.redeliveries += 1
            if event["offset"] in self._resolved_before_restart:
                self.duplicates_after_restart += 1
        elif kind in RESOLUTION_EVENTS:
            self.resolved[RESOLUTION_EVENTS[kind]] += 1
            self._resolved_offsets.add(event["offset"])
            if kind == "drop":
                self.dropped[event["reason"]] += 1
        elif kind == "held":
            self.held_events[event["reason"]] += 1
        elif kind in ("ack_ignored", "nack_ignored"):
            self.ignored_acks += 1
        elif kind == "timeout":
            self.timeouts += 1
        elif kind == "nack":
            self.nacks += 1
        elif kind == "restart":
            self.restarts += 1
            self._resolved_before_restart |= self._resolved_offsets
        elif kind == "consumer_evicted":
            self.evictions += 1
        elif kind == "cursor_persisted":
            self.persists += 1
        elif kind == "tick":
            self.ticks += 1
        elif kind == "quiescent":
            self.quiescent = True

    def observe_stats(self, stats: Mapping[str, Any]) -> None:
        """Fold a stats sample into the peaks."""
        held = [entry["held"] for entry in stats["stuck_keys"]]  # held, blocked, or queued behind an unacked one
        self.max_held_per_key = max([self.max_held_per_key, *held])
        self.peak_stuck_keys = max(self.peak_stuck_keys, len(stats["stuck_keys"]))
        self.stuck_keys_at_end = len(stats["stuck_keys"])

    def rows(self) -> list[tuple[str, str]]:
        """The summary as (what, value) rows."""
        resolved = ", ".join(f"{kind} {count}" for kind, count in sorted(self.resolved.items())) or "none"
        dropped = ", ".join(f"{reason} {count}" for reason, count in sorted(self.dropped.items())) or "none"
        holds = ", ".join(f"{reason} {count}" for reason, count in sorted(self.held_events.items())) or "none"
        return [
            ("published", str(self.published)),
            ("delivered", str(self.delivered)),
            ("redeliveries", str(self.redeliveries)),
            ("resolved by kind", resolved),
            ("drops by reason", dropped),
            ("nacks / timeouts", f"{self.nacks} / {self.timeouts}"),
            ("ignored acks and nacks", str(self.ignored_acks)),
            ("restarts", str(self.restarts)),
            ("duplicates after restart", str(self.duplicates_after_restart)),
            ("evictions", str(self.evictions)),
            ("holds reported", holds),
            ("max held per key", str(self.max_held_per_key)),
            ("stuck keys (peak / at end)", f"{self.peak_stuck_keys} / {self.stuck_keys_at_end}"),
            ("cursor persists", str(self.persists)),
            ("refused ops", str(self.refused_ops)),
            ("ticks / events", f"{self.ticks} / {self.events}"),
            ("quiescent at the end", "yes" if self.quiescent else "no"),
        ]


class Simulation:
    """A traced dispatcher plus simulated consumers; every op it performs is kept for replay."""

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None = None,
        store: Store | None = None,
        poison: Mapping[str, str] | None = None,
        sink: Callable[[Event], None] | None = None,
    ) -> None:
        self.summary = Summary()
        self._sink = sink
        self.events: list[Event] = []
        self.trace = TraceRecorder(self._record)
        self.dispatcher = Dispatcher(config, store, self.trace)
        self.config = self.dispatcher.config
        self.poison = dict(poison or {})
        """Keys whose messages no consumer can process: "nack" (fails fast) or "hang" (never answers)."""
        self.behaviours: dict[str, Behaviour] = {}
        self.inbox: dict[str, dict[int, int]] = {}
        """Per consumer, the deliveries it holds and has not answered: offset -> delivery tick."""
        self.ops: list[dict[str, Any]] = []
        self.refusals: list[tuple[dict[str, Any], Refusal]] = []

    def _record(self, event: Event) -> None:
        self.events.append(event)
        self.summary.observe(event)
        if self._sink is not None:
            self._sink(event)

    # --- ops ---

    def apply(self, op: Mapping[str, Any]) -> Outcome | None:
        """Perform one adapter-protocol op; a refusal is remembered and returns None."""
        try:
            outcome = self.dispatcher.apply(op)
        except Refusal as refusal:
            self.summary.refused_ops += 1
            self.refusals.append((dict(op), refusal))
            return None
        self.ops.append(dict(op))
        self._follow(op, outcome.events)
        return outcome

    def _follow(self, op: Mapping[str, Any], events: list[Event]) -> None:
        """Keep the consumers' inboxes in step with what the dispatcher did."""
        if op.get("op") == "restart":
            self.inbox.clear()
        if op.get("op") == "remove_consumer":
            self.inbox.pop(str(op.get("consumer")), None)
        for event in events:
            kind = event["event"]
            if kind == "deliver":
                self.inbox.setdefault(event["consumer"], {})[event["offset"]] = self.dispatcher.now
            elif kind == "timeout":
                self.inbox.get(event["consumer"], {}).pop(event["offset"], None)
            elif kind == "consumer_evicted":
                self.inbox.pop(event["consumer"], None)

    def publish(self, key: str) -> None:
        """Publish the next message of `key`."""
        self.apply({"op": "publish", "offset": len(self.dispatcher.log), "key": key})

    def add_consumer(
        self,
        name: str,
        capacity: int,
        behaviour: Behaviour | None = None,
        filters: list[str] | None = None,
        ranges: list[list[int]] | None = None,
    ) -> None:
        """A consumer joins, answering as `behaviour` says."""
        op: dict[str, Any] = {"op": "add_consumer", "consumer": name, "capacity": capacity, "filters": filters or []}
        if ranges:
            op["ranges"] = ranges
        if self.apply(op) is not None:
            self.behaviours[name] = behaviour or Behaviour()

    def remove_consumer(self, name: str) -> None:
        """A consumer leaves cleanly."""
        self.apply({"op": "remove_consumer", "consumer": name})

    def disconnect(self, name: str) -> None:
        """A consumer's connection drops; it stops answering."""
        if self.apply({"op": "disconnect", "consumer": name}) is not None:
            self.inbox.pop(name, None)

    def answer(self) -> None:
        """Every connected consumer answers its due deliveries: ack, or for poison keys nack or nothing."""
        now = self.dispatcher.now
        for name, member in list(self.dispatcher.members.items()):
            if not member.connected or name not in self.inbox:
                continue
            behaviour = self.behaviours.get(name, Behaviour())
            budget = behaviour.per_tick
            for offset, delivered in sorted(self.inbox[name].items()):
                if delivered + behaviour.delay > now or budget == 0:
                    continue
                key = self.dispatcher.log[offset].key
                mode = self.poison.get(key)
                if mode == "hang" and self.config.reliable:
                    continue
                del self.inbox[name][offset]
                verb = "nack" if mode == "nack" and self.config.reliable else "ack"
                self.apply({"op": verb, "consumer": name, "offset": offset})
                if budget is not None:
                    budget -= 1

    def tick(self, count: int = 1) -> None:
        """Let the consumers answer, then advance time; sample the stats once per tick."""
        for _ in range(count):
            self.answer()
            self.apply({"op": "tick"})
            self.summary.observe_stats(self.dispatcher.stats())

    def restart(self) -> None:
        """Crash and restart the dispatcher; the consumers must join again."""
        self.apply({"op": "restart"})
        self.behaviours.clear()

    # --- quiescence (spec section 19) ---

    def settle(self, max_ticks: int | None = None) -> None:
        """Bring the run to quiescence and record `quiescent`: publishing stops, blocked keys are released,
        every connected member acks every delivery, disconnected members go, and time passes every
        timeout, back-off and persistence interval. Raises UserError when that cannot happen.
        """
        # req: KS-LIV-1, KS-LIV-2 (what the run must reach; the checkers judge it at `quiescent`)
        dispatcher = self.dispatcher
        config = self.config
        bound = max_ticks or 4 * (config.backoff_max + config.ack_timeout + config.persist_interval) + 2 * (
            config.evict_after + 50
        )
        if config.evict_after == 0:
            for name, member in list(dispatcher.members.items()):
                if not member.connected:
                    self.remove_consumer(name)
        for _ in range(bound + 1):
            for key in sorted(dispatcher.blocked):
                self.apply({"op": "release", "key": key})
            self._ack_everything()
            if self._is_quiescent():
                self.summary.observe_stats(dispatcher.stats())
                self.apply_quiescent()
                return
            self.apply({"op": "tick"})
        unresolved = len(dispatcher.log) - dispatcher.cursor.position - dispatcher.cursor.hole_count()
        reasons: Counter[str] = Counter()
        for offset in dispatcher.holds.values():
            held = dispatcher.messages[offset].held
            if held is not None:
                reasons[held[0]] += 1
        why = ", ".join(f"{count} held for {reason}" for reason, count in sorted(reasons.items())) or "no holds"
        raise UserError(
            f"settle: no quiescence within {bound} ticks: {unresolved} messages unresolved ({why}); "
            "quiescence needs a connected member that accepts every key"
        )

    def _ack_everything(self) -> None:
        while True:
            due = sorted(
                (offset, name)
                for name, member in self.dispatcher.members.items()
                if member.connected
                for offset in member.outstanding
            )
            if not due:
                return
            for offset, name in due:
                self.inbox.get(name, {}).pop(offset, None)
                self.apply({"op": "ack", "consumer": name, "offset": offset})

    def _is_quiescent(self) -> bool:
        dispatcher = self.dispatcher
        if any(not member.connected for member in dispatcher.members.values()):
            return False
        if not self.config.reliable:
            return True
        published = len(dispatcher.log)
        return dispatcher.cursor.position == published and dispatcher.persisted_position == published

    def apply_quiescent(self) -> None:
        """Record the `quiescent` op event (the driver's claim that the run is quiescent)."""
        self.dispatcher.quiescent()
        self.ops.append({"op": "quiescent"})
