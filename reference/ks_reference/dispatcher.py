"""The reference dispatcher: every operation of spec section 3, in one deterministic object.

Each operation validates its arguments first (a refusal changes nothing, KS-GEN-4), records its
op event when a trace is kept, performs its effects, ends with a dispatch pass (KS-GEN-6) and
the cursor persistence that is due, and returns the effect events it caused.

Long because it is the one frame of every operation of the protocol (twenty-one of them, each a thin method that
validates, opens the op, delegates to the section's mixin and closes it) and the op table that maps protocol objects
onto them; the behaviour itself lives in the mixins, one per spec section.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ks_spec.buckets import bucket_hash
from ks_spec.errors import UserError

from ks_reference import __version__
from ks_reference.best_effort import BestEffort
from ks_reference.buckets import BucketLayout, LayoutRefusal, Placement, Segment
from ks_reference.config import Config
from ks_reference.core import Event, Refusal
from ks_reference.dispatch import DispatchPass
from ks_reference.membership import Membership
from ks_reference.persistence import Persistence
from ks_reference.poison import Poison
from ks_reference.stats import collect_stats
from ks_reference.store import LogEntry, MemoryStore, Store
from ks_reference.trace import TraceRecorder

IMPLEMENTATION = {"name": "keyshared-reference", "version": __version__, "language": "python"}
OPS = (
    "publish",
    "add_consumer",
    "remove_consumer",
    "disconnect",
    "reconnect",
    "flow",
    "ack",
    "nack",
    "zombie_ack",
    "zombie_nack",
    "extend",
    "tick",
    "release",
    "skip",
    "restart",
    "seek",
    "rollover",
    "split",
    "merge",
    "publish_entry",
    "publish_delayed",
)


@dataclass
class Outcome:
    """What one operation caused: its effect events, and for a `buckets` publish the message's placement."""

    events: list[Event] = field(default_factory=list)
    placement: Placement | None = None
    placements: list[Placement] | None = None
    """For `publish_entry`: each message's placement, in offset order."""
    segments: list[dict[str, int]] | None = None
    """For `split` and `merge` with `layout = "reported"`: the segments created, as the dispatcher chose them."""


