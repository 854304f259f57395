"""The records of the reconstructed state (spec/checking.md section 1): what the checker knows about each
message, key, consumer incarnation, delivery, segment and op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyroaring import BitMap


class OrderedOffsets(BitMap):
    """A set of offsets with its smallest first: a roaring bitmap, so that adding, discarding, counting, testing and
    iterating (in increasing order) run in C; `first` is the only method of its own.

    The checker keeps one per key (unresolved, undelivered), segment and bucket, and updates them several times per
    event: a deque with a set beside it cost twice as much."""

    __slots__ = ()

    def first(self) -> int | None:
        """The smallest offset, or None."""
        return self.min() if self else None


@dataclass(eq=False, slots=True)
class Incarnation:
    """One consumer incarnation: a name between its join and its leave, eviction or a restart."""

    number: int
    name: str
    capacity: int
    filters: tuple[str, ...]
    ranges: tuple[tuple[int, int], ...]
    added_seq: int
    member: bool = True
    hash_name: str | None = None
    """The name its selector hashes when it is not `name` (pulsar-consistent; other members may share it)."""
    connected: bool = True
    disconnected_at: int = 0
    disconnected_seq: int | None = None
    reconnected_seq: int | None = None
    """The reconnect since its last disconnection, if any (KS-MEM-4)."""
    ended_seq: int | None = None
    outstanding: dict[int, Delivery] = field(default_factory=dict)
    permits: int | None = None
    """With `flow_control = "permits"`: its grants minus its deliveries since it joined (KS-FLW-4); else None."""
    grants: list[int] = field(default_factory=list)
    """The seqs of its `permits_granted` events (the witness of a permit-overrun)."""
    unacked_blocked_seq: int | None = None
    """With `max_unacked`: the delivery that took it to the limit, while it has not come down to half (KS-FLW-1)."""


@dataclass(eq=False, slots=True)
class Delivery:
    """One delivery of a message to an incarnation."""

    serial: int
    offset: int
    holder: Incarnation
    attempt: int
    tick: int
    seq: int
    epoch: int
    deadline: int | None = None
    """The tick an `extended` event moved its timeout to (KS-RTY-8); None while it keeps `tick + ack_timeout`."""
    extended_seq: int | None = None
    """The seq of the last `extended` event that moved its deadline."""


@dataclass(eq=False, slots=True)
class Message:
    """What the checker knows about one published message (checking.md section 1)."""

    offset: int
    key: str
    publish_seq: int
    publish_op: int
    hash: int | None = None
    segment: int | None = None
    bucket: int | None = None
    entry: int | None = None
    """The first offset of the batch it was published in (`publish_entry`), else None."""
    deliver_at: int | None = None
    """A delayed message's due tick (`publish_delayed`, KS-ORD-5), else None."""
    resolved: bool = False
    resolution_seq: int | None = None
    resolution: str | None = None
    deliveries: int = 0
    delivered_ever: bool = False
    delivered_since_restart: bool = False
    """Delivered since the last restart, whatever `durable_attempts` keeps of `deliveries` (KS-BKT-10)."""
    last_delivery_seq: int | None = None
    failures: int = 0
    failure_seqs: list[int] = field(default_factory=list)
    last_failure: str | None = None
    failure_tick: int = 0
    failure_serial: int = 0
    outstanding: Delivery | None = None
    retrying: bool = False
    ready: bool = False
    ready_tick: int = 0
    """The tick whose phase 3 made it ready: with `timer_slack = s` it must be pending by tick ready_tick + s."""
    returned: bool = False
    awaiting_seq: int | None = None
    returned_delivery_seq: int | None = None
    blocked: bool = False
    blocked_seq: int | None = None
    held: bool = False
    held_seq: int | None = None
    last_hold_reason: str | None = None
    last_hold_seq: int | None = None
    last_event_seq: int = 0
    ended: dict[int, str] | None = None
    """The holder's name of each ended delivery, by attempt, recorded after restart number `ended_in` (KS-ACK-3)."""
    ended_in: int = 0
    restored_seq: int | None = None
    """The restart that made this resolved message unresolved again (KS-CUR-3), until it is delivered again."""
    returns: int = 0
    """Deliveries that ended because the holder left or was evicted, since the last restart (KS-RTY-7)."""
    return_seq: int | None = None
    """The leave or eviction that ended the last of those deliveries."""
    released_seq: int | None = None
    """The operator release that last unblocked this message (its failure budget starts again there)."""
    outcome_seq: int | None = None

    @property
    def facts(self) -> tuple[str, int, int]:
        """(key, offset, publish seq): how every explanation of `ks_conformance.explain` names a message."""
        return self.key, self.offset, self.publish_seq


@dataclass(slots=True)
class KeyState:
    """Per routing key: its unresolved and never-delivered messages in offset order, holders, blocks."""

    unresolved: OrderedOffsets = field(default_factory=OrderedOffsets)
    undelivered: OrderedOffsets = field(default_factory=OrderedOffsets)
    outstanding: dict[int, Delivery] = field(default_factory=dict)
    awaiting: set[int] = field(default_factory=set)
    blocked: set[int] = field(default_factory=set)
    """Its blocked messages (more than one when several prefetched messages are poisoned together)."""
    last_delivery: tuple[int, Incarnation, int, int | None] | None = None
    """(epoch, incarnation, seq) of the key's last delivery."""


@dataclass(slots=True)
class Segment:
    """A bucket layout segment (spec section 17)."""

    number: int
    buckets: int
    lo: int
    hi: int
    predecessors: tuple[int, ...]
    """None for segment 0, one after a rollover or split, two after a merge."""
    created_seq: int
    sealed: bool = False
    unresolved: OrderedOffsets = field(default_factory=OrderedOffsets)


@dataclass(slots=True)
class BatchRun:
    """A batch being delivered (KS-BKT-10): its first offset, who takes it, what must follow, and where it began."""

    entry: int
    consumer: str
    first_offset: int
    first_seq: int
    expected: list[int]


@dataclass(slots=True)
class OpState:
    """The op whose effects are being fed: its kind, where it began, and (for ticks) the phase reached."""

    kind: str
    seq: int
    index: int
    cursor_at_start: int
    phase: int = 0
    phase_event_seq: int | None = None
    phases_counted: bool = False
    resolved: bool = False
    key: str | None = None
    skip_targets: list[int] = field(default_factory=list)
    published: int | None = None
    due_timeouts: list[Delivery] = field(default_factory=list)
    due_evictions: list[Incarnation] = field(default_factory=list)
    zombie: tuple[str, int] | None = None
    """For `zombie_ack` and `zombie_nack`: the consumer name and attempt of the ended delivery it answers."""
    extension: tuple[str, int, Delivery | None] | None = None
    """For `extend`: the consumer, the ticks asked for, and the delivery it holds of the offset (None if none)."""
    extension_answered: bool = False
    extension_ignored_seq: int | None = None
    """The `extend_ignored` that answered the holder's `extend` (KS-RTY-8), if one did."""


@dataclass(frozen=True)
class Problem:
    """A place where the trace contradicts itself, so that it cannot be judged there (verdict unknown)."""

    seq: int
    message: str
