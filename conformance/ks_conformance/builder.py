"""Write traces by hand: a small builder that numbers events, keeps time and remembers keys.

For tests and for broker teams who want to pin a behaviour as a regression trace: each method appends
one event of spec/trace.md, with `seq` and `tick` filled in, and returns the builder (or, for
`publish`, the new offset). Effects that name an offset take the key from its `publish`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ks_spec.trace import Event, write_trace


class TraceBuilder:
    """Builds a well-formed trace event by event, starting with its `config`."""

    def __init__(
        self, implementation: dict[str, Any] | None = None, declared: dict[str, Any] | None = None, **config: Any
    ) -> None:
        self.events: list[Event] = []
        self.tick_now = 0
        self.keys: list[str] = []
        detail: dict[str, Any] = {"trace_version": 1, "config": config}
        if implementation is not None:
            detail["implementation"] = implementation
        if declared is not None:
            detail["declared"] = declared
        self.emit("config", detail=json.dumps(detail))
        if config.get("selector") == "buckets":
            self.emit(
                "segment_created", segment=0, buckets=int(config.get("bucket_budget", 4)), range_lo=0, range_hi=65535
            )

    def emit(self, kind: str, **columns: Any) -> TraceBuilder:
        """Append any event; None columns are left out."""
        if kind == "tick":
            self.tick_now += 1
        event: Event = {"seq": len(self.events), "tick": self.tick_now, "event": kind}
        event.update({name: value for name, value in columns.items() if value is not None})
        self.events.append(event)
        return self

    def _key(self, offset: int) -> str:
        return self.keys[offset] if 0 <= offset < len(self.keys) else "?"

    # --- op events ---

    def publish(
        self,
        key: str,
        hash: int | None = None,
        segment: int | None = None,
        bucket: int | None = None,
        entry: int | None = None,
    ) -> int:
        """Publish the next offset with this key (as a message of the batch `entry`, if given); return the offset."""
        offset = len(self.keys)
        self.keys.append(key)
        self.emit("publish", offset=offset, key=key, hash=hash, segment=segment, bucket=bucket, entry=entry)
        return offset

    def publish_delayed(self, key: str, deliver_at: int) -> int:
        """Publish the next offset with this key as a delayed message due at tick `deliver_at` (`publish_delayed`,
        KS-ORD-5); return the offset."""
        offset = len(self.keys)
        self.keys.append(key)
        self.emit("publish", offset=offset, key=key, deliver_at=deliver_at)
        return offset

    def add(
        self,
        consumer: str,
        capacity: int = 10,
        filters: Sequence[str] = (),
        ranges: Sequence[Sequence[int]] | None = None,
    ) -> TraceBuilder:
        """A consumer joins."""
        listed = [list(r) for r in ranges] if ranges is not None else None
        return self.emit("consumer_added", consumer=consumer, capacity=capacity, filters=list(filters), ranges=listed)

    def remove(self, consumer: str) -> TraceBuilder:
        """A consumer leaves."""
        return self.emit("consumer_removed", consumer=consumer)

    def disconnect(self, consumer: str) -> TraceBuilder:
        """A member loses its connection."""
        return self.emit("consumer_disconnected", consumer=consumer)

    def reconnect(self, consumer: str) -> TraceBuilder:
        """A disconnected member's connection is back."""
        return self.emit("consumer_reconnected", consumer=consumer)

    def flow(self, consumer: str, permits: int) -> TraceBuilder:
        """A member grants `permits` more permits (the trace's `capacity` column carries the number)."""
        return self.emit("permits_granted", consumer=consumer, capacity=permits)

    def zombie(self, kind: str, offset: int, consumer: str, attempt: int = 1) -> TraceBuilder:
        """A `zombie_ack` or `zombie_nack`: `consumer`'s late result for its ended delivery of `offset` (KS-ACK-3)."""
        return self.emit(kind, offset=offset, key=self._key(offset), consumer=consumer, attempt=attempt)

    def extend(self, offset: int, consumer: str, ticks: int) -> TraceBuilder:
        """An `extend` op: `consumer` asks for `ticks` more ticks for its delivery of `offset` (KS-RTY-8; the
        trace's `capacity` column carries the ticks)."""
        return self.emit("extend", offset=offset, key=self._key(offset), consumer=consumer, capacity=ticks)

    def tick(self, count: int = 1) -> TraceBuilder:
        """Advance time by `count` ticks, one `tick` event each."""
        for _ in range(count):
            self.emit("tick")
        return self

    def restart(self) -> TraceBuilder:
        """The dispatcher crashes and restarts."""
        return self.emit("restart")

    def seek(self, offset: int) -> TraceBuilder:
        """The cursor is reset to `offset` (section 14, KS-CUR-8): a replay backwards, a give-up forwards."""
        return self.emit("seek", offset=offset)

    def quiescent(self) -> TraceBuilder:
        """The driver declares quiescence."""
        return self.emit("quiescent")

    def release(self, key: str) -> TraceBuilder:
        """Operator release of a blocked key."""
        return self.emit("key_released", key=key)

    def skip(self, key: str) -> TraceBuilder:
        """Operator skip of a blocked key."""
        return self.emit("key_skipped", key=key)

    def seal(self, segment: int) -> TraceBuilder:
        """A segment is sealed."""
        return self.emit("segment_sealed", segment=segment)

    def segment(
        self,
        segment: int,
        buckets: int,
        lo: int,
        hi: int,
        predecessor: int | None = None,
        second_predecessor: int | None = None,
    ) -> TraceBuilder:
        """A segment is created (with two predecessors by a merge)."""
        return self.emit(
            "segment_created",
            segment=segment,
            buckets=buckets,
            range_lo=lo,
            range_hi=hi,
            predecessor=predecessor,
            second_predecessor=second_predecessor,
        )

    # --- effect events ---

    def deliver(self, offset: int, consumer: str, attempt: int = 1) -> TraceBuilder:
        """A delivery."""
        return self.emit("deliver", offset=offset, key=self._key(offset), consumer=consumer, attempt=attempt)

    def held(self, offset: int, reason: str, consumer: str | None = None) -> TraceBuilder:
        """A message becomes held."""
        return self.emit("held", offset=offset, key=self._key(offset), reason=reason, consumer=consumer)

    def ack(self, offset: int, consumer: str) -> TraceBuilder:
        """An accepted ack."""
        return self.emit("ack", offset=offset, key=self._key(offset), consumer=consumer)

    def ack_ignored(self, offset: int, consumer: str, reason: str = "not-holder") -> TraceBuilder:
        """An ignored ack."""
        key = self._key(offset) if offset < len(self.keys) else None
        return self.emit("ack_ignored", offset=offset, consumer=consumer, reason=reason, key=key)

    def nack(self, offset: int, consumer: str, attempt: int = 1) -> TraceBuilder:
        """An accepted nack."""
        return self.emit("nack", offset=offset, key=self._key(offset), consumer=consumer, attempt=attempt)

    def nack_ignored(self, offset: int, consumer: str, reason: str = "not-holder") -> TraceBuilder:
        """An ignored nack."""
        key = self._key(offset) if offset < len(self.keys) else None
        return self.emit("nack_ignored", offset=offset, consumer=consumer, reason=reason, key=key)

    def extended(self, offset: int, consumer: str, attempt: int = 1) -> TraceBuilder:
        """An applied extension: the delivery times out at the op's tick plus its ticks (KS-RTY-8)."""
        return self.emit("extended", offset=offset, key=self._key(offset), consumer=consumer, attempt=attempt)

    def extend_ignored(self, offset: int, consumer: str, reason: str = "not-holder") -> TraceBuilder:
        """An ignored extension (KS-RTY-9)."""
        return self.emit("extend_ignored", offset=offset, key=self._key(offset), consumer=consumer, reason=reason)

    def timeout(self, offset: int, consumer: str, attempt: int = 1) -> TraceBuilder:
        """A delivery times out."""
        return self.emit("timeout", offset=offset, key=self._key(offset), consumer=consumer, attempt=attempt)

    def drop(self, offset: int, reason: str) -> TraceBuilder:
        """A message is resolved as dropped."""
        return self.emit("drop", offset=offset, key=self._key(offset), reason=reason)

    def dead_letter(self, offset: int, attempt: int, reason: str) -> TraceBuilder:
        """A message is resolved as dead-lettered."""
        return self.emit("dead_letter", offset=offset, key=self._key(offset), attempt=attempt, reason=reason)

    def filter(self, offset: int) -> TraceBuilder:
        """A message is resolved as filtered."""
        return self.emit("filter", offset=offset, key=self._key(offset))

    def blocked(self, offset: int, attempt: int) -> TraceBuilder:
        """A poisoned message blocks its key."""
        return self.emit("key_blocked", offset=offset, key=self._key(offset), attempt=attempt)

    def evicted(self, consumer: str) -> TraceBuilder:
        """A disconnected member is evicted."""
        return self.emit("consumer_evicted", consumer=consumer)

    def persisted(self, cursor: int, holes: Sequence[Sequence[int]] | None = None) -> TraceBuilder:
        """The cursor (and holes as inclusive ranges) is persisted."""
        return self.emit(
            "cursor_persisted", cursor=cursor, ranges=[list(r) for r in holes] if holes is not None else None
        )

    def checkpoint(self, segment: int, bucket: int, cursor: int) -> TraceBuilder:
        """A per-bucket checkpoint."""
        return self.emit("checkpoint", segment=segment, bucket=bucket, cursor=cursor)

    def write(self, path: Path) -> int:
        """Write the trace (JSON lines, or Parquet for .parquet)."""
        return write_trace(self.events, path)
