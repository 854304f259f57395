"""The dispatcher's state (spec section 1) and the transitions every section shares.

`Core` holds the whole state of one subscription; the section modules (dispatch, acks,
retries, poison, membership, persistence, best_effort) add the operations as mixins, and
`ks_reference.dispatcher.Dispatcher` puts them together. Only the durable store outlives a
restart; everything here is volatile and rebuilt from it by `load_from_store`.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Container
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, cast

from pyroaring import BitMap64

from ks_reference.buckets import BucketLayout, Placement
from ks_reference.config import Config
from ks_reference.cursor import CHUNK_BITS, Cursor, advance_cursor
from ks_reference.filters import accepts
from ks_reference.selectors import Range, Selector, make_selector
from ks_reference.store import LogEntry, Store

Event = dict[str, Any]
"""An event in the trace format v1 (without `seq` and `tick` until it is recorded)."""


class MessageState(Enum):
    """The states of a read, unresolved message (spec section 1); unread and resolved messages have no object."""

    PENDING = "pending"
    OUTSTANDING = "outstanding"
    RETRYING = "retrying"
    BLOCKED = "blocked"
    DELAYED = "delayed"
    """Read but not yet due (`publish_delayed`): it waits in the delayed-delivery tracker, off its key's order."""


@dataclass(eq=False)
class Member:
    """One consumer incarnation: a name between its join and its leave, eviction or a restart (KS-GEN-3).

    Members compare by identity, so a reused name is a different member.
    """

    name: str
    capacity: int
    filters: tuple[str, ...]
    ranges: tuple[Range, ...]
    connected: bool = True
    disconnected_at: int = 0
    outstanding: set[int] = field(default_factory=set)
    """Offsets of the deliveries it holds (best-effort: delivered, not yet received)."""
    permits: int = 0
    """With `flow_control = "permits"`: grants since it joined minus deliveries since then (section 8)."""
    unacked_blocked: bool = False
    """With `max_unacked`: it reached the limit and has not yet come down to half of it (KS-FLW-1)."""
    hash_name: str | None = None
    """Under `pulsar-consistent`, the name its selector hashes when it is not the member's own (Pulsar's consumer
    name, which several consumers may share, KS-ASN-5)."""


@dataclass(eq=False)
class Message:
    """A read, unresolved message: its state, its delivery and failure history since the last restart."""

    offset: int
    key: str
    placement: Placement | None = None
    entry: int | None = None
    """The first offset of its batch (`publish_entry`), else None (spec section 17)."""
    deliver_at: int | None = None
    """A delayed message's due tick (`publish_delayed`, KS-ORD-5), else None."""
    state: MessageState = MessageState.PENDING
    attempts: int = 0
    """Deliveries since the last restart (KS-RTY-5)."""
    failures: int = 0
    """Failures since the last restart or operator release (spec section 10)."""
    last_failure: str | None = None
    holder: Member | None = None
    delivered_at: int = 0
    deadline: int | None = None
    """The tick its outstanding delivery times out at once its holder extended it (KS-RTY-8); None: the delivery
    tick plus `ack_timeout`."""
    retry_at: int = 0
    awaiting_redelivery: bool = False
    """Pending after a failure or after its holder left (KS-ORD-3)."""
    held: tuple[str, str | None] | None = None
    """The last hold reported for it: (reason, target), so a hold is reported once per change (KS-OBS-3)."""
    held_since: int = 0
    blocked_at: int = 0