class Dispatcher(DispatchPass, Poison, Membership, Persistence, BestEffort):
    """A Key-Shared subscription driven by method calls, in logical time, with no threads and no clock.

    `store` defaults to a `MemoryStore`; pass a `SqliteStore` for a durable one. With `trace`,
    every operation's op event and effect events are recorded, starting with `config`.
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None = None,
        store: Store | None = None,
        trace: TraceRecorder | None = None,
    ) -> None:
        parsed = config if isinstance(config, Config) else Config.parse(config)
        super().__init__(parsed, store if store is not None else MemoryStore())
        self.trace = trace
        if trace is not None:
            if self.log:
                raise UserError("a trace starts from an empty store; this store already holds published messages")
            detail = {"trace_version": 1, "config": parsed.as_dict(), "implementation": IMPLEMENTATION}
            trace.record({"event": "config", "detail": json.dumps(detail, sort_keys=True)}, self.now)
            if self.layout is not None:
                for segment in self.layout.segments.values():
                    trace.record(_segment_created(segment), self.now)

    # --- the operation frame ---

    def _begin(self, *op_events: Event) -> None:
        self._effects = []
        self.position_at_begin = self.cursor.position
        if self.trace is not None:
            for event in op_events:
                self.trace.record(event, self.now)

    def _end(self, run_pass: bool = True, placement: Placement | None = None) -> Outcome:
        if run_pass and self.config.reliable:
            # req: KS-GEN-6, KS-DRN-2 (a drain that cleared in this op is delivered in this op's pass)
            self.dispatch_pass()
            self.persist_if_due(in_tick_phase_6=False)
        effects, self._effects = self._effects, []
        if self.trace is not None:
            for event in effects:
                self.trace.record(event, self.now)
        return Outcome(effects, placement)

    # --- operations (spec section 3) ---

    def publish(self, key: object, offset: object = None) -> Outcome:
        """Append a message with this routing key; `offset`, when given, must be the next one."""
        text = _text(key, "key")
        expected = self.next_offset(offset)
        placement = self.layout.place(text) if self.layout is not None else None
        op: Event = {"event": "publish", "offset": expected, "key": text}
        entry = LogEntry(text)
        if placement is not None:
            op.update(placement.as_dict())
            entry = LogEntry(text, placement.hash, placement.segment, placement.bucket)
        self._begin(op)
        self.store.append(expected, entry)
        self.log.append(entry)
        if self.layout is not None and placement is not None:
            self.layout.on_publish(expected, placement)
        if not self.config.reliable:
            self.best_effort_publish(expected, text, placement)
            if self.layout is not None and placement is not None:
                self.layout.on_resolve(placement)  # its outcome is final: it holds back no successor
        return self._end(placement=placement)

    def publish_delayed(self, key: object, deliver_at: object, offset: object = None) -> Outcome:
        """Append a message that must not be delivered before tick `deliver_at` (KS-ORD-5): Pulsar's `deliverAt`.
        Specified for the strict and owner profiles with a selector other than `buckets` (spec section 6)."""
        text = _text(key, "key")
        expected = self.next_offset(offset)
        if not isinstance(deliver_at, int) or isinstance(deliver_at, bool) or deliver_at < 0:
            raise Refusal("invalid_argument", f"deliver_at must be a non-negative integer, got {deliver_at!r}")
        if not self.config.reliable or self.layout is not None:
            raise Refusal(
                "invalid_argument", "publish_delayed needs the strict or owner profile and no selector buckets"
            )
        self._begin({"event": "publish", "offset": expected, "key": text, "deliver_at": deliver_at})
        entry = LogEntry(text, deliver_at=deliver_at)
        self.store.append(expected, entry)
        self.log.append(entry)
        return self._end()

    def publish_entry(self, keys: object, hash_min: object, hash_max: object, offset: object = None) -> Outcome:
        """Append a batch: one message per key at consecutive offsets, stamped with its effective `hashB` range and
        delivered whole (spec section 17, KS-BKT-10). Under `buckets` its keys share a bucket; under any other
        selector it is a key-based batch (PIP-34): every message has the same key."""
        expected = self.next_offset(offset)
        texts, placements = self.check_batch(keys, hash_min, hash_max)
        ops: list[Event] = []
        entries: list[LogEntry] = []
        for index, text in enumerate(texts):
            ops.append({"event": "publish", "offset": expected + index, "key": text})
            if placements:
                placement = placements[index]
                ops[-1].update(placement.as_dict())
                entries.append(LogEntry(text, placement.hash, placement.segment, placement.bucket, expected))
            else:
                entries.append(LogEntry(text, entry=expected))
            ops[-1]["entry"] = expected
        self._begin(*ops)
        for index, entry in enumerate(entries):
            self.store.append(expected + index, entry)
            self.log.append(entry)
            if self.layout is not None:
                self.layout.on_publish(expected + index, placements[index])
        outcome = self._end()
        if placements:
            outcome.placements = placements
        return outcome

    def next_offset(self, offset: object) -> int:
        """The offset the next message gets; a Refusal when the op names another one."""
        expected = len(self.log)
        if offset is not None and (not _is_int(offset) or offset != expected):
            raise Refusal("invalid_argument", f"offset must be the next offset {expected}, got {offset!r}")
        return expected

    def check_batch(self, keys: object, hash_min: object, hash_max: object) -> tuple[list[str], list[Placement]]:
        """The batch's keys and their placements (none outside `buckets`), or a Refusal: the owner profile, no parking,
        one bucket of one active segment (`buckets`) or one key (any other selector: a key-based batch), and its
        effective range (spec section 17)."""
        config = self.config
        if config.profile != "owner":
            raise Refusal("invalid_argument", "publish_entry needs the owner profile")
        if config.park_after != 0:
            # req: KS-GEN-4 (how a batch counts against parking is not specified)
            raise Refusal("invalid_argument", f"publish_entry is not specified with park_after {config.park_after!r}")
        if not isinstance(keys, list) or not keys:
            raise Refusal("invalid_argument", "keys must be a non-empty list of strings")
        texts = [_text(key, "keys[]") for key in keys]
        if self.layout is None:
            if len(set(texts)) != 1:
                # req: KS-GEN-4 (outside buckets a batch is key-based: one key per batch, PIP-34)
                raise Refusal("invalid_argument", "outside selector buckets the keys of a batch must all be the same")
            placements: list[Placement] = []
            hashes = [bucket_hash(texts[0]) & 0xFFFF]
        else:
            placements = [self.layout.place(text) for text in texts]
            if len({(p.segment, p.bucket) for p in placements}) != 1:
                raise Refusal("invalid_argument", "the keys of a batch must all lie in one bucket of one segment")
            hashes = [p.hash & 0xFFFF for p in placements]
        if (hash_min, hash_max) != (min(hashes), max(hashes)):
            raise Refusal(
                "invalid_argument",
                f"[hash_min, hash_max] must be the batch's effective range [{min(hashes)}, {max(hashes)}], "
                f"got [{hash_min!r}, {hash_max!r}]",
            )
        return texts, placements

    def add_consumer(
        self,
        consumer: object,
        capacity: object,
        filters: object = None,
        ranges: object = None,
        hash_name: object = None,
    ) -> Outcome:
        """A consumer joins with a capacity, optional glob filters, (pulsar-sticky only) slot ranges and
        (pulsar-consistent only) the name its selector hashes, which other members may share (KS-ASN-5)."""
        member = self.check_join(consumer, capacity, filters, ranges, hash_name)
        op: Event = {
            "event": "consumer_added",
            "consumer": member.name,
            "capacity": member.capacity,
            "filters": list(member.filters),
        }
        if member.ranges:
            op["ranges"] = [[lo, hi] for lo, hi in member.ranges]
        if member.hash_name is not None:
            op["hash_name"] = member.hash_name
        self._begin(op)
        self.on_join(member)
        return self._end()

    def remove_consumer(self, consumer: object) -> Outcome:
        """A member leaves; what it held is delivered again (KS-MEM-1)."""
        member = self.member(consumer)
        self._begin({"event": "consumer_removed", "consumer": member.name})
        self.on_leave(member)
        return self._end()

    def disconnect(self, consumer: object) -> Outcome:
        """A member's connection is lost: it stays a member, receives nothing, and is evicted later."""
        member = self.member(consumer)
        self._begin({"event": "consumer_disconnected", "consumer": member.name})
        self.on_disconnect(member)
        return self._end()

    def reconnect(self, consumer: object) -> Outcome:
        """A disconnected member's connection is back: it keeps what it holds and is not evicted (KS-MEM-4)."""
        member = self.member(consumer)
        self._begin({"event": "consumer_reconnected", "consumer": member.name})
        self.on_reconnect(member)
        return self._end()

    def flow(self, consumer: object, permits: object) -> Outcome:
        """A member grants more permits (`flow_control = "permits"` only, spec section 8)."""
        member = self.member(consumer)
        if self.config.flow_control != "permits":
            raise Refusal("invalid_argument", "flow needs flow_control 'permits'; this subscription counts capacity")
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
            raise Refusal("invalid_argument", f"permits must be an integer >= 1, got {permits!r}")
        self._begin({"event": "permits_granted", "consumer": member.name, "capacity": permits})
        self.on_flow(member, permits)
        return self._end()

    def ack(self, consumer: object, offset: object) -> Outcome:
        """An acknowledgement from a member (ignored and recorded unless it holds the delivery)."""
        member = self.member(consumer)
        position = _offset(offset)
        self._begin()
        if self.config.reliable:
            self.on_ack(member, position)
        else:
            self.best_effort_ack(member, position, "ack")
        return self._end()

    def nack(self, consumer: object, offset: object) -> Outcome:
        """A negative acknowledgement from a member (ignored and recorded unless it holds the delivery)."""
        member = self.member(consumer)
        position = _offset(offset)
        self._begin()
        if self.config.reliable:
            self.on_nack(member, position)
        else:
            self.best_effort_ack(member, position, "nack")
        return self._end()

    def zombie_result(self, op: str, consumer: object, offset: object, attempt: object) -> Outcome:
        """`zombie_ack` or `zombie_nack`: a result for the delivery of `offset` with `attempt`, made to `consumer` and
        ended since (KS-ACK-3); `consumer` need not be a member."""
        name = _text(consumer, "consumer")
        position = _offset(offset)
        if position >= len(self.log):
            raise Refusal("invalid_argument", f"offset {position} was never published")
        if not _is_int(attempt) or not isinstance(attempt, int) or attempt < 1:
            raise Refusal("invalid_argument", f"attempt must be an integer >= 1, got {attempt!r}")
        holders = self.delivery_holders.get(position, [])
        message = self.messages.get(position)
        outstanding = message is not None and message.holder is not None and message.attempts == attempt
        if attempt > len(holders) or holders[attempt - 1] != name or outstanding:
            # req: KS-GEN-4 (outside the op's domain: no delivery to this consumer that has ended)
            raise Refusal("invalid_argument", f"{op}: no delivery of offset {position} (attempt {attempt}) to {name!r} "
                          "has ended since the last restart")  # fmt: skip
        self._begin({"event": op, "offset": position, "key": self.log[position].key, "consumer": name,
                     "attempt": attempt})  # fmt: skip
        if self.config.reliable:
            self.on_zombie(op, name, position)
        else:
            self.emit("ack_ignored" if op == "zombie_ack" else "nack_ignored", offset=position,
                      key=self.log[position].key, consumer=name, reason="ended")  # fmt: skip
        return self._end()

    def extend(self, consumer: object, offset: object, ticks: object) -> Outcome:
        """A member asks for more time for its delivery of `offset`: it times out at now + `ticks` (KS-RTY-8)."""
        member = self.member(consumer)
        position = _offset(offset)
        if self.config.ack_timeout == 0 or not self.config.reliable:
            # req: KS-GEN-4 (no timeouts: no deadline to move)
            raise Refusal("invalid_argument", "extend needs ack_timeout > 0 (there is no deadline to move)")
        if position >= len(self.log):
            raise Refusal("invalid_argument", f"offset {position} was never published")
        if not _is_int(ticks) or not isinstance(ticks, int) or ticks < 1:
            # req: KS-GEN-4 (ticks = 0 is refused: a consumer that gives the message back at once nacks it)
            raise Refusal("invalid_argument", f"ticks must be an integer >= 1, got {ticks!r}")
        self._begin({"event": "extend", "offset": position, "key": self.log[position].key, "consumer": member.name,
                     "capacity": ticks})  # fmt: skip
        self.on_extend(member, position, ticks)
        return self._end()

    def tick(self) -> Outcome:
        """Advance time by one and run the phases of KS-GEN-7 in order."""
        self.now += 1  # req: KS-GEN-2 (the only clock: every duration is counted in these ticks)
        self._begin({"event": "tick"})
        self.store.record_clock(self.now)
        if self.config.reliable:
            # req: KS-GEN-7, KS-GEN-9 (with timer_slack, the timed phases run at every (slack + 1)-th tick only)
            timers = self.timers_due()
            if timers:
                self.phase_timeouts()  # 1
            self.phase_poison()  # 2
            if timers:
                self.phase_retry_ready()  # 3
                self.delays_due()  # 3, req: KS-ORD-7 (delayed messages fall due with the retries)
            if self.config.tick_order == "danube":
                self.deliver_step()  # req: KS-GEN-7 (Danube redelivers ready retries before it evicts)
            if timers:
                self.phase_eviction()  # 4
            self.controller_step()  # req: KS-BKT-3 (the controller's moves, with controller_moves: before the pass)
            self.dispatch_pass(heartbeat=True)  # 5, req: KS-GEN-8 (a tick's pass reads under either read_trigger)
            self.persist_if_due(in_tick_phase_6=timers, tick=True)  # 6
        elif self.timers_due():
            self.phase_eviction()  # best-effort has no timeouts, retries, poison or cursor (spec section 18)
        return self._end(run_pass=False)

    def timers_due(self) -> bool:
        """True when this tick runs the timed phases: every (timer_slack + 1)-th tick, every tick by default."""
        return self.config.heartbeat(self.now)  # req: KS-GEN-9

    def release(self, key: object) -> Outcome:
        """Operator: retry a blocked key's message with a fresh failure budget (KS-POI-4)."""
        blocked = self.blocked_messages(key)
        self._begin({"event": "key_released", "key": blocked[0].key})
        self.on_release(blocked[0].key)
        return self._end()

    def skip(self, key: object) -> Outcome:
        """Operator: resolve a blocked key's message as dropped (KS-POI-5)."""
        blocked = self.blocked_messages(key)
        self._begin({"event": "key_skipped", "key": blocked[0].key})
        self.on_skip(blocked[0].key)
        return self._end()

    def restart(self) -> Outcome:
        """Crash and restart: lose all volatile state, resume from the durable store (spec section 14)."""
        self._begin({"event": "restart"})
        self.on_restart()
        return self._end()

    def seek(self, offset: object) -> Outcome:
        """Reset the subscription's cursor to `offset` (section 14, seek): replay from it, or give up what is below."""
        target = _offset(offset)
        if target > len(self.log):
            # req: KS-GEN-4 (a seek names a published offset, or the end of the log)
            raise Refusal("invalid_argument", f"offset {target} is past the end of the log ({len(self.log)})")
        if not self.config.reliable or self.layout is not None:
            # req: KS-GEN-4 (seek applies to the strict and owner profiles without buckets, section 14)
            raise Refusal("invalid_argument", "seek applies to the strict and owner profiles without buckets")
        self._begin({"event": "seek", "offset": target})
        self.on_seek(target)
        return self._end()

    def rollover(self, segment: object, successor: object, buckets: object) -> Outcome:
        """Seal an active segment; a successor over the same range with `buckets` buckets takes new messages."""
        layout = self._layout()
        try:
            created = layout.rollover(segment, successor, buckets)
        except LayoutRefusal as refusal:
            raise Refusal("invalid_argument", str(refusal)) from None
        self._begin({"event": "segment_sealed", "segment": created.predecessor}, _segment_created(created))
        self.store.save_segments(layout.records())
        return self._end()

    def split(self, segment: object, lower: object, upper: object) -> Outcome:
        """Seal an active segment; two children over its lower and upper halves take new messages."""
        layout = self._layout()
        reported = self.config.layout == "reported"
        point = layout.load_split_point(segment) if reported else None  # req: KS-BKT-11 (a point chosen by load)
        try:
            low, high = layout.split(segment, lower, upper, point)
        except LayoutRefusal as refusal:
            raise Refusal("invalid_argument", str(refusal)) from None
        sealed = {"event": "segment_sealed", "segment": low.predecessor}
        self._begin(sealed, _segment_created(low), _segment_created(high))
        self.store.save_segments(layout.records())
        return self._reported(self._end(), [low, high])

    def merge(self, lower: object, upper: object, successor: object) -> Outcome:
        """Seal two adjacent active segments; one successor over both ranges takes new messages."""
        layout = self._layout()
        try:
            created = layout.merge(lower, upper, successor, larger=self.config.layout == "reported")
        except LayoutRefusal as refusal:
            raise Refusal("invalid_argument", str(refusal)) from None
        sealed = [{"event": "segment_sealed", "segment": number} for number in created.predecessors]
        self._begin(*sealed, _segment_created(created))
        self.store.save_segments(layout.records())
        return self._reported(self._end(), [created])

    def _reported(self, outcome: Outcome, created: list[Segment]) -> Outcome:
        """With `layout = "reported"`, the segments a split or merge created go in its reply (KS-BKT-11)."""
        if self.config.layout == "reported":
            # req: KS-BKT-11 (the layout is reported before anything is routed by it)
            outcome.segments = [
                {key: value for key, value in _segment_created(segment).items() if key in _REPORTED}
                for segment in created
            ]
        return outcome

    def _layout(self) -> BucketLayout:
        if self.layout is None:
            raise Refusal("invalid_argument", f"layout changes need selector 'buckets', not '{self.config.selector}'")
        return self.layout

    def quiescent(self) -> Outcome:
        """The driver declares the run quiescent (spec section 19); recorded, changes nothing."""
        self._begin({"event": "quiescent"})
        return self._end(run_pass=False)

    def stats(self) -> dict[str, Any]:
        """The stats of spec section 16."""
        return collect_stats(self)

    # --- operations as data (the adapter protocol's op objects) ---

    def apply(self, op: Mapping[str, Any]) -> Outcome:
        """Perform an operation given as an adapter-protocol op object, e.g. {"op": "ack", "consumer": "c1", ...}."""
        name = op.get("op")

        def arg(field_name: str, default: object = _REQUIRED) -> Any:
            if field_name in op:
                return op[field_name]
            if default is _REQUIRED:
                raise Refusal("invalid_argument", f"op '{name}' needs the argument '{field_name}'")
            return default

        if name == "publish":
            return self.publish(arg("key"), arg("offset", None))
        if name == "add_consumer":
            return self.add_consumer(
                arg("consumer"), arg("capacity"), arg("filters", None), arg("ranges", None), arg("hash_name", None)
            )
        if name == "remove_consumer":
            return self.remove_consumer(arg("consumer"))
        if name == "disconnect":
            return self.disconnect(arg("consumer"))
        if name == "reconnect":
            return self.reconnect(arg("consumer"))
        if name == "flow":
            return self.flow(arg("consumer"), arg("permits"))
        if name == "ack":
            return self.ack(arg("consumer"), arg("offset"))
        if name == "nack":
            return self.nack(arg("consumer"), arg("offset"))
        if name in ("zombie_ack", "zombie_nack"):
            return self.zombie_result(name, arg("consumer"), arg("offset"), arg("attempt"))
        if name == "extend":
            return self.extend(arg("consumer"), arg("offset"), arg("ticks"))
        if name == "tick":
            return self.tick()
        if name == "release":
            return self.release(arg("key"))
        if name == "skip":
            return self.skip(arg("key"))
        if name == "restart":
            return self.restart()
        if name == "seek":
            return self.seek(arg("offset"))
        if name == "rollover":
            return self.rollover(arg("segment"), arg("successor"), arg("buckets"))
        if name == "split":
            return self.split(arg("segment"), arg("lower"), arg("upper"))
        if name == "merge":
            return self.merge(arg("lower"), arg("upper"), arg("successor"))
        if name == "publish_delayed":
            return self.publish_delayed(arg("key"), arg("deliver_at"), arg("offset", None))
        if name == "publish_entry":
            return self.publish_entry(arg("keys"), arg("hash_min"), arg("hash_max"), op.get("offset"))
        raise Refusal("invalid_argument", f"unknown op {name!r} (known: {', '.join(OPS)})")


_REQUIRED = object()
_REPORTED = ("segment", "buckets", "range_lo", "range_hi")
"""The fields of a created segment a `layout = "reported"` reply carries (adapter protocol, `segments`)."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _offset(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Refusal("invalid_argument", f"offset must be a non-negative integer, got {value!r}")
    return value


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise Refusal("invalid_argument", f"{name} must be a string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal("invalid_argument", f"{name} is not valid Unicode (it holds a lone surrogate)") from None
    return value


def _segment_created(segment: Segment) -> Event:
    event: Event = {
        "event": "segment_created",
        "segment": segment.number,
        "buckets": segment.buckets,
        "range_lo": segment.range_lo,
        "range_hi": segment.range_hi,
    }
    if segment.predecessor is not None:
        event["predecessor"] = segment.predecessor
    if segment.second_predecessor is not None:
        event["second_predecessor"] = segment.second_predecessor
    return event
