"""The trace checker: events in, anomalies out (spec/checking.md).

`Checker` reconstructs the abstract state of checking.md section 1 from the events alone and reports
an `Anomaly` whenever an event, or the state at the end of an op, a phase of a tick or a quiescent
point, contradicts a requirement. It is incremental: feed it one event at a time (the conformance
harness does, after every operation) or a whole trace file (`check_trace`). It never consults a
reference implementation: where the spec leaves a choice (which consumer gets a key), any allowed
outcome passes.

Op boundaries. A trace records the ops `ack` and `nack` only through their effects; the checker
treats an `ack`, `ack_ignored`, `nack` or `nack_ignored` event as the start of an implicit op (an
ack op's first effect is always one of these), so that a tick's phases and the end-of-op checks are
not smeared over the acks that follow it. A harness that knows the boundaries calls `begin_op` and
`end_op` itself.

Exercised counts. A check counts as exercised when the situation of checking.md's last column occurs.
Some of those situations cannot occur with a correct implementation (they are the violation itself, as
for retry-overtaken, or key-reorder in the strict profile) or hardly ever do. For the ordering and
exclusivity checks an op that ends where the dispatcher could have broken the rule counts as well: a
later message of a key waiting behind an earlier undelivered, held, awaiting or blocked one, or a key
(or bucket) with deliveries outstanding from an earlier epoch and messages still to deliver.

Blocked keys. In the owner profile several prefetched messages of one key can be poisoned in the same
phase 2, so a key may have more than one blocked message; a `release` makes all of them pending again
with a fresh budget and a `skip` must resolve all of them (the spec speaks of "its blocked message").

Layout changes. With selector `buckets`, a rollover or split changes which bucket, and so which
member, a key maps to while the membership stays the same; the checker counts a `segment_created`
with a predecessor as the start of a new epoch, or KS-ASN-1 would contradict KS-BKT-3.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.slots import SLOT_SELECTORS, slot_of
from ks_spec.trace import OP_EVENTS
from pyroaring import BitMap

from ks_conformance.anomalies import Anomaly, Explanation, Verdict, requirement_profiles, verdict_of
from ks_conformance.catalogue import CATALOGUE
from ks_conformance.glob import accepts

Event = dict[str, Any]

ACK_CLASS = frozenset({"ack", "ack_ignored", "nack", "nack_ignored"})
"""Effects that only an ack or nack op causes, and always first: they mark an op boundary."""

RING_SELECTORS = frozenset({"ring", "pulsar-consistent", "pulsar-auto-split", "pulsar-sticky", "danube"})
CURSOR_KINDS = frozenset({"cursor-skip", "cursor-regress", "persist-early", "persist-late", "cursor-stall"})
"""Anomalies about the persisted cursor: they do not apply to a system declared without one (`cursor: false`)."""
AFFINITY_KINDS = frozenset({"key-moved", "unstable-assignment"})
"""Anomalies about where a selector sends a key: they do not apply to selector `any` (no key affinity)."""
OUTCOME_EVENTS = {"acked": "ack", "dropped": "drop", "dead_lettered": "dead_letter", "filtered": "filter"}
"""The event a declared terminal outcome is judged as (`terminal_outcomes` of adapter protocol v2)."""
DANUBE_PHASE_3 = frozenset({"deliver", "held", "filter"})
"""The effects of the deliver step that ends phase 3 under `tick_order = "danube"` (KS-GEN-7)."""
BEST_EFFORT_DROPS = frozenset({"saturated", "inactive", "no-consumer"})
SLOTS = 65536


def phase_of(event: Mapping[str, Any]) -> int | None:
    """The phase of a tick (KS-GEN-7) an effect event belongs to, or None for events outside the phases."""
    kind = event["event"]
    if kind == "timeout":
        return 1
    if kind in ("dead_letter", "key_blocked") or (kind == "drop" and event.get("reason") == "poison"):
        return 2
    if kind == "consumer_evicted":
        return 4
    if kind in ("deliver", "held", "filter", "drop", "bucket_withheld", "bucket_assigned"):
        return 5
    if kind in ("cursor_persisted", "checkpoint"):
        return 6
    return None


class OrderedOffsets:
    """A set of offsets appended in increasing order, with O(1) smallest element and lazy removal."""

    __slots__ = ("_live", "_queue")

    def __init__(self, offsets: Iterable[int] = ()) -> None:
        self._queue: deque[int] = deque(sorted(offsets))
        self._live: set[int] = set(self._queue)

    def add(self, offset: int) -> None:
        """Add an offset larger than every offset ever added."""
        if self._queue and offset <= self._queue[-1]:
            raise ValueError(f"offset {offset} added out of order")
        self._queue.append(offset)
        self._live.add(offset)

    def discard(self, offset: int) -> None:
        """Remove an offset if present."""
        self._live.discard(offset)
        while self._queue and self._queue[0] not in self._live:
            self._queue.popleft()

    def first(self) -> int | None:
        """The smallest offset, or None."""
        return self._queue[0] if self._queue else None

    def __contains__(self, offset: object) -> bool:
        return offset in self._live

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[int]:
        return (offset for offset in self._queue if offset in self._live)


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
    connected: bool = True
    disconnected_at: int = 0
    disconnected_seq: int | None = None
    reconnected_seq: int | None = None
    """The reconnect since its last disconnection, if any (KS-MEM-4)."""
    ended_seq: int | None = None
    outstanding: dict[int, Delivery] = field(default_factory=dict)


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
    resolved: bool = False
    resolution_seq: int | None = None
    resolution: str | None = None
    deliveries: int = 0
    delivered_ever: bool = False
    last_delivery_seq: int | None = None
    failures: int = 0
    failure_seqs: list[int] = field(default_factory=list)
    last_failure: str | None = None
    failure_tick: int = 0
    failure_serial: int = 0
    outstanding: Delivery | None = None
    retrying: bool = False
    ready: bool = False
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
    restored_seq: int | None = None
    """The restart that made this resolved message unresolved again (KS-CUR-3), until it is delivered again."""
    returns: int = 0
    """Deliveries that ended because the holder left or was evicted, since the last restart (KS-RTY-7)."""
    return_seq: int | None = None
    """The leave or eviction that ended the last of those deliveries."""
    released_seq: int | None = None
    """The operator release that last unblocked this message (its failure budget starts again there)."""
    outcome_seq: int | None = None


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
    predecessor: int | None
    created_seq: int
    sealed: bool = False
    unresolved: OrderedOffsets = field(default_factory=OrderedOffsets)


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


@dataclass(frozen=True)
class Problem:
    """A place where the trace contradicts itself, so that it cannot be judged there (verdict unknown)."""

    seq: int
    message: str


class Checker:
    """The incremental trace checker of spec/checking.md: `feed` events, read `anomalies` and `exercised`."""

    def __init__(self) -> None:
        self.anomalies: list[Anomaly] = []
        self.problems: list[Problem] = []
        self.exercised: Counter[str] = Counter({kind.name: 0 for kind in CATALOGUE})
        self.config: dict[str, Any] = dict(CONFIG_DEFAULTS)
        self.events_seen = 0
        self.now = 0
        self.last_seq = -1
        self.messages: list[Message] = []
        self.keys: dict[str, KeyState] = {}
        self._keys_of_slot: dict[int, list[str]] = {}
        """Per slot, its keys (only with hash-granularity draining, KS-DRN-3)."""
        self.unresolved = BitMap()
        self.members: dict[str, Incarnation] = {}
        self.left: dict[str, int] = {}
        """Name -> seq of the event that ended its last incarnation (for witnesses)."""
        self.epoch = 0
        self.epoch_change: dict[int, tuple[str, Incarnation | None, int]] = {}
        self.persisted_cursor = 0
        self.persisted_holes = BitMap()
        self.persist_seq: int | None = None
        self.persist_tick: int | None = None
        self.loaded: tuple[int, BitMap, int | None, int] | None = None
        """After a restart: (persisted cursor, persisted holes, their seq, the restart's seq)."""
        self.state_version = 0
        self.synced_version = 0
        self.late_version = -1
        self.last_resolution_seq: int | None = None
        self.segments: dict[int, Segment] = {}
        self.bucket_outstanding: dict[tuple[int, int], dict[int, Delivery]] = {}
        self.bucket_unresolved: dict[tuple[int, int], OrderedOffsets] = {}
        self.checkpoints: dict[tuple[int, int], tuple[int, int]] = {}
        self.bucket_last: dict[tuple[int, int], tuple[int, Incarnation, int]] = {}
        """Per bucket, (epoch, incarnation, seq) of its last delivery (policies other than `sorted`)."""
        self._buckets_moved: dict[tuple[int, int], set[int]] = {}
        """Per (epoch, segment) begun by a join, the buckets seen moving to the joiner (KS-BKT-8)."""
        self.op: OpState | None = None
        self.op_count = 0
        self._expect_ack_class = False
        self._serial = 0
        self._incarnations = 0
        self._timeouts: list[tuple[int, int, Delivery]] = []
        self._readiness: list[tuple[int, int, int]] = []
        self._disconnected: dict[int, Incarnation] = {}
        self._over_budget: set[int] = set()
        self._poison_reported: set[tuple[int, int]] = set()
        self._idle_heads: set[str] = set()
        self._awaiting_keys: set[str] = set()
        self._blocked_keys: set[str] = set()
        self._holding_keys: set[str] = set()
        """Keys that had outstanding deliveries when last looked at (pruned lazily), so no op scans every key."""
        self._idle_reported: set[tuple[int, int]] = set()
        self._phantoms: dict[str, Incarnation] = {}
        """Non-members that received deliveries, one per name until a member of that name joins."""
        self.declared: dict[str, Any] = {}
        """What the implementation declared beyond the config (the config event's `declared`: cursor, outcomes)."""
        self.explicit_ops = False
        """True when the driver marks every op (the harness): an ack-class effect then never opens an op."""
        self._applies: dict[str, bool] = {}
        self._configure()

    # --- configuration -------------------------------------------------------------------------

    def _configure(self) -> None:
        profiles = requirement_profiles()
        profile = self.config["profile"]
        self.profile = profile
        self.best_effort = profile == "best-effort"
        self.buckets = self.config["selector"] == "buckets"
        self._applies = {kind.name: profile in profiles.get(kind.requirement, ()) for kind in CATALOGUE}
        self.has_cursor = self.declared.get("cursor", True) is not False
        self.durable_attempts = self.declared.get("durable_attempts") is True
        self.any_selector = self.config["selector"] == "any"
        self.danube_ticks = self.config["tick_order"] == "danube"
        excluded = (CURSOR_KINDS if not self.has_cursor else frozenset()) | (
            AFFINITY_KINDS if self.any_selector else frozenset()
        )
        for name in excluded:
            self._applies[name] = False

    def applies(self, name: str) -> bool:
        """True if the anomaly's requirement applies to the trace's profile."""
        return self._applies.get(name, False)

    @property
    def verdict(self) -> Verdict:
        """invalid if any MUST anomaly was found, unknown if the trace contradicts itself, else valid."""
        return verdict_of(self.anomalies, undecidable=bool(self.problems))

    # --- reporting helpers ---------------------------------------------------------------------

    def _exercise(self, name: str, count: int = 1) -> None:
        if self._applies.get(name, False):
            self.exercised[name] += count

    def _report(
        self, name: str, seq: int, witness: Iterable[int | None], let: list[str], then: str, **details: Any
    ) -> None:
        if not self._applies.get(name, False) or self.problems:
            # After a contradiction the reconstructed state is not trustworthy: judge nothing more.
            return
        seqs = tuple(sorted({s for s in witness if s is not None}))
        self.anomalies.append(Anomaly(name, seq, seqs, Explanation(tuple(let), then), details))

    def _problem(self, seq: int, message: str) -> None:
        self.problems.append(Problem(seq, message))

    def _m(self, message: Message) -> str:
        return f"m{message.offset} = publish(offset={message.offset}, key={message.key!r}) [seq {message.publish_seq}]"

    # --- the cursor ----------------------------------------------------------------------------

    def cursor(self) -> int:
        """The smallest unresolved published offset, or the number of published messages."""
        return self.unresolved.min() if self.unresolved else len(self.messages)

    def resolved_above_cursor(self) -> BitMap:
        """The ack holes: resolved offsets above the cursor."""
        cursor = self.cursor()
        holes = BitMap()
        if cursor < len(self.messages):
            holes.add_range(cursor + 1, len(self.messages))
            holes -= self.unresolved
        return holes

    # --- the public interface ------------------------------------------------------------------

    def begin_op(self, kind: str) -> None:
        """Open an op that has no op event (`ack`, `nack`): its ack-class effect will not open another."""
        self._close_op()
        self._open_op(kind, self.last_seq + 1)
        self._expect_ack_class = kind in ("ack", "nack")

    def end_op(self) -> None:
        """Close the open op and run the end-of-op checks (the harness calls this after every op)."""
        self._close_op()

    def finish(self) -> None:
        """Close the last op (call once, after the last event)."""
        self._close_op()

    def abandon(self) -> None:
        """Drop the open op without its end-of-op checks: the history was cut off in the middle of it."""
        self.op = None
        self._expect_ack_class = False

    def feed(self, event: Event) -> None:
        """Judge one well-formed event (trace format v1) and update the state."""
        self.events_seen += 1
        kind = event["event"]
        seq = int(event["seq"])
        handler = getattr(self, f"_on_{kind}", None)
        if kind in OP_EVENTS:
            self._close_op()
            self.now = int(event["tick"])
            self._open_op(kind, seq)
        elif kind in ACK_CLASS:
            if (self._expect_ack_class or self.explicit_ops) and self.op is not None:
                self._expect_ack_class = False
                self.now = int(event["tick"])
            else:
                self._close_op()
                self.now = int(event["tick"])
                self._open_op(kind, seq)
        else:
            self.now = int(event["tick"])
            phase = phase_of(event)
            if self.op is not None and self.op.kind == "tick" and phase is not None:
                if phase == 5 and self.op.phase <= 3 and kind in DANUBE_PHASE_3 and self.danube_ticks:
                    phase = 3  # req: KS-GEN-7 (tick_order danube: phase 3 ends with a deliver step)
                self._tick_phase(event, phase)
        self.last_seq = seq
        if handler is None:
            self._problem(seq, f"event kind {kind!r} is unknown to the checker")
            return
        handler(event)

    # --- ops -----------------------------------------------------------------------------------

    def _open_op(self, kind: str, seq: int) -> None:
        self.op_count += 1
        self.op = OpState(kind=kind, seq=seq, index=self.op_count, cursor_at_start=self.cursor())

    def _close_op(self) -> None:
        op = self.op
        if op is None:
            return
        self._expect_ack_class = False
        if op.kind == "tick":
            self._advance_phase(7)
        if op.kind == "key_skipped":
            self._check_skip(op)
        if op.published is not None and self.best_effort:
            self._check_outcome(op)
        if op.kind not in ("config", "quiescent"):
            self._check_persistence(op)
            self._check_idle(op)
            self._count_temptations()
        self.op = None

    def _count_temptations(self) -> None:
        """Count the ordering checks as exercised when an op ends where a dispatcher could have broken them.

        For a correct implementation the situations in checking.md's "exercised when" column of
        key-reorder (strict profile) and retry-overtaken never occur: they are the violation itself. An op
        that ends with a later message of a key undelivered behind an undelivered, held or awaiting
        earlier one is where these checks could fail, so it counts too (see the module doc).
        """
        reorder = held = False
        for key in self._idle_heads:
            state = self.keys[key]
            if len(state.undelivered) >= 2 and not state.blocked:
                reorder = True
                head = state.undelivered.first()
                held = held or (head is not None and self.messages[head].held)
            if reorder and held:
                break
        if reorder:
            self._exercise("key-reorder")
        if held:
            self._exercise("overtaken-hold")
        for key in list(self._awaiting_keys):
            state = self.keys[key]
            if not state.awaiting:
                self._awaiting_keys.discard(key)
                continue
            earliest = min(state.awaiting)
            if any(o > earliest and self.messages[o].outstanding is None for o in state.unresolved):
                self._exercise("retry-overtaken")
                break
        if self.best_effort:
            return
        for key in list(self._blocked_keys):
            state = self.keys[key]
            if not state.blocked:
                self._blocked_keys.discard(key)
            elif any(self.messages[o].outstanding is None and o not in state.blocked for o in state.unresolved):
                self._exercise("blocked-key-leak")
                break
        moved = False
        for key in list(self._holding_keys):
            state = self.keys[key]
            if not state.outstanding:
                self._holding_keys.discard(key)
            elif len(state.unresolved) > len(state.outstanding):
                if any(d.epoch < self.epoch for d in state.outstanding.values()):
                    moved = True
                    break
        if moved:
            self._exercise("split-owner")
            if self.buckets:
                self._exercise("bucket-split-owner")

    def _tick_phase(self, event: Event, phase: int) -> None:
        op = self.op
        assert op is not None
        if op.phase_event_seq is not None and phase != op.phase and not op.phases_counted:
            self._exercise("phase-order")
            op.phases_counted = True
        if phase < op.phase:
            self._report(
                "phase-order",
                int(event["seq"]),
                [op.phase_event_seq, event["seq"]],
                [f"t = the tick at seq {op.seq}"],
                f"an effect of phase {phase} ({event['event']}, seq {event['seq']}) came after an effect of phase "
                f"{op.phase} (seq {op.phase_event_seq}) within t, but the phases of a tick run in order (KS-GEN-7)",
                phase=phase,
                after_phase=op.phase,
            )
            return
        self._advance_phase(phase)
        op.phase = phase
        op.phase_event_seq = int(event["seq"])

    def _advance_phase(self, phase: int) -> None:
        """Run the checks due at the phase boundaries crossed on the way to `phase` within a tick."""
        op = self.op
        assert op is not None
        current = op.phase
        if current < 2 <= phase:
            self._after_phase_1(op)
        if current < 3 <= phase:
            self._after_phase_2(op)
            self._phase_3_point()
        if current < 5 <= phase:
            self._after_phase_4(op)
        op.phase = max(op.phase, min(phase, 6))

    # --- op events -----------------------------------------------------------------------------

    def _on_config(self, event: Event) -> None:
        try:
            detail = json.loads(event["detail"])
            config = detail["config"]
        except (ValueError, KeyError, TypeError):
            self._problem(int(event["seq"]), "the config event's detail is not {'config': {...}}")
            return
        if not isinstance(config, dict):
            self._problem(int(event["seq"]), "the config event's 'config' is not an object")
            return
        self.config = {**CONFIG_DEFAULTS, **config}
        declared = detail.get("declared", {})
        if not isinstance(declared, dict) or not isinstance(declared.get("terminal_outcomes", {}), dict):
            self._problem(
                int(event["seq"]), "the config event's 'declared' is not {'cursor': ..., 'terminal_outcomes': {...}}"
            )
            declared = {}
        self.declared = declared
        if self.config["profile"] not in ("strict", "owner", "best-effort"):
            self._problem(int(event["seq"]), f"unknown profile {self.config['profile']!r}")
        self._configure()

    def _on_publish(self, event: Event) -> None:
        seq = int(event["seq"])
        offset = int(event["offset"])
        if offset != len(self.messages):
            self._problem(seq, f"publish of offset {offset}, expected {len(self.messages)}")
            return
        assert self.op is not None
        message = Message(offset, str(event["key"]), seq, self.op.index, last_event_seq=seq)
        self.messages.append(message)
        self.unresolved.add(offset)
        self.state_version += 1
        state = self.keys.get(message.key)
        if state is None:
            state = self.keys[message.key] = KeyState()
            if self.config["drain_granularity"] == "hash" and self.config["selector"] in SLOT_SELECTORS:
                slot = slot_of(str(self.config["selector"]), message.key)
                self._keys_of_slot.setdefault(slot, []).append(message.key)
        state.unresolved.add(offset)
        state.undelivered.add(offset)
        self._refresh_head(message.key)
        self.op.published = offset
        if self.best_effort:
            self._exercise("best-effort-redelivery")
            self._exercise("missing-outcome")
        if state.blocked:
            self._exercise("blocked-key-leak")
        if self.buckets:
            self._publish_placement(message, event)

    def _publish_placement(self, message: Message, event: Event) -> None:
        seq = message.publish_seq
        if event.get("hash") is None or event.get("segment") is None or event.get("bucket") is None:
            self._problem(seq, "a publish with selector 'buckets' must carry hash, segment and bucket")
            return
        message.hash, message.segment, message.bucket = int(event["hash"]), int(event["segment"]), int(event["bucket"])
        high, low = message.hash >> 16, message.hash & 0xFFFF
        self._exercise("misrouted-bucket")
        right = next((s for s in self.segments.values() if not s.sealed and s.lo <= high <= s.hi), None)
        segment = self.segments.get(message.segment)
        if right is None:
            self._problem(seq, f"no active segment contains hash >> 16 = {high}")
        elif segment is not right:
            self._report(
                "misrouted-bucket",
                seq,
                [right.created_seq, seq],
                [self._m(message) + f" with hash {message.hash} (hash >> 16 = {high})"],
                f"the active segment containing {high} is {right.number} [seq {right.created_seq}], yet "
                f"m{message.offset} was placed in segment {message.segment} (KS-BKT-1)",
                offset=message.offset,
            )
        elif message.bucket != low * segment.buckets // SLOTS:
            self._report(
                "misrouted-bucket",
                seq,
                [segment.created_seq, seq],
                [
                    self._m(message) + f" with hashB = hash & 0xFFFF = {low}",
                    f"N = {segment.buckets} [seq {segment.created_seq}]",
                ],
                f"its bucket must be floor({low} * {segment.buckets} / 65536) = {low * segment.buckets // SLOTS}, yet "
                f"it was placed in bucket {message.bucket} (KS-BKT-1)",
                offset=message.offset,
            )
        if segment is not None:
            segment.unresolved.add(message.offset)
            self.bucket_unresolved.setdefault((message.segment, message.bucket), OrderedOffsets()).add(message.offset)

    def _on_consumer_added(self, event: Event) -> None:
        seq = int(event["seq"])
        name = str(event["consumer"])
        if name in self.members:
            self._problem(seq, f"consumer {name!r} joined while already a member")
            return
        self._incarnations += 1
        ranges = tuple((int(r[0]), int(r[1])) for r in event.get("ranges") or ())
        incarnation = Incarnation(
            self._incarnations, name, int(event["capacity"]), tuple(event.get("filters") or ()), ranges, seq
        )
        self.members[name] = incarnation
        self._phantoms.pop(name, None)
        self._new_epoch("join", incarnation, seq)

    def _on_consumer_removed(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} left but is not a member")
            return
        self._end_incarnation(incarnation, seq, returned=True)
        self._new_epoch("leave", incarnation, seq)

    def _on_consumer_disconnected(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} disconnected but is not a member")
            return
        if not incarnation.connected:
            return
        incarnation.connected = False
        incarnation.disconnected_at = self.now
        incarnation.disconnected_seq = seq
        incarnation.reconnected_seq = None
        if int(self.config["evict_after"]) > 0:
            self._disconnected[incarnation.number] = incarnation

    def _on_consumer_reconnected(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} reconnected but is not a member")
            return
        if incarnation.connected:
            return
        # req: KS-MEM-4 (connected again with all it holds; its eviction clock is off)
        self._exercise("reconnect-ignored")
        incarnation.connected = True
        incarnation.reconnected_seq = seq
        self._disconnected.pop(incarnation.number, None)
        self.state_version += 1

    def _on_tick(self, event: Event) -> None:
        op = self.op
        assert op is not None
        timeout = int(self.config["ack_timeout"])
        while self._timeouts and self._timeouts[0][0] <= self.now:
            _, _, delivery = heapq.heappop(self._timeouts)
            message = self.messages[delivery.offset]
            if message.outstanding is delivery:
                op.due_timeouts.append(delivery)
        if timeout > 0:
            self._exercise("missed-timeout", len(op.due_timeouts))
        evict_after = int(self.config["evict_after"])
        for incarnation in list(self._disconnected.values()):
            if incarnation.disconnected_at + evict_after <= self.now:
                op.due_evictions.append(incarnation)
                del self._disconnected[incarnation.number]
        self._exercise("missed-eviction", len(op.due_evictions))

    def _on_restart(self, event: Event) -> None:
        seq = int(event["seq"])
        for incarnation in list(self.members.values()):
            self._end_incarnation(incarnation, seq, returned=False)
        if not self.has_cursor:
            # Without a cursor the implementation keeps each message's resolution (KS-CUR-4 judged against them).
            self.persisted_cursor = self.cursor()
            self.persisted_holes = self.resolved_above_cursor()
            self.persist_seq = self.last_resolution_seq
        self.loaded = (self.persisted_cursor, BitMap(self.persisted_holes), self.persist_seq, seq)
        holes = self.persisted_holes
        for message in self.messages:
            self._reset_volatile(message)
            if self.best_effort:
                continue  # best-effort outcomes are final (KS-BEF-1): there is no cursor to resume from
            if message.resolved and message.offset >= self.persisted_cursor and message.offset not in holes:
                # req: KS-CUR-3 (resolved after the last persistence: volatile, so it must be dispatched again)
                self._exercise("restart-skip")
                message.resolved = False
                message.resolution = None
                message.resolution_seq = None
                message.restored_seq = seq
                self.unresolved.add(message.offset)
        self.state_version += 1
        self._rebuild_indexes()
        self._new_epoch("restart", None, seq)

    def _on_quiescent(self, event: Event) -> None:
        seq = int(event["seq"])
        self._exercise("cursor-stall")
        if self.messages:
            self._exercise("stuck-key")
        if self.best_effort:
            return
        if self.unresolved and self._someone_accepts_everything():
            for offset in self.unresolved:
                self._judge_unresolved_at_quiescence(self.messages[offset], seq)
        if not self.unresolved and self.persisted_cursor != len(self.messages):
            self._report(
                "cursor-stall",
                seq,
                [self.persist_seq, seq],
                [f"n = {len(self.messages)} messages published, all resolved"],
                f"at the quiescent point [seq {seq}] the persisted cursor is {self.persisted_cursor}"
                f"{f' (persisted at seq {self.persist_seq})' if self.persist_seq is not None else ' (never persisted)'}"
                f", not n (KS-LIV-2)",
                cursor=self.persisted_cursor,
                published=len(self.messages),
            )

    def _judge_unresolved_at_quiescence(self, message: Message, seq: int) -> None:
        if message.restored_seq is not None:
            self._report_restart_skip(message, seq)
        elif message.returned:
            self._report(
                "lost",
                seq,
                [message.returned_delivery_seq, message.awaiting_seq, seq],
                [self._m(message), f"its holder left or was evicted at seq {message.awaiting_seq}"],
                f"m{message.offset} was never delivered again and is unresolved at the quiescent point [seq {seq}], "
                "but a leaving consumer's messages must be delivered again (KS-MEM-1)",
                offset=message.offset,
                key=message.key,
            )
        elif message.last_hold_reason == "draining":
            self._report(
                "drain-stuck",
                seq,
                [message.last_hold_seq, seq],
                [self._m(message), f"m{message.offset} was held for draining at seq {message.last_hold_seq}"],
                f"it is still unresolved at the quiescent point [seq {seq}], but draining always clears (KS-DRN-2)",
                offset=message.offset,
                key=message.key,
            )
        else:
            self._report(
                "stuck-key",
                seq,
                [message.publish_seq, message.last_event_seq, seq],
                [self._m(message), f"its last event is seq {message.last_event_seq}"],
                f"m{message.offset} is unresolved at the quiescent point [seq {seq}], although a member accepts every "
                "key, everyone acks and time has passed (KS-LIV-1)",
                offset=message.offset,
                key=message.key,
            )

    def _someone_accepts_everything(self) -> bool:
        if self.config["selector"] == "pulsar-sticky":
            covered = BitMap()
            for incarnation in self.members.values():
                for lo, hi in incarnation.ranges:
                    covered.add_range(lo, hi + 1)
            return int(covered.range_cardinality(0, SLOTS)) == SLOTS
        return any(not incarnation.filters for incarnation in self.members.values())

    def _on_key_released(self, event: Event) -> None:
        seq = int(event["seq"])
        state = self.keys.get(str(event["key"]))
        if state is None or not state.blocked:
            self._problem(seq, f"key {event['key']!r} was released but is not blocked")
            return
        # req: KS-POI-4 (every blocked message of the key: see the module doc)
        for offset in sorted(state.blocked):
            message = self.messages[offset]
            message.blocked = False
            message.failures = 0
            message.failure_seqs = []
            message.released_seq = seq
            message.awaiting_seq = seq
            message.last_event_seq = seq
            state.awaiting.add(offset)
        state.blocked = set()
        self._awaiting_keys.add(str(event["key"]))
        self._refresh_head(str(event["key"]))

    def _on_key_skipped(self, event: Event) -> None:
        seq = int(event["seq"])
        op = self.op
        assert op is not None
        state = self.keys.get(str(event["key"]))
        op.key = str(event["key"])
        self._exercise("skip-ignored")
        if state is None or not state.blocked:
            self._problem(seq, f"key {event['key']!r} was skipped but is not blocked")
            return
        op.skip_targets = sorted(state.blocked)

    def _on_segment_created(self, event: Event) -> None:
        number = int(event["segment"])
        predecessor = event.get("predecessor")
        if predecessor is not None:
            # A layout change re-routes keys (new N, new buckets) although membership is unchanged: for
            # KS-ASN-1 it starts a new routing epoch, as a membership change does (see the module doc).
            self._new_epoch("layout", None, int(event["seq"]))
        self.segments[number] = Segment(
            number,
            int(event["buckets"]),
            int(event["range_lo"]),
            int(event["range_hi"]),
            None if predecessor is None else int(predecessor),
            int(event["seq"]),
        )

    def _on_segment_sealed(self, event: Event) -> None:
        segment = self.segments.get(int(event["segment"]))
        if segment is None:
            self._problem(int(event["seq"]), f"segment {event['segment']} was sealed but never created")
            return
        segment.sealed = True

    # --- effect events -------------------------------------------------------------------------

    def _message_of(self, event: Event) -> Message | None:
        """The message an effect names, or None (a problem) when the offset or key cannot be placed."""
        offset = int(event["offset"])
        seq = int(event["seq"])
        if not 0 <= offset < len(self.messages):
            self._problem(seq, f"{event['event']} names offset {offset}, which was not published")
            return None
        message = self.messages[offset]
        key = event.get("key")
        if key is not None and key != message.key:
            self._problem(seq, f"{event['event']} of offset {offset} names key {key!r}, but its key is {message.key!r}")
            return None
        message.last_event_seq = seq
        return message

    def _on_deliver(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        attempt = int(event["attempt"])
        incarnation = self.members.get(name)
        state = self.keys[message.key]
        first = message.deliveries == 0
        self._check_order(message, state, seq, first)
        self._check_exclusive(message, state, seq, incarnation or self._phantoms.get(name), name)
        self._check_reason(message, seq)
        self._check_consumer(message, seq, incarnation, name)
        self._check_flow(message, seq, first)
        self._check_attempt(message, seq, attempt)
        self._check_assignment(message, state, seq, incarnation, name)
        self._check_retry(message, seq)
        if self.buckets and message.segment is not None:
            self._check_bucket_delivery(message, seq, incarnation, name)
        if self.best_effort:
            self._check_best_effort_outcome(message, seq)
        if incarnation is None:
            incarnation = self._phantoms.get(name)
        if incarnation is None:
            self._incarnations += 1
            incarnation = Incarnation(self._incarnations, name, 0, (), (), seq, member=False, connected=False)
            self._phantoms[name] = incarnation
        self._record_delivery(message, state, incarnation, attempt, seq)

    def _check_order(self, message: Message, state: KeyState, seq: int, first: bool) -> None:
        offset = message.offset
        earliest_unresolved = state.unresolved.first()
        has_earlier_unresolved = earliest_unresolved is not None and earliest_unresolved < offset
        if first and has_earlier_unresolved:
            # req: KS-ORD-1
            self._exercise("key-reorder")
            held_earlier = next(
                (o for o in takewhile(lambda o: o < offset, state.unresolved) if self.messages[o].held), None
            )
            if held_earlier is not None:
                self._exercise("overtaken-hold")
            earlier = state.undelivered.first()
            if earlier is not None and earlier < offset:
                previous = self.messages[earlier]
                self._report(
                    "key-reorder",
                    seq,
                    [previous.publish_seq, message.publish_seq, seq],
                    [self._m(previous), self._m(message)],
                    f"m{earlier} precedes m{offset} in key {message.key!r} and was never delivered, yet m{offset} was "
                    f"delivered for the first time [seq {seq}] while m{earlier} is unresolved (KS-ORD-1)",
                    offset=offset,
                    key=message.key,
                    earlier=earlier,
                )
                # req: KS-FLW-3
                held = next(
                    (o for o in takewhile(lambda o: o < offset, state.undelivered) if self.messages[o].held), None
                )
                if held is not None:
                    overtaken = self.messages[held]
                    self._report(
                        "overtaken-hold",
                        seq,
                        [overtaken.held_seq, message.publish_seq, seq],
                        [self._m(overtaken) + f", held at seq {overtaken.held_seq}", self._m(message)],
                        f"m{offset} was delivered for the first time [seq {seq}] while the held m{held} of the same "
                        "key is unresolved and undelivered, but a held message keeps its place (KS-FLW-3)",
                        offset=offset,
                        key=message.key,
                        earlier=held,
                    )
        if self.profile == "strict":
            # req: KS-ORD-2
            others = len(state.unresolved) - (1 if offset in state.unresolved else 0)
            if others > 0:
                self._exercise("strict-overlap")
            if has_earlier_unresolved:
                assert earliest_unresolved is not None
                previous = self.messages[earliest_unresolved]
                self._report(
                    "strict-overlap",
                    seq,
                    [previous.publish_seq, seq],
                    [self._m(previous), self._m(message)],
                    f"m{earliest_unresolved} precedes m{offset} in key {message.key!r} and is unresolved, yet "
                    f"m{offset} was delivered [seq {seq}]; the strict profile delivers nothing of a key while an "
                    "earlier message of it is unresolved (KS-ORD-2)",
                    offset=offset,
                    key=message.key,
                    earlier=earliest_unresolved,
                )
        if not self.best_effort:
            # req: KS-ORD-3
            awaiting = [o for o in state.awaiting if o < offset]
            if awaiting:
                self._exercise("retry-overtaken")
                waiting = self.messages[min(awaiting)]
                self._report(
                    "retry-overtaken",
                    seq,
                    [waiting.awaiting_seq, seq],
                    [self._m(waiting) + f", awaiting redelivery since seq {waiting.awaiting_seq}", self._m(message)],
                    f"m{offset} was delivered [seq {seq}] before m{waiting.offset}, an earlier message of its key that "
                    "awaits redelivery (KS-ORD-3)",
                    offset=offset,
                    key=message.key,
                    earlier=waiting.offset,
                )

    def _check_exclusive(
        self, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
    ) -> None:
        if self.best_effort:
            return
        # req: KS-DRN-1
        if any(d.epoch < self.epoch for d in state.outstanding.values()):
            self._exercise("split-owner")
        other = next((d for d in state.outstanding.values() if d.holder is not incarnation), None)
        if other is not None:
            self._report(
                "split-owner",
                seq,
                [other.seq, seq],
                [
                    f"d = deliver(offset={other.offset}, key={message.key!r}) to {other.holder.name} "
                    f"[seq {other.seq}], still outstanding",
                    self._m(message),
                ],
                f"m{message.offset} of the same key was delivered to {name} [seq {seq}] while "
                f"{other.holder.name} holds d, but a key has one holder at a time (KS-DRN-1)",
                offset=message.offset,
                key=message.key,
                consumer=name,
                other=other.holder.name,
            )
        if state.blocked:
            # req: KS-POI-3
            blocked = self.messages[min(state.blocked)]
            self._report(
                "blocked-key-leak",
                seq,
                [blocked.blocked_seq, seq],
                [self._m(blocked) + f", which blocked its key at seq {blocked.blocked_seq}", self._m(message)],
                f"m{message.offset} was delivered [seq {seq}] while its key is blocked, but nothing of a blocked key "
                "may be delivered until an operator releases or skips it (KS-POI-3)",
                offset=message.offset,
                key=message.key,
            )

    def _check_reason(self, message: Message, seq: int) -> None:
        # req: KS-RES-2
        if message.delivered_ever:
            self._exercise("duplicate")
        if message.resolved:
            self._report(
                "duplicate",
                seq,
                [message.resolution_seq, seq],
                [self._m(message) + f", resolved as {message.resolution} at seq {message.resolution_seq}"],
                f"m{message.offset} was delivered again [seq {seq}] after it was resolved, with no restart that "
                "lost the resolution (KS-RES-2)",
                offset=message.offset,
            )
        elif message.outstanding is not None:
            d = message.outstanding
            self._report(
                "duplicate",
                seq,
                [d.seq, seq],
                [self._m(message) + f", delivered to {d.holder.name} at seq {d.seq} and still outstanding"],
                f"m{message.offset} was delivered again [seq {seq}] while that delivery is outstanding (KS-RES-2)",
                offset=message.offset,
            )
        if self.loaded is not None:
            # req: KS-CUR-4
            self._exercise("resurrected")
            cursor, holes, persist_seq, restart_seq = self.loaded
            if message.offset < cursor or message.offset in holes:
                where = f"below the persisted cursor {cursor}" if message.offset < cursor else "a persisted ack hole"
                self._report(
                    "resurrected",
                    seq,
                    [persist_seq, restart_seq, seq],
                    [self._m(message), f"the store recorded cursor {cursor} at seq {persist_seq}"],
                    f"after the restart [seq {restart_seq}] m{message.offset}, {where}, was delivered [seq {seq}], but "
                    "what the store recorded is not delivered again (KS-CUR-4)",
                    offset=message.offset,
                )

    def _check_consumer(self, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
        if incarnation is not None and incarnation.filters:
            # req: KS-FLT-2
            self._exercise("filter-violation")
            if not accepts(incarnation.filters, message.key):
                self._report(
                    "filter-violation",
                    seq,
                    [incarnation.added_seq, seq],
                    [
                        f"{name} joined with filters {list(incarnation.filters)} [seq {incarnation.added_seq}]",
                        self._m(message),
                    ],
                    f"no filter of {name} matches {message.key!r}, yet m{message.offset} was delivered to {name} "
                    f"[seq {seq}] (KS-FLT-2)",
                    offset=message.offset,
                    consumer=name,
                )
        # req: KS-MEM-3
        if incarnation is None or any(not member.connected for member in self.members.values()):
            self._exercise("inactive-delivery")
        if incarnation is None:
            ended = self.left.get(name)
            self._report(
                "inactive-delivery",
                seq,
                [ended, seq],
                [
                    f"{name} is not a member" + (f" (its last incarnation ended at seq {ended})" if ended else ""),
                    self._m(message),
                ],
                f"m{message.offset} was delivered to {name} [seq {seq}], but only connected members receive messages "
                "(KS-MEM-3)",
                offset=message.offset,
                consumer=name,
            )
        elif not incarnation.connected:
            self._report(
                "inactive-delivery",
                seq,
                [incarnation.disconnected_seq, seq],
                [f"{name} disconnected at seq {incarnation.disconnected_seq}", self._m(message)],
                f"m{message.offset} was delivered to {name} [seq {seq}] while it is disconnected, but only connected "
                "members receive messages (KS-MEM-3)",
                offset=message.offset,
                consumer=name,
            )
        if incarnation is not None:
            # req: KS-FLW-1
            held = len(incarnation.outstanding)
            if held >= incarnation.capacity - 1:
                self._exercise("capacity-overrun")
            if held + 1 > incarnation.capacity:
                seqs = sorted(d.seq for d in incarnation.outstanding.values())
                self._report(
                    "capacity-overrun",
                    seq,
                    [incarnation.added_seq, *seqs, seq],
                    [
                        f"{name} joined with capacity {incarnation.capacity} [seq {incarnation.added_seq}]",
                        f"{name} holds {held} outstanding deliveries (seqs {', '.join(map(str, seqs))})",
                    ],
                    f"m{message.offset} was delivered to {name} [seq {seq}], leaving it {held + 1} outstanding "
                    f"deliveries, more than its capacity (KS-FLW-1)",
                    offset=message.offset,
                    consumer=name,
                )

    def _check_flow(self, message: Message, seq: int, first: bool) -> None:
        if self.best_effort or not first:
            return
        # req: KS-FLW-2
        window = int(self.config["window"])
        below = self.unresolved.rank(message.offset - 1) if message.offset > 0 else 0
        if below >= window - 1:
            self._exercise("window-overrun")
        if below >= window:
            self._report(
                "window-overrun",
                seq,
                [seq],
                [self._m(message), f"window = {window}"],
                f"m{message.offset} was delivered for the first time [seq {seq}] while {below} earlier offsets are "
                "unresolved, but a first delivery needs fewer than window of them (KS-FLW-2)",
                offset=message.offset,
                unresolved_below=below,
            )

    def _check_attempt(self, message: Message, seq: int, attempt: int) -> None:
        if self.best_effort:
            return
        # req: KS-RTY-5
        if message.deliveries > 0:
            self._exercise("attempt-miscount")
        if attempt != message.deliveries + 1:
            self._report(
                "attempt-miscount",
                seq,
                [message.last_delivery_seq, seq],
                [self._m(message) + f", delivered {message.deliveries} times since the last restart"],
                f"its delivery at seq {seq} carries attempt {attempt}, but attempts count deliveries: it must be "
                f"{message.deliveries + 1} (KS-RTY-5)",
                offset=message.offset,
                attempt=attempt,
                expected=message.deliveries + 1,
            )

    def _check_assignment(
        self, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
    ) -> None:
        last = state.last_delivery
        if last is None:
            return
        epoch, previous, previous_seq, segment = last
        if segment != message.segment:
            return  # selector `buckets`: each segment has its own N, so its own bucket and target (KS-BKT-3)
        if epoch == self.epoch:
            # req: KS-ASN-1
            self._exercise("key-moved")
            if previous.name != name:
                self._report(
                    "key-moved",
                    seq,
                    [previous_seq, seq],
                    [f"key {message.key!r} was delivered to {previous.name} at seq {previous_seq}", self._m(message)],
                    f"m{message.offset} was delivered to {name} [seq {seq}] with no membership change since, but a key "
                    "has one target per membership epoch (KS-ASN-1)",
                    key=message.key,
                    consumer=name,
                    other=previous.name,
                )
        elif epoch == self.epoch - 1 and self.config["selector"] in RING_SELECTORS:
            change, changed, change_seq = self.epoch_change[self.epoch]
            if change == "restart":
                return
            # req: KS-ASN-2
            self._exercise("unstable-assignment")
            moved = previous is not incarnation and previous.name != name
            allowed = (change == "join" and changed is incarnation) or (change == "leave" and changed is previous)
            if moved and not allowed:
                assert changed is not None
                what = "joined" if change == "join" else "left"
                self._report(
                    "unstable-assignment",
                    seq,
                    [previous_seq, change_seq, seq],
                    [
                        f"key {message.key!r} was delivered to {previous.name} at seq {previous_seq}",
                        f"then only {changed.name} {what} [seq {change_seq}]",
                    ],
                    f"m{message.offset} went to {name} [seq {seq}], but with selector {self.config['selector']!r} a "
                    f"membership change moves a key only to a joining consumer or away from a leaving one (KS-ASN-2)",
                    key=message.key,
                    consumer=name,
                    other=previous.name,
                )

    def _check_bucket_owner(self, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
        """Policies other than `sorted`: one owner per bucket within an epoch (KS-BKT-3), and a join or leave
        moves only what it must (KS-BKT-8), judged on buckets delivered on both sides of one membership change."""
        assert message.segment is not None and message.bucket is not None and incarnation is not None
        bucket = (message.segment, message.bucket)
        last = self.bucket_last.get(bucket)
        self.bucket_last[bucket] = (self.epoch, incarnation, seq)
        if last is None:
            return
        epoch, previous, previous_seq = last
        where = f"bucket {message.bucket} of segment {message.segment}"
        if epoch == self.epoch:
            # req: KS-BKT-3
            self._exercise("bucket-misassigned")
            if previous is incarnation:
                return
            self._report(
                "bucket-misassigned",
                seq,
                [previous_seq, seq],
                [f"{where} was delivered to {previous.name} at seq {previous_seq}", "no membership change since"],
                f"m{message.offset} of it went to {name} [seq {seq}], but a bucket has one target at a time (KS-BKT-3)",
                offset=message.offset,
                consumer=name,
                owner=previous.name,
            )
            return
        if epoch != self.epoch - 1:
            return
        change, changed, change_seq = self.epoch_change[self.epoch]
        if change not in ("join", "leave") or changed is None:
            return
        # req: KS-BKT-8
        self._exercise("unstable-buckets")
        if previous is incarnation:
            return
        moved_to = self._buckets_moved.setdefault((self.epoch, message.segment), set())
        if change == "join" and changed is incarnation:
            moved_to.add(message.bucket)
            segment = self.segments[message.segment]
            share = -(-segment.buckets // max(1, len(self.members)))
            if len(moved_to) <= share:
                return
            why = (
                f"{len(moved_to)} buckets of segment {message.segment} moved to {name}, more than ceil(N/k) = "
                f"ceil({segment.buckets}/{len(self.members)}) = {share}"
            )
        elif change == "leave" and changed is previous:
            return
        else:
            what = "joined" if change == "join" else "left"
            why = f"only {changed.name} {what} [seq {change_seq}], yet {where} moved from {previous.name} to {name}"
        self._report(
            "unstable-buckets",
            seq,
            [previous_seq, change_seq, seq],
            [f"{where} was delivered to {previous.name} at seq {previous_seq}", f"m{message.offset} went to {name}"],
            f"{why}, but a join moves buckets only to the joiner, at most ceil(N/k), and a leave only the leaver's "
            f"(KS-BKT-8, bucket_assignment {self.config['bucket_assignment']!r})",
            offset=message.offset,
            consumer=name,
            other=previous.name,
        )

    def _check_retry(self, message: Message, seq: int) -> None:
        if self.best_effort:
            return
        if message.retrying:
            # req: KS-RTY-4
            self._exercise("early-retry")
            # With a back-off of 0 the retry may also go at once, in the op that failed it (KS-RTY-4).
            immediate = self._retry_due(message) == message.failure_tick
            if not message.ready and not immediate:
                self._report(
                    "early-retry",
                    seq,
                    [message.awaiting_seq, seq],
                    [
                        self._m(message) + f", failure {message.failures} at seq {message.awaiting_seq}",
                        f"its back-off ends at tick {self._retry_due(message)}",
                    ],
                    f"m{message.offset} was delivered again at tick {self.now} [seq {seq}] before a phase 3 at or "
                    "after the end of its back-off made it pending (KS-RTY-4)",
                    offset=message.offset,
                )
        maximum = int(self.config["max_redeliveries"])
        if message.failures > maximum:
            # req: KS-RTY-6
            self._report(
                "retry-overrun",
                seq,
                [*message.failure_seqs, seq],
                [
                    self._m(message)
                    + f", failed {message.failures} times (seqs {', '.join(map(str, message.failure_seqs))})"
                ],
                f"it was delivered again [seq {seq}], but after more than max_redeliveries = {maximum} failures a "
                "message is poisoned, not delivered (KS-RTY-6)",
                offset=message.offset,
                failures=message.failures,
            )

    def _check_bucket_delivery(self, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
        assert message.segment is not None and message.bucket is not None
        segment = self.segments.get(message.segment)
        if segment is None:
            return
        bucket = (message.segment, message.bucket)
        names = sorted(self.members)
        if names and self.config["bucket_assignment"] != "sorted":
            self._check_bucket_owner(message, seq, incarnation, name)
        elif names:
            # req: KS-BKT-3
            self._exercise("bucket-misassigned")
            owner = bucket_owner(message.bucket, segment.buckets, names)
            if owner != name:
                self._report(
                    "bucket-misassigned",
                    seq,
                    [seq],
                    [
                        self._m(message)
                        + f" in segment {segment.number} (N = {segment.buckets}), bucket {message.bucket}",
                        f"the members sorted by name are {names}",
                    ],
                    f"bucket {message.bucket} belongs to {owner}, yet m{message.offset} was delivered to {name} "
                    f"[seq {seq}] (KS-BKT-3)",
                    offset=message.offset,
                    consumer=name,
                    owner=owner,
                )
        outstanding = self.bucket_outstanding.get(bucket, {})
        if any(d.epoch < self.epoch for d in outstanding.values()):
            self._exercise("bucket-split-owner")
        # req: KS-BKT-4
        other = next((d for d in outstanding.values() if d.holder is not incarnation), None)
        if other is not None:
            self._report(
                "bucket-split-owner",
                seq,
                [other.seq, seq],
                [f"{other.holder.name} holds m{other.offset} of bucket {bucket} [seq {other.seq}]", self._m(message)],
                f"m{message.offset} of the same bucket was delivered to {name} [seq {seq}], but a moving bucket is "
                "withheld until its prior owner drains (KS-BKT-4)",
                offset=message.offset,
                bucket=list(bucket),
            )
        if segment.predecessor is not None:
            # req: KS-BKT-5
            self._exercise("successor-first")
            predecessor = self.segments.get(segment.predecessor)
            if predecessor is not None:
                for offset in predecessor.unresolved:
                    earlier = self.messages[offset]
                    if earlier.hash is not None and segment.lo <= earlier.hash >> 16 <= segment.hi:
                        self._report(
                            "successor-first",
                            seq,
                            [earlier.publish_seq, seq],
                            [
                                self._m(earlier) + f" in segment {predecessor.number}, unresolved",
                                f"segment {segment.number} succeeds it over [{segment.lo}, {segment.hi}]",
                            ],
                            f"m{message.offset} of segment {segment.number} was delivered [seq {seq}] before the "
                            "predecessor drained that range (KS-BKT-5)",
                            offset=message.offset,
                        )
                        break

    def _check_best_effort_outcome(self, message: Message, seq: int) -> None:
        # req: KS-BEF-1
        assert self.op is not None
        if message.outcome_seq is not None:
            self._report(
                "best-effort-redelivery",
                seq,
                [message.outcome_seq, seq],
                [self._m(message) + f", whose outcome was seq {message.outcome_seq}"],
                f"it got a second outcome at seq {seq}, but in best-effort each message has exactly one (KS-BEF-1)",
                offset=message.offset,
            )
        elif self.op.index != message.publish_op:
            self._report(
                "best-effort-redelivery",
                seq,
                [message.publish_seq, seq],
                [self._m(message)],
                f"its outcome came at seq {seq}, in a later op than its publish, but in best-effort a message's "
                "outcome happens at the operation that published it (KS-BEF-1)",
                offset=message.offset,
            )
        message.outcome_seq = seq

    def _record_delivery(self, message: Message, state: KeyState, holder: Incarnation, attempt: int, seq: int) -> None:
        if message.outstanding is not None:
            self._end_delivery(message)
        self._serial += 1
        delivery = Delivery(self._serial, message.offset, holder, attempt, self.now, seq, self.epoch)
        message.deliveries += 1
        message.delivered_ever = True
        message.last_delivery_seq = seq
        message.restored_seq = None
        message.outstanding = delivery
        holder.outstanding[message.offset] = delivery
        state.outstanding[message.offset] = delivery
        self._holding_keys.add(message.key)
        state.undelivered.discard(message.offset)
        state.last_delivery = (self.epoch, holder, seq, message.segment)
        if message.segment is not None and message.bucket is not None:
            self.bucket_outstanding.setdefault((message.segment, message.bucket), {})[message.offset] = delivery
        self._clear_awaiting(message, state)
        timeout = int(self.config["ack_timeout"])
        if timeout > 0 and not self.best_effort:
            heapq.heappush(self._timeouts, (self.now + timeout, delivery.serial, delivery))
        if self.best_effort and not message.resolved:
            self._resolve_silently(message, "delivered", seq)
        self._refresh_head(message.key)

    def _on_held(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        message.held = True
        message.held_seq = seq
        message.last_hold_reason = str(event["reason"])
        message.last_hold_seq = seq
        if event["reason"] == "inactive" and event.get("consumer") is not None:
            target = self.members.get(str(event["consumer"]))
            if target is not None and target.connected and target.reconnected_seq is not None:
                self._report_reconnect_ignored(
                    target, seq, f"m{message.offset} was held [seq {seq}] because {target.name} is inactive"
                )
        if event["reason"] == "draining":
            self._exercise("drain-stuck")

    def _on_ack(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        incarnation = self.members.get(name)
        delivery = message.outstanding
        holds = delivery is not None and incarnation is not None and delivery.holder is incarnation
        if self.best_effort:
            if holds:
                self._end_delivery(message)
            return
        if holds:
            self._exercise("holder-ack-ignored")
        else:
            # req: KS-ACK-2, KS-GEN-3
            self._exercise("stale-ack-accepted")
            held_by = f"{delivery.holder.name} [seq {delivery.seq}]" if delivery is not None else "nobody"
            self._report(
                "stale-ack-accepted",
                seq,
                [message.last_delivery_seq, seq],
                [
                    self._m(message)
                    + (f", last delivered at seq {message.last_delivery_seq}" if message.last_delivery_seq else ""),
                    f"its outstanding delivery is held by {held_by}",
                ],
                f"an ack from {name} [seq {seq}], which does not hold it, resolved m{message.offset}, but such an ack "
                "must be ignored and recorded (KS-ACK-2)",
                offset=message.offset,
                consumer=name,
            )
        self._resolve(message, "acked", seq)

    def _on_ack_ignored(self, event: Event) -> None:
        self._ignored(event, "ack")

    def _on_nack_ignored(self, event: Event) -> None:
        self._ignored(event, "nack")

    def _ignored(self, event: Event, what: str) -> None:
        offset = int(event["offset"])
        seq = int(event["seq"])
        if not 0 <= offset < len(self.messages):
            self._exercise(f"stale-{what}-accepted")
            return
        message = self._message_of(event)
        if message is None:
            return
        incarnation = self.members.get(str(event["consumer"]))
        delivery = message.outstanding
        if delivery is not None and incarnation is not None and delivery.holder is incarnation:
            self._exercise(f"holder-{what}-ignored")
            requirement = "KS-ACK-1" if what == "ack" else "KS-RTY-1"
            self._report(
                f"holder-{what}-ignored",
                seq,
                [delivery.seq, seq],
                [self._m(message) + f", delivered to {incarnation.name} at seq {delivery.seq} and outstanding there"],
                f"the {what} from its holder {incarnation.name} was ignored [seq {seq}], but a {what} from the holder "
                f"must end the delivery ({requirement})",
                offset=offset,
                consumer=incarnation.name,
            )
        else:
            self._exercise(f"stale-{what}-accepted")

    def _on_nack(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        incarnation = self.members.get(name)
        delivery = message.outstanding
        if delivery is not None and incarnation is not None and delivery.holder is incarnation:
            self._exercise("holder-nack-ignored")
        else:
            # req: KS-RTY-1
            self._exercise("stale-nack-accepted")
            self._report(
                "stale-nack-accepted",
                seq,
                [message.last_delivery_seq, seq],
                [
                    self._m(message)
                    + (f", last delivered at seq {message.last_delivery_seq}" if message.last_delivery_seq else "")
                ],
                f"a nack from {name} [seq {seq}], which does not hold it, failed its delivery, but such a nack must "
                "change nothing (KS-RTY-1)",
                offset=message.offset,
                consumer=name,
            )
        if not message.resolved:
            self._fail(message, "nack", seq)

    def _on_timeout(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        timeout = int(self.config["ack_timeout"])
        delivery = message.outstanding
        # req: KS-RTY-2
        self._exercise("premature-timeout")
        at_consumer = delivery is not None and delivery.holder.name == name
        why = ""
        if timeout == 0:
            why = "ack_timeout is 0, which disables timeouts"
        elif not at_consumer:
            why = f"m{message.offset} has no outstanding delivery at {name}"
        elif delivery is not None and self.now < delivery.tick + timeout:
            why = (
                f"it was delivered at tick {delivery.tick} and the ack timeout is {timeout}: no timeout before "
                f"tick {delivery.tick + timeout}"
            )
        if why:
            self._report(
                "premature-timeout",
                seq,
                [delivery.seq if delivery is not None else None, seq],
                [
                    self._m(message)
                    + (f", delivered to {delivery.holder.name} at seq {delivery.seq}" if delivery else "")
                ],
                f"it timed out at {name} at tick {self.now} [seq {seq}], but {why} (KS-RTY-2)",
                offset=message.offset,
                consumer=name,
            )
        if at_consumer and not message.resolved:
            self._fail(message, "timeout", seq)

    def _on_drop(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        reason = str(event["reason"])
        # req: KS-RES-1
        self._exercise("unjustified-resolution")
        why = ""
        maximum = int(self.config["max_redeliveries"])
        if reason == "poison":
            if self.config["poison_policy"] != "drop":
                why = f"the poison policy is {self.config['poison_policy']!r}, not 'drop'"
            elif message.failures <= maximum:
                why = f"it failed {message.failures} times, not more than max_redeliveries = {maximum}"
        elif reason == "operator":
            op = self.op
            if op is None or op.kind != "key_skipped" or op.key != message.key:
                why = "no operator skip of its key happened in this op"
        elif reason in BEST_EFFORT_DROPS and not self.best_effort:
            why = f"reason {reason!r} exists only in the best-effort profile"
        if not why and message.outstanding is not None and not self.best_effort:
            why = f"its delivery to {message.outstanding.holder.name} [seq {message.outstanding.seq}] is outstanding"
        if reason == "poison":
            self._exercise("return-counted")
        if why and reason == "poison" and self._returns_counted(message, seq, "dropped as poison"):
            why = ""
        if why:
            self._report(
                "unjustified-resolution",
                seq,
                [seq],
                [self._m(message)],
                f"it was dropped with reason {reason!r} [seq {seq}], but {why}; no rule allows that resolution "
                "(KS-RES-1)",
                offset=message.offset,
                reason=reason,
            )
        if self.best_effort:
            self._check_best_effort_outcome(message, seq)
        self._resolve(message, "dropped", seq)

    def _on_dead_letter(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        maximum = int(self.config["max_redeliveries"])
        self._exercise("unjustified-resolution")
        self._exercise("dead-letter-mismatch")
        why = ""
        if self.config["poison_policy"] != "dead-letter":
            why = f"the poison policy is {self.config['poison_policy']!r}, not 'dead-letter'"
        elif message.failures <= maximum:
            why = f"it failed {message.failures} times, not more than max_redeliveries = {maximum}"
        elif message.outstanding is not None:
            why = f"its delivery to {message.outstanding.holder.name} [seq {message.outstanding.seq}] is outstanding"
        self._exercise("return-counted")
        if why and message.failures <= maximum and self._returns_counted(message, seq, "dead-lettered"):
            why = ""
        if why:
            self._report(
                "unjustified-resolution",
                seq,
                [seq],
                [self._m(message)],
                f"it was dead-lettered [seq {seq}], but {why}; no rule allows that resolution (KS-RES-1)",
                offset=message.offset,
            )
        attempt, reason = int(event["attempt"]), str(event["reason"])
        if attempt != message.deliveries or reason != message.last_failure:
            # req: KS-POI-2
            last_failure = message.failure_seqs[-1] if message.failure_seqs else None
            self._report(
                "dead-letter-mismatch",
                seq,
                [last_failure, seq],
                [
                    self._m(message) + f", delivered {message.deliveries} times since the last restart, last failure "
                    f"{message.last_failure!r}" + (f" at seq {last_failure}" if last_failure is not None else "")
                ],
                f"its dead letter [seq {seq}] says attempt {attempt} and reason {reason!r}, but it must carry the "
                "attempt count and the reason of the last failure (KS-POI-2)",
                offset=message.offset,
            )
        self._resolve(message, "dead_lettered", seq)

    def _on_filter(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        self._exercise("unjustified-filter")
        self._exercise("filtered-without-members")
        if not self.members:
            # req: KS-FLT-4
            self._report(
                "filtered-without-members",
                seq,
                [seq],
                [self._m(message), "the subscription has no member"],
                f"m{message.offset} was resolved as filtered [seq {seq}], but with no member at all messages wait "
                "(KS-FLT-4)",
                offset=message.offset,
            )
        else:
            # req: KS-FLT-3
            taker = next((m for m in self.members.values() if accepts(m.filters, message.key)), None)
            if taker is not None:
                self._report(
                    "unjustified-filter",
                    seq,
                    [taker.added_seq, seq],
                    [
                        self._m(message),
                        f"{taker.name} joined with filters {list(taker.filters)} [seq {taker.added_seq}], accepting it",
                    ],
                    f"m{message.offset} was resolved as filtered [seq {seq}], but only keys nobody accepts are "
                    "filtered (KS-FLT-3)",
                    offset=message.offset,
                    consumer=taker.name,
                )
        if self.best_effort:
            self._check_best_effort_outcome(message, seq)
        self._resolve(message, "filtered", seq)

    def _on_outcome(self, event: Event) -> None:
        """An implementation-defined terminal outcome: judged as the resolution declared for it, else a loss."""
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["reason"])
        outcomes = self.declared.get("terminal_outcomes", {})
        resolution = outcomes.get(name)
        # req: KS-RES-1
        self._exercise("unjustified-outcome")
        if resolution in OUTCOME_EVENTS:
            judged: Event = {**event, "event": OUTCOME_EVENTS[resolution]}
            if resolution == "dropped":
                judged["reason"] = "poison"
            elif resolution == "dead_lettered":
                judged.update(attempt=message.deliveries, reason=message.last_failure)
            elif resolution == "acked" and event.get("consumer") is None:
                holder = message.outstanding.holder.name if message.outstanding is not None else "(nobody)"
                judged["consumer"] = holder
            getattr(self, f"_on_{OUTCOME_EVENTS[resolution]}")(judged)
            return
        declared = "declared as standing for no resolution" if name in outcomes else "not declared"
        self._report(
            "unjustified-outcome",
            seq,
            [message.publish_seq, seq],
            [self._m(message)],
            f"it ended with the implementation's outcome {name!r} [seq {seq}], {declared} in terminal_outcomes; "
            "a message resolved by no rule of the spec is lost (KS-RES-1)",
            offset=message.offset,
            outcome=name,
        )
        self._resolve(message, f"outcome:{name}", seq)

    def _report_early_block(self, message: Message, seq: int, maximum: int) -> None:
        """A key_blocked of a message that has not failed more than max_redeliveries times (since its release)."""
        if message.released_seq is not None:
            # req: KS-POI-4
            self._report(
                "stale-budget",
                seq,
                [message.released_seq, *message.failure_seqs, seq],
                [
                    self._m(message) + f", released by the operator at seq {message.released_seq}",
                    f"it failed {message.failures} times since, max_redeliveries = {maximum}",
                ],
                f"it was blocked again [seq {seq}], but a release gives a fresh budget: it is poisoned only after "
                f"more than {maximum} failures counted from the release (KS-POI-4)",
                offset=message.offset,
                failures=message.failures,
            )
            return
        # req: KS-POI-3
        self._report(
            "unjustified-block",
            seq,
            [*message.failure_seqs, seq],
            [self._m(message) + f", failed {message.failures} times, max_redeliveries = {maximum}"],
            f"it blocked its key [seq {seq}], but only a poisoned message (more than max_redeliveries failures) "
            "blocks its key (KS-POI-3)",
            offset=message.offset,
            failures=message.failures,
        )

    def _returns_counted(self, message: Message, seq: int, what: str) -> bool:
        """True (and `return-counted` reported) if a message was poisoned only because its returns counted."""
        maximum = int(self.config["max_redeliveries"])
        # req: KS-RTY-7
        if message.returns == 0 or message.failures > maximum or message.failures + message.returns <= maximum:
            return False
        self._report(
            "return-counted",
            seq,
            [message.returned_delivery_seq, message.return_seq, seq],
            [
                self._m(message) + f", failed {message.failures} times and returned {message.returns} times by a "
                f"leaving or evicted holder (last at seq {message.return_seq})",
                f"max_redeliveries = {maximum}",
            ],
            f"it was {what} [seq {seq}], which only counting its returns as failures explains, but a returned "
            "message is pending at once without adding to its failure count (KS-RTY-7)",
            offset=message.offset,
            returns=message.returns,
            failures=message.failures,
        )
        return True

    def _on_key_blocked(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        state = self.keys[message.key]
        message.blocked = True
        message.blocked_seq = seq
        self._clear_awaiting(message, state)
        self._over_budget.discard(message.offset)
        state.blocked.add(message.offset)
        self._blocked_keys.add(message.key)
        self._exercise("return-counted")
        self._exercise("unjustified-block")
        if message.released_seq is not None:
            self._exercise("stale-budget")
        maximum = int(self.config["max_redeliveries"])
        if message.failures <= maximum and not self._returns_counted(message, seq, "blocked as poison"):
            self._report_early_block(message, seq, maximum)
        last = max(state.unresolved) if len(state.unresolved) else message.offset
        if last > message.offset:
            self._exercise("blocked-key-leak")
        self._refresh_head(message.key)

    def _on_consumer_evicted(self, event: Event) -> None:
        seq = int(event["seq"])
        name = str(event["consumer"])
        incarnation = self.members.get(name)
        evict_after = int(self.config["evict_after"])
        # req: KS-MEM-2
        self._exercise("premature-eviction")
        why = ""
        if incarnation is not None and incarnation.reconnected_seq is not None:
            self._report_reconnect_ignored(incarnation, seq, f"{name} was evicted at tick {self.now} [seq {seq}]")
        elif incarnation is None:
            why = f"{name} is not a member"
        elif incarnation.connected:
            why = f"{name} is connected"
        elif evict_after == 0:
            why = "evict_after is 0, which disables eviction"
        elif self.now < incarnation.disconnected_at + evict_after:
            why = (
                f"it disconnected at tick {incarnation.disconnected_at}, so its eviction is due at tick "
                f"{incarnation.disconnected_at + evict_after}, not {self.now}"
            )
        if why:
            self._report(
                "premature-eviction",
                seq,
                [incarnation.disconnected_seq if incarnation else None, seq],
                [f"{name} was evicted at tick {self.now} [seq {seq}]"],
                f"{why} (KS-MEM-2)",
                consumer=name,
            )
        if incarnation is None:
            return
        self._disconnected.pop(incarnation.number, None)
        self._end_incarnation(incarnation, seq, returned=True)
        self._new_epoch("leave", incarnation, seq)

    def _report_reconnect_ignored(self, incarnation: Incarnation, seq: int, what: str) -> None:
        # req: KS-MEM-4
        self._report(
            "reconnect-ignored",
            seq,
            [incarnation.disconnected_seq, incarnation.reconnected_seq, seq],
            [
                f"{incarnation.name} disconnected at seq {incarnation.disconnected_seq}",
                f"{incarnation.name} reconnected at seq {incarnation.reconnected_seq} and has not disconnected since",
            ],
            f"{what}, but a reconnected member is connected again with all it holds, and its eviction is off "
            "(KS-MEM-4)",
            consumer=incarnation.name,
        )

    def _on_cursor_persisted(self, event: Event) -> None:
        seq = int(event["seq"])
        cursor = int(event["cursor"])
        holes = BitMap()
        for lo, hi in event.get("ranges") or ():
            holes.add_range(int(lo), int(hi) + 1)
        if self.unresolved:
            # req: KS-CUR-1
            self._exercise("cursor-skip")
            smallest = self.unresolved.min()
            bad = holes & self.unresolved
            if cursor > smallest or bad:
                offset = smallest if cursor > smallest else bad.min()
                skipped = self.messages[offset]
                where = f"cursor {cursor} passes it" if cursor > smallest else "the persisted holes include it"
                self._report(
                    "cursor-skip",
                    seq,
                    [skipped.publish_seq, seq],
                    [self._m(skipped) + ", unresolved"],
                    f"the persisted cursor [seq {seq}]: {where}, but a persisted cursor never passes an unresolved "
                    "offset (KS-CUR-1)",
                    offset=offset,
                    cursor=cursor,
                )
        if self.persist_seq is not None:
            # req: KS-CUR-2
            self._exercise("cursor-regress")
            if cursor < self.persisted_cursor:
                self._report(
                    "cursor-regress",
                    seq,
                    [self.persist_seq, seq],
                    [f"the cursor was persisted as {self.persisted_cursor} at seq {self.persist_seq}"],
                    f"it was persisted as {cursor} [seq {seq}], lower, but a persisted cursor never moves backwards "
                    "(KS-CUR-2)",
                    cursor=cursor,
                    previous=self.persisted_cursor,
                )
        interval = int(self.config["persist_interval"])
        if interval > 0:
            # req: KS-CUR-7
            self._exercise("persist-early")
            op = self.op
            why = ""
            if op is None or op.kind != "tick":
                why = f"with persist_interval = {interval} persistence happens only in phase 6 of a tick"
            elif self.persist_tick is not None and self.now - self.persist_tick < interval:
                why = (
                    f"the previous persistence was at tick {self.persist_tick} and persist_interval = {interval}: "
                    f"not again before tick {self.persist_tick + interval}"
                )
            if why:
                self._report(
                    "persist-early",
                    seq,
                    [self.persist_seq, seq],
                    [f"the cursor was persisted at tick {self.now} [seq {seq}]"],
                    f"{why} (KS-CUR-7)",
                    cursor=cursor,
                )
        self.persisted_cursor = cursor
        self.persisted_holes = holes
        self.persist_seq = seq
        self.persist_tick = self.now
        if cursor == self.cursor() and (not self.config["persist_ack_holes"] or holes == self.resolved_above_cursor()):
            self.synced_version = self.state_version
        else:
            self.synced_version = -1

    def _on_checkpoint(self, event: Event) -> None:
        seq = int(event["seq"])
        bucket = (int(event["segment"]), int(event["bucket"]))
        cursor = int(event["cursor"])
        # req: KS-BKT-6
        self._exercise("checkpoint-skip")
        pending = self.bucket_unresolved.get(bucket)
        first = pending.first() if pending is not None else None
        if first is not None and first < cursor:
            skipped = self.messages[first]
            self._report(
                "checkpoint-skip",
                seq,
                [skipped.publish_seq, seq],
                [self._m(skipped) + f" in bucket {list(bucket)}, unresolved"],
                f"the checkpoint {cursor} of that bucket [seq {seq}] passes it, but a checkpoint never passes an "
                "unresolved message of its bucket (KS-BKT-6)",
                offset=first,
                cursor=cursor,
            )
        previous = self.checkpoints.get(bucket)
        if previous is not None and cursor < previous[0]:
            self._report(
                "checkpoint-skip",
                seq,
                [previous[1], seq],
                [f"bucket {list(bucket)} was checkpointed at {previous[0]} [seq {previous[1]}]"],
                f"it was checkpointed at {cursor} [seq {seq}], lower, but a checkpoint never lies below an earlier "
                "one of the same bucket (KS-BKT-6)",
                cursor=cursor,
            )
        self.checkpoints[bucket] = (cursor, seq)

    def _on_bucket_withheld(self, event: Event) -> None:
        return

    def _on_bucket_assigned(self, event: Event) -> None:
        return

    # --- state transitions ---------------------------------------------------------------------

    def _new_epoch(self, change: str, incarnation: Incarnation | None, seq: int) -> None:
        self.epoch += 1
        self.epoch_change[self.epoch] = (change, incarnation, seq)
        self.epoch_change.pop(self.epoch - 2, None)

    def _end_incarnation(self, incarnation: Incarnation, seq: int, returned: bool) -> None:
        """A leave, eviction or restart: the incarnation's deliveries end without resolving their messages."""
        if returned and incarnation.outstanding and not self.best_effort:
            self._exercise("lost")
        for offset in list(incarnation.outstanding):
            message = self.messages[offset]
            delivery = message.outstanding
            self._end_delivery(message)
            if returned and not self.best_effort and not message.resolved and delivery is not None:
                # req: KS-MEM-1, KS-RTY-7
                message.returned = True
                message.returns += 1
                message.return_seq = seq
                message.returned_delivery_seq = delivery.seq
                message.awaiting_seq = seq
                self.keys[message.key].awaiting.add(offset)
                self._awaiting_keys.add(message.key)
            self._refresh_head(message.key)
        incarnation.outstanding.clear()
        incarnation.member = False
        incarnation.ended_seq = seq
        self.members.pop(incarnation.name, None)
        self._disconnected.pop(incarnation.number, None)
        self.left[incarnation.name] = seq

    def _end_delivery(self, message: Message) -> None:
        delivery = message.outstanding
        if delivery is None:
            return
        message.outstanding = None
        delivery.holder.outstanding.pop(message.offset, None)
        self.keys[message.key].outstanding.pop(message.offset, None)
        if message.segment is not None and message.bucket is not None:
            self.bucket_outstanding.get((message.segment, message.bucket), {}).pop(message.offset, None)

    def _retry_due(self, message: Message) -> int:
        base, cap = int(self.config["backoff_base"]), int(self.config["backoff_max"])
        failures = max(message.failures, 1)
        return message.failure_tick + min(base << min(failures - 1, 64), cap)

    def _fail(self, message: Message, kind: str, seq: int) -> None:
        """A failed delivery (nack or timeout): the message is retrying until its back-off ends (section 10)."""
        state = self.keys[message.key]
        self._end_delivery(message)
        message.failures += 1
        message.failure_seqs.append(seq)
        message.last_failure = kind
        message.failure_serial += 1
        message.failure_tick = self.now
        message.retrying = True
        message.ready = False
        message.returned = False
        message.awaiting_seq = seq
        state.awaiting.add(message.offset)
        self._awaiting_keys.add(message.key)
        heapq.heappush(self._readiness, (self._retry_due(message), message.offset, message.failure_serial))
        maximum = int(self.config["max_redeliveries"])
        if message.failures == maximum + 1:
            self._exercise("retry-overrun")
            self._exercise("poison-ignored")
        if message.failures > maximum:
            self._over_budget.add(message.offset)
        self._refresh_head(message.key)

    def _clear_awaiting(self, message: Message, state: KeyState) -> None:
        message.retrying = False
        message.ready = False
        message.returned = False
        message.awaiting_seq = None
        state.awaiting.discard(message.offset)

    def _resolve(self, message: Message, resolution: str, seq: int) -> None:
        # req: KS-RES-1
        self._exercise("double-resolution")
        if message.resolved and message.resolution != "delivered":
            self._report(
                "double-resolution",
                seq,
                [message.resolution_seq, seq],
                [self._m(message) + f", resolved as {message.resolution} at seq {message.resolution_seq}"],
                f"it was resolved again as {resolution} [seq {seq}], but a message leaves the subscription at most "
                "once between restarts (KS-RES-1)",
                offset=message.offset,
            )
            return
        if message.resolved:
            message.resolution = resolution
            return
        self._end_delivery(message)
        self._resolve_silently(message, resolution, seq)

    def _resolve_silently(self, message: Message, resolution: str, seq: int) -> None:
        state = self.keys[message.key]
        message.resolved = True
        message.resolution = resolution
        message.resolution_seq = seq
        message.restored_seq = None
        self.last_resolution_seq = seq
        if self.op is not None:
            self.op.resolved = True
        self.unresolved.discard(message.offset)
        self.state_version += 1
        state.unresolved.discard(message.offset)
        state.undelivered.discard(message.offset)
        self._clear_awaiting(message, state)
        self._over_budget.discard(message.offset)
        if message.offset in state.blocked:
            state.blocked.discard(message.offset)
            message.blocked = False
        if message.segment is not None:
            segment = self.segments.get(message.segment)
            if segment is not None:
                segment.unresolved.discard(message.offset)
            if message.bucket is not None:
                pending = self.bucket_unresolved.get((message.segment, message.bucket))
                if pending is not None:
                    pending.discard(message.offset)
        self._refresh_head(message.key)

    def _reset_volatile(self, message: Message) -> None:
        """What a restart forgets about a message (section 14): deliveries, failures, retries, blocks, holds.

        An implementation that declares `durable_attempts` keeps its delivery and failure counts (KS-RTY-5)."""
        if not self.durable_attempts:
            message.deliveries = 0
            message.failures = 0
            message.returns = 0
            message.released_seq = None
            message.failure_seqs = []
            message.last_failure = None
        message.outstanding = None
        message.retrying = False
        message.ready = False
        message.returned = False
        message.awaiting_seq = None
        message.blocked = False
        message.held = False
        message.last_hold_reason = None

    def _rebuild_indexes(self) -> None:
        """After a restart: every per-key and per-bucket index from the messages' state."""
        unresolved: dict[str, list[int]] = {}
        for offset in self.unresolved:
            unresolved.setdefault(self.messages[offset].key, []).append(offset)
        for key, state in self.keys.items():
            offsets = unresolved.get(key, [])
            state.unresolved = OrderedOffsets(offsets)
            state.undelivered = OrderedOffsets(offsets)
            state.outstanding = {}
            state.awaiting = set()
            state.blocked = set()
        self.bucket_outstanding = {}
        self.bucket_unresolved = {}
        for segment in self.segments.values():
            segment.unresolved = OrderedOffsets()
        for offset in self.unresolved:
            message = self.messages[offset]
            if message.segment is not None and message.bucket is not None:
                self.segments[message.segment].unresolved.add(offset)
                self.bucket_unresolved.setdefault((message.segment, message.bucket), OrderedOffsets()).add(offset)
        self._timeouts = []
        self._readiness = []
        self._disconnected = {}
        self._over_budget = set()
        self._idle_heads = set()
        self._awaiting_keys = set()
        self._blocked_keys = set()
        for key in self.keys:
            self._refresh_head(key)

    def _refresh_head(self, key: str) -> None:
        """Keep the set of keys whose earliest unresolved message has no outstanding delivery (KS-ISO-1)."""
        head = self.keys[key].unresolved.first()
        if head is not None and self.messages[head].outstanding is None:
            self._idle_heads.add(key)
        else:
            self._idle_heads.discard(key)

    # --- phase and end-of-op checks ------------------------------------------------------------

    def _after_phase_1(self, op: OpState) -> None:
        timeout = int(self.config["ack_timeout"])
        for delivery in op.due_timeouts:
            message = self.messages[delivery.offset]
            if message.outstanding is delivery and timeout > 0:
                # req: KS-RTY-3
                self._report(
                    "missed-timeout",
                    op.seq,
                    [delivery.seq, op.seq],
                    [
                        f"d = deliver(offset={delivery.offset}) to {delivery.holder.name} at tick {delivery.tick} "
                        f"[seq {delivery.seq}]",
                        f"ack_timeout = {timeout}",
                    ],
                    f"d is still outstanding after phase 1 of tick {self.now} [seq {op.seq}], but a delivery times out "
                    f"when tick {delivery.tick + timeout} begins (KS-RTY-3)",
                    offset=delivery.offset,
                    consumer=delivery.holder.name,
                )

    def _after_phase_2(self, op: OpState) -> None:
        maximum = int(self.config["max_redeliveries"])
        for offset in sorted(self._over_budget):
            message = self.messages[offset]
            if message.resolved or message.blocked or message.failures <= maximum:
                continue
            marker = (offset, len(message.failure_seqs))
            if marker in self._poison_reported:
                continue
            self._poison_reported.add(marker)
            # req: KS-RTY-6
            self._report(
                "poison-ignored",
                op.seq,
                [*message.failure_seqs, op.seq],
                [
                    self._m(message) + f", failed {message.failures} times (seqs "
                    f"{', '.join(map(str, message.failure_seqs))})",
                    f"max_redeliveries = {maximum}, policy {self.config['poison_policy']!r}",
                ],
                f"after phase 2 of tick {self.now} [seq {op.seq}] it is neither resolved nor blocked, but a message "
                "that failed too often is poisoned in the first phase 2 after its failure (KS-RTY-6)",
                offset=offset,
            )

    def _phase_3_point(self) -> None:
        while self._readiness and self._readiness[0][0] <= self.now:
            _, offset, serial = heapq.heappop(self._readiness)
            message = self.messages[offset]
            if message.retrying and message.failure_serial == serial:
                # req: KS-RTY-4
                message.ready = True

    def _after_phase_4(self, op: OpState) -> None:
        for incarnation in op.due_evictions:
            if self.members.get(incarnation.name) is incarnation:
                # req: KS-MEM-2
                self._report(
                    "missed-eviction",
                    op.seq,
                    [incarnation.disconnected_seq, op.seq],
                    [
                        f"{incarnation.name} disconnected at tick {incarnation.disconnected_at} "
                        f"[seq {incarnation.disconnected_seq}]",
                        f"evict_after = {self.config['evict_after']}",
                    ],
                    f"it is still a member after phase 4 of tick {self.now} [seq {op.seq}], but it must be evicted "
                    f"then (KS-MEM-2)",
                    consumer=incarnation.name,
                )

    def _check_skip(self, op: OpState) -> None:
        for offset in op.skip_targets:
            message = self.messages[offset]
            if message.resolved:
                continue
            # req: KS-POI-5
            self._report(
                "skip-ignored",
                op.seq,
                [message.blocked_seq, op.seq],
                [self._m(message) + f", which blocked its key at seq {message.blocked_seq}"],
                f"the operator skipped key {message.key!r} [seq {op.seq}] but m{message.offset} was not resolved, "
                "and a skip resolves the blocked message as dropped (KS-POI-5)",
                key=message.key,
                offset=message.offset,
            )
            return

    def _check_outcome(self, op: OpState) -> None:
        assert op.published is not None
        message = self.messages[op.published]
        if message.outcome_seq is None:
            # req: KS-BEF-1
            self._report(
                "missing-outcome",
                op.seq,
                [message.publish_seq],
                [self._m(message)],
                f"the op that published it ended without delivering, dropping or filtering m{message.offset}, but in "
                "best-effort each message's outcome happens at its publish (KS-BEF-1)",
                offset=message.offset,
            )

    def _check_persistence(self, op: OpState) -> None:
        if self.best_effort:
            return
        cursor = self.cursor()
        if cursor > op.cursor_at_start or (op.resolved and self.config["persist_ack_holes"]):
            self._exercise("persist-late")
        if self.state_version == self.synced_version:
            return
        holes_enabled = bool(self.config["persist_ack_holes"])
        holes = self.resolved_above_cursor() if holes_enabled else None
        if cursor == self.persisted_cursor and (holes is None or holes == self.persisted_holes):
            self.synced_version = self.state_version
            return
        if self.persisted_cursor > cursor:
            return  # ahead, not late: cursor-skip reported it when it was persisted
        interval = int(self.config["persist_interval"])
        if interval == 0:
            due = True
        else:
            due = op.kind == "tick" and (self.persist_tick is None or self.now - self.persist_tick >= interval)
        if not due or self.late_version == self.state_version:
            return
        self.late_version = self.state_version
        # req: KS-CUR-5, KS-RES-3
        what = f"the cursor is {cursor}" + (f" with holes {_ranges(holes)}" if holes is not None else "")
        persisted = f"{self.persisted_cursor}" + (
            f" with holes {_ranges(self.persisted_holes)}" if holes is not None else ""
        )
        rule = (
            "with persist_interval = 0 it is persisted after every op that changed it"
            if interval == 0
            else f"with persist_interval = {interval} it is persisted in phase 6 of the first tick at which it is due"
        )
        self._report(
            "persist-late",
            op.seq,
            [self.last_resolution_seq, op.seq],
            [f"the op at seq {op.seq}", f"the last resolution at seq {self.last_resolution_seq}"],
            f"at the end of the op {what}, but the persisted cursor is {persisted}; {rule} (KS-CUR-5)",
            cursor=cursor,
            persisted=self.persisted_cursor,
        )

    def _check_idle(self, op: OpState) -> None:
        if self.best_effort or self.config["selector"] in ("pulsar-sticky", "buckets") or not self._idle_heads:
            return
        window = int(self.config["window"])
        in_window = (
            key for key in self._idle_heads if self.unresolved.rank(self.keys[key].unresolved.first() or 0) <= window
        )
        if next(in_window, None) is None:
            return
        # req: KS-ISO-2 (the window's messages are the `window` smallest unresolved offsets)
        self._exercise("idle-while-ready")
        if any(m.filters for m in self.members.values()):
            self._exercise("unfiltered-wait")
        ready = [m for m in self.members.values() if m.connected and len(m.outstanding) < m.capacity]
        # A fixed-target selector's target is not known here: judge only when every member could take the key.
        # With selector `any` (no key affinity) one eligible member with room is enough.
        fixed_target = not self.any_selector
        if fixed_target and len(ready) < len(self.members) and not any(m.filters for m in self.members.values()):
            return
        for key in sorted(self._idle_heads, key=lambda k: self.keys[k].unresolved.first() or 0):
            state = self.keys[key]
            head = state.unresolved.first()
            if head is None or self.unresolved.rank(head) > window:
                continue
            message = self.messages[head]
            if message.outstanding is not None or state.outstanding or state.blocked:
                continue
            if any(self.messages[o].retrying and not self.messages[o].ready for o in state.awaiting):
                continue
            if self._slot_mate_explains(key):
                continue
            eligible = [m for m in self.members.values() if accepts(m.filters, key)]
            marker = (head, self.state_version)
            if not eligible and self.members:
                if marker not in self._idle_reported:
                    self._idle_reported.add(marker)
                    self._report_unfiltered(message, op)
                continue
            able = [m for m in eligible if m.connected and len(m.outstanding) < m.capacity]
            if fixed_target and (not eligible or len(able) < len(eligible)):
                continue
            if not fixed_target and not able:
                continue
            if marker in self._idle_reported:
                continue
            self._idle_reported.add(marker)
            if message.restored_seq is not None:
                self._report_restart_skip(message, op.seq)
                continue
            # req: KS-ISO-1, KS-GEN-6, KS-ISO-2
            names = ", ".join(f"{m.name} ({len(m.outstanding)}/{m.capacity})" for m in (able or eligible))
            who = "some members that accept it are" if not fixed_target else "the members that accept it are"
            self._report(
                "idle-while-ready",
                op.seq,
                [message.publish_seq, op.seq],
                [
                    self._m(message) + f", the earliest unresolved message of its key, within the window of {window}",
                    f"no message of {key!r} is outstanding, retrying or blocked",
                    f"{who} connected and below capacity: {names}",
                ],
                f"the op at seq {op.seq} ended with m{head} undelivered, but no rule allows holding it: a stuck key "
                "blocks only itself (KS-ISO-1)",
                offset=head,
                key=key,
            )

    def _slot_mate_explains(self, key: str) -> bool:
        """With hash-granularity draining (KS-DRN-3): another key of the same slot may hold this one back.

        A slot-mate explains a hold when it awaits redelivery, is blocked, or holds an outstanding delivery that may
        sit at another consumer than the slot's target: one from an earlier epoch (the target may have moved since), or
        any one while members have filters (keys of one slot may then have different targets). A slot-mate delivered
        in this epoch without filters is at the slot's target (KS-ASN-1), so it explains nothing.
        """
        if self.config["drain_granularity"] != "hash" or self.config["selector"] not in SLOT_SELECTORS:
            return False
        selector = str(self.config["selector"])
        slot = slot_of(selector, key)
        filtered = any(m.filters for m in self.members.values())
        for other in self._keys_of_slot.get(slot, ()):
            if other == key:
                continue
            mate = self.keys[other]
            if mate.blocked or mate.awaiting:
                return True  # req: KS-DRN-3
            if any(filtered or delivery.epoch < self.epoch for delivery in mate.outstanding.values()):
                return True  # req: KS-DRN-3
        return False

    def _report_restart_skip(self, message: Message, seq: int) -> None:
        # req: KS-CUR-3
        restart = message.restored_seq
        persisted_before = self.loaded[2] if self.loaded is not None else None
        self._report(
            "restart-skip",
            seq,
            [message.publish_seq, persisted_before, restart, seq],
            [
                self._m(message) + ", resolved before the restart, at or above the persisted cursor and not a "
                "persisted ack hole",
                f"the restart at seq {restart} loaded cursor {self.loaded[0] if self.loaded else 0}",
            ],
            f"m{message.offset} was not dispatched again [seq {seq}] although nothing holds it back, but a restart "
            "resumes from the store: every offset it did not record is dispatched again (KS-CUR-3)",
            offset=message.offset,
            key=message.key,
        )

    def _report_unfiltered(self, message: Message, op: OpState) -> None:
        # req: KS-FLT-3
        filters = "; ".join(f"{m.name} {list(m.filters)}" for m in self.members.values())
        self._report(
            "unfiltered-wait",
            op.seq,
            [message.publish_seq, op.seq],
            [
                self._m(message) + ", the earliest unresolved message of its key, within the window",
                f"no member accepts key {message.key!r}: {filters}",
            ],
            f"the op at seq {op.seq} ended with m{message.offset} still waiting, but a message whose key no member "
            "accepts is resolved as filtered when the dispatch pass reaches it (KS-FLT-3)",
            offset=message.offset,
            key=message.key,
        )


def bucket_owner(bucket: int, buckets: int, names: list[str]) -> str:
    """KS-BKT-3: the member (by sorted name) that is the target of a bucket of a segment with N buckets."""
    count = len(names)
    for j, name in enumerate(names):
        if j * buckets // count <= bucket < (j + 1) * buckets // count:
            return name
    return names[-1]


def _ranges(bitmap: BitMap | None) -> str:
    if bitmap is None or not bitmap:
        return "{}"
    ranges: list[str] = []
    start = previous = -2
    for value in bitmap:
        if value != previous + 1:
            if start >= 0:
                ranges.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = value
        previous = value
    ranges.append(f"{start}" if start == previous else f"{start}-{previous}")
    shown = ranges[:5] + (["..."] if len(ranges) > 5 else [])
    return "{" + ", ".join(shown) + "}"


def check_events(events: Iterable[Event]) -> Checker:
    """Feed a whole history to a fresh checker and close it."""
    checker = Checker()
    for event in events:
        checker.feed(event)
    checker.finish()
    return checker