class Refusal(Exception):
    """An operation the spec refuses (KS-GEN-4): nothing happened."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Core:
    """The state of one subscription and the transitions shared by every section."""

    config: Config
    store: Store
    selector: Selector
    layout: BucketLayout | None

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.now = 0
        self._effects: list[Event] = []
        self.load_from_store()

    # --- state lifecycle (spec section 14: what a restart keeps and loses) ---

    def load_from_store(self) -> None:
        """(Re)build every piece of volatile state from the durable store, as a fresh process would."""
        snapshot = self.store.load()
        self.now = max(self.now, snapshot.clock)
        self.log: list[LogEntry] = snapshot.log
        self.cursor = Cursor(snapshot.cursor, snapshot.holes)
        self.delivery_holders: dict[int, list[str]] = {}
        """Per offset, the name each delivery since the last restart went to, by attempt (KS-ACK-3's domain)."""
        self.persisted_position = snapshot.cursor
        self.persisted_at: int | None = snapshot.persisted_at
        self.position_at_begin = snapshot.cursor
        """The cursor when the current operation began: with `persist_trigger = advance`, only an operation that
        moves it makes a persistence due (KS-CUR-12)."""
        self.flush_owed = False
        """With `persist_flush`, a flush tick passed while the cursor was unpersisted: persist at the next timed
        phase 6 (KS-CUR-12, KS-GEN-9)."""
        self.read_position = snapshot.cursor
        self.selector = make_selector(
            self.config.selector, self.config.points, self.config.bucket_budget, self.config.partitions
        )
        self.members: dict[str, Member] = {}
        self.messages: dict[int, Message] = {}
        self.queues: dict[str, list[int]] = {}
        """Per key, its read unresolved offsets in offset order."""
        self.pending_counts: Counter[str] = Counter()
        """Per key, how many of its messages are pending (keys the dispatch pass visits)."""
        self.retrying: set[int] = set()
        self.delayed: set[int] = set()
        """The delayed-delivery tracker: read messages not yet due (KS-ORD-5)."""
        self.key_holders: dict[str, Counter[Member]] = {}
        """Per key, its outstanding deliveries by holder (KS-DRN-1)."""
        self.blocked: dict[str, list[int]] = {}
        """Per blocked key, its blocked offsets in order (the owner profile can poison several at one tick)."""
        self.holds: dict[str, int] = {}
        """Per key, the message the last dispatch pass held (the key's head that could not go)."""
        self._target_cache: dict[str, str | None] = {}
        self._eligible_cache: dict[str, tuple[str, ...] | None] = {}
        self.members_by_name: list[str] = []
        self.any_filters = False
        self.best_effort_holder: dict[int, Member] = {}
        self.reset_counters()
        self.layout = None
        if self.config.selector == "buckets":
            self.layout = BucketLayout(
                self.config.bucket_budget,
                self.config.bucket_max,
                snapshot.segments,
                self.config.bucket_assignment,
                self.config.controller_moves,
            )
            if not snapshot.segments:
                self.store.save_segments(self.layout.records())
            self.layout.checkpoints = dict(snapshot.checkpoints)
            if self.config.checkpoint_resume:
                self.resume_from_checkpoints()
            for offset, entry in enumerate(self.log):
                placement = placement_of(entry)
                bucket = (placement.segment, placement.bucket)
                self.layout.last_offset[bucket] = offset
                if self.config.reliable and not self.cursor.is_resolved(offset):
                    self.layout.track_unresolved(offset, placement)
                    self.layout.undurable.setdefault(bucket, deque()).append(offset)

    def resume_from_checkpoints(self) -> None:
        """Count every message below its bucket's loaded checkpoint as resolved (KS-BKT-9, KS-CUR-3).

        The cursor then starts past the prefix these close; the rest join the holes, marked for the next
        persistence, so the store's cursor catches up with what the checkpoints already record.
        """
        assert self.layout is not None
        checkpoints = self.layout.checkpoints
        resolved = BitMap64(self.cursor.holes)
        for offset in range(self.cursor.position, len(self.log)):
            entry = self.log[offset]
            if entry.segment is not None and offset < checkpoints.get((entry.segment, entry.bucket or 0), 0):
                # req: KS-BKT-9
                resolved.add(offset)
        position = advance_cursor(self.cursor.position, cast("Container[int]", resolved))
        if position == self.cursor.position and len(resolved) == len(self.cursor.holes):
            return
        resolved.remove_range(0, position)
        self.cursor = Cursor(position, resolved)
        self.cursor.changed = True
        self.cursor.dirty_chunks = {offset >> CHUNK_BITS for offset in resolved} | {position >> CHUNK_BITS}

    def reset_counters(self) -> None:
        """Counters are totals since the last restart (spec section 16)."""
        self.delivered_total = 0
        self.redelivered_total = 0
        self.resolved_total: Counter[str] = Counter()
        self.dropped_total: Counter[str] = Counter()
        self.ack_ignored_total: Counter[str] = Counter()
        self.evicted_total = 0
        self.draining_cleared_total = 0

    # --- events ---

    def emit(self, event: str, **columns: Any) -> None:
        """Record an effect event of the current operation (nulls left out)."""
        self._effects.append({"event": event, **{k: v for k, v in columns.items() if v is not None}})

    # --- assignment (spec section 4 and 5) ---

    def membership_changed(self) -> None:
        """Forget cached targets: they are a function of the membership epoch (KS-ASN-1)."""
        self._target_cache.clear()
        self._eligible_cache.clear()
        self.members_by_name = sorted(self.members)
        self.any_filters = any(member.filters for member in self.members.values())
        if self.layout is not None:
            self.layout.members_changed(self.members_by_name)
            self.layout.needs_reconcile = True

    def eligible(self, key: str) -> tuple[str, ...] | None:
        """The key's eligible members in join order, or None when every member accepts it (spec section 5)."""
        if not self.any_filters:
            return None
        if key not in self._eligible_cache:
            # req: KS-FLT-2
            members = self.members.items()
            self._eligible_cache[key] = tuple(name for name, member in members if accepts(member.filters, key))
        return self._eligible_cache[key]

    def target_name(self, key: str, placement: Placement | None) -> str | None:
        """The member the selector picks for a message among the key's eligible members (KS-FLT-5)."""
        if self.layout is not None and placement is not None:
            return self.layout.target(placement, self.members_by_name)
        if self.config.selector == "any":
            return self.free_target(key)
        if key not in self._target_cache:
            eligible = self.eligible(key)
            # req: KS-ASN-1, KS-FLT-5
            self._target_cache[key] = self.selector.target(key, eligible) if eligible != () else None
        return self._target_cache[key]

    def free_target(self, key: str) -> str | None:
        """Selector `any` (no key affinity): the key's holder while it holds some, else the first eligible
        member by name that is connected and has room (else the first connected, else the first eligible)."""
        holders = self.key_holders.get(key)
        if holders:
            # req: KS-DRN-1 (with no affinity a key stays with its holder while it holds messages of it)
            return next(iter(holders)).name
        eligible = self.eligible(key)
        names = sorted(self.members) if eligible is None else sorted(eligible)
        if not names:
            return None
        members = [self.members[name] for name in names]
        connected = [m for m in members if m.connected]
        with_room = [m for m in connected if self.has_room(m)]
        return (with_room or connected or members)[0].name

    def has_room(self, member: Member) -> bool:
        """True when one more delivery fits: below capacity, or holding a permit (KS-FLW-1, KS-FLW-4), and not blocked
        by `max_unacked`."""
        if member.unacked_blocked:
            return False  # req: KS-FLW-1 (max_unacked: blocked until half of the limit is acked, as Pulsar)
        if self.config.flow_control == "permits":
            return member.permits > 0
        return len(member.outstanding) < member.capacity

    # --- message transitions ---

    def set_state(self, message: Message, state: MessageState) -> None:
        """Move a message between the unresolved states, keeping the per-key and retry indexes right."""
        self._unindex(message)
        message.state = state
        if state is MessageState.PENDING:
            self.pending_counts[message.key] += 1
        if state is MessageState.RETRYING:
            self.retrying.add(message.offset)
        if state is MessageState.DELAYED:
            self.delayed.add(message.offset)

    def _unindex(self, message: Message) -> None:
        if message.state is MessageState.PENDING:
            self.pending_counts[message.key] -= 1
            if self.pending_counts[message.key] == 0:
                del self.pending_counts[message.key]
        elif message.state is MessageState.RETRYING:
            self.retrying.discard(message.offset)
        elif message.state is MessageState.DELAYED:
            self.delayed.discard(message.offset)

    def deliver(self, message: Message, member: Member) -> None:
        """Make a delivery: the message becomes outstanding at `member` with the next attempt number."""
        # req: KS-RTY-5
        message.attempts += 1
        self.set_state(message, MessageState.OUTSTANDING)
        message.holder = member
        message.delivered_at = self.now
        message.deadline = None  # a new delivery starts with the configured timeout (KS-RTY-2)
        message.awaiting_redelivery = False
        message.held = None
        member.outstanding.add(message.offset)
        limit = self.config.max_unacked
        if limit and len(member.outstanding) >= limit:
            member.unacked_blocked = True  # req: KS-FLW-1 (Pulsar blocks a consumer that reached its unacked limit)
        self.delivery_holders.setdefault(message.offset, []).append(member.name)  # a zombie op names one (KS-ACK-3)
        member.permits -= 1  # req: KS-FLW-4 (every delivery uses a permit; counted under either form)
        self.key_holders.setdefault(message.key, Counter())[member] += 1
        if self.layout is not None and message.placement is not None:
            self.layout.on_deliver(message.placement, member.name)
        self.delivered_total += 1
        if message.attempts > 1:
            self.redelivered_total += 1
        self.emit("deliver", offset=message.offset, key=message.key, consumer=member.name, attempt=message.attempts)

    def end_delivery(self, message: Message) -> Member:
        """End a message's outstanding delivery (ack, nack, timeout or its holder leaving); return the holder."""
        holder = message.holder
        if holder is None:
            raise AssertionError(f"offset {message.offset} has no outstanding delivery to end")
        message.holder = None
        holder.outstanding.discard(message.offset)
        if holder.unacked_blocked and len(holder.outstanding) <= self.config.max_unacked // 2:
            holder.unacked_blocked = False  # req: KS-FLW-1 (resumed once half of the limit is acked)
        holders = self.key_holders[message.key]
        holders[holder] -= 1
        if holders[holder] == 0:
            del holders[holder]
            if not holders:
                del self.key_holders[message.key]
            if self.config.selector != "any" and self.target_name(message.key, message.placement) not in (
                None,
                holder.name,
            ):
                self.draining_cleared_total += 1  # the old owner of a draining key holds nothing more of it
        if self.layout is not None and message.placement is not None:
            self.layout.on_end_delivery(message.placement, holder.name)
        return holder

    def resolve(self, message: Message, kind: str, event: str, **columns: Any) -> None:
        """Resolve a message: it leaves the subscription, counts for the cursor, and its event is recorded."""
        if message.state is MessageState.OUTSTANDING:
            self.end_delivery(message)
        self._unindex(message)
        del self.messages[message.offset]
        queue = self.queues[message.key]
        if queue[0] == message.offset:
            queue.pop(0)
        else:
            queue.remove(message.offset)
        if not queue:
            del self.queues[message.key]
        blocked = self.blocked.get(message.key)
        if blocked is not None and message.offset in blocked:
            blocked.remove(message.offset)
            if not blocked:
                del self.blocked[message.key]
        if self.holds.get(message.key) == message.offset:
            del self.holds[message.key]
        # req: KS-RES-1, KS-RES-3
        self.cursor.resolve(message.offset)
        if self.layout is not None and message.placement is not None:
            self.layout.on_resolve(message.placement)
        self.resolved_total[kind] += 1
        if kind == "dropped":
            self.dropped_total[str(columns.get("reason"))] += 1
        self.emit(event, offset=message.offset, key=message.key, **columns)

    def return_to_pending(self, message: Message) -> None:
        """A message whose holder left is pending at once, with no back-off and no failure counted (KS-RTY-7).

        With `returns_as_failures` the return uses up a retry: over the budget, the message waits for phase 2's
        poison policy like any failed message (KS-RTY-6), otherwise it is still pending at once.
        """
        self.end_delivery(message)
        if self.config.returns_as_failures:
            # req: KS-RTY-6 (returns counted, a declared departure from KS-RTY-7)
            message.failures += 1
            message.last_failure = "left"
            if message.failures > self.config.max_redeliveries:
                message.retry_at = self.now
                self.set_state(message, MessageState.RETRYING)
                return
        # req: KS-RTY-7, KS-MEM-1
        self.set_state(message, MessageState.PENDING)
        message.awaiting_redelivery = True

    # --- operation helpers ---

    def member(self, name: object) -> Member:
        """The member of that name, or a refusal with `unknown_consumer` (KS-GEN-4)."""
        if not isinstance(name, str) or name not in self.members:
            # req: KS-GEN-4
            raise Refusal("unknown_consumer", f"no member named {name!r}")
        return self.members[name]


def placement_of(entry: LogEntry) -> Placement:
    """A log entry's placement (selector `buckets` only)."""
    if entry.hash is None or entry.segment is None or entry.bucket is None:
        raise AssertionError("a log entry of a buckets subscription lacks its placement")
    return Placement(entry.hash, entry.segment, entry.bucket)
