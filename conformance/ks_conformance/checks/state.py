"""The reconstructed state of spec/checking.md section 1: messages, keys, incarnations, the cursor, and
the transitions every check relies on. The checks themselves are in the sibling modules, one per part of
section 2.

Long because it is the one state every check reads and the transitions that keep it (restarts, parking, and
what may be forgotten, section 1); the archive of settled messages is its own module (checks/messages.py).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS, OUT_OF_ORDER_KINDS
from ks_spec.slots import SLOT_SELECTORS
from pyroaring import BitMap

from ks_conformance import explain
from ks_conformance.anomalies import Anomaly, Explanation, Verdict, requirement_profiles, verdict_of
from ks_conformance.checks.changes import (
    DELIVERY_ENDED,
    PHANTOM,
    RESOLVED,
    ChangeLog,
)
from ks_conformance.checks.messages import CHUNK, MessageLog
from ks_conformance.checks.parking import Parking
from ks_conformance.checks.records import (
    BatchRun,
    Delivery,
    Incarnation,
    KeyState,
    Message,
    OpState,
    OrderedOffsets,
    Problem,
    Segment,
)
from ks_conformance.rules.registry import defined

Event = dict[str, Any]

ACK_CLASS = frozenset({"ack", "ack_ignored", "nack", "nack_ignored"})
"""Effects that only an ack or nack op causes, and always first: they mark an op boundary."""

CURSOR_KINDS = frozenset(
    {"cursor-skip", "cursor-regress", "persist-early", "persist-late", "cursor-stall", "seek-unpersisted"}
)
"""Anomalies about the persisted cursor: they do not apply to a system declared without one (`cursor: false`)."""
AFFINITY_KINDS = frozenset({"key-moved", "unstable-assignment"})
"""Anomalies about where a selector sends a key: they do not apply to selector `any` (no key affinity)."""
OUTCOME_EVENTS = {"acked": "ack", "dropped": "drop", "dead_lettered": "dead_letter", "filtered": "filter"}
"""The event a declared terminal outcome is judged as (`terminal_outcomes` of adapter protocol v2)."""
DANUBE_PHASE_3 = frozenset({"deliver", "held", "filter"})
"""The effects of the deliver step that ends phase 3 under `tick_order = "danube"` (KS-GEN-7)."""
SPARE_STATES = 1024
"""At most this many empty key states are kept for reuse (`CheckerState._spare_states`)."""


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


class CheckerState:
    """The reconstructed state of spec/checking.md section 1, its transitions, and how anomalies are reported.

    The checks of section 2 are functions of this state in the `ks_conformance.checks` modules; `Checker` adds the
    public interface that feeds them.
    """

    archive_chunk = CHUNK
    """Offsets per archived chunk of settled messages (tests make it tiny to archive and revive constantly)."""
    rest_keys = True
    judges_subscription = True
    """False in a shard of keys other than the first: the checks of the persisted cursor at ops' ends read only the
    facts every shard shares, so the first shard alone runs them (sharding/shard.py)."""
    settle_every = 64
    """Ops between two settlements of the state (archiving, resting keys): settling is judgement-neutral, so it runs
    at this pace rather than after every op (tests settle after every op to prove the neutrality)."""
    """Put keys with nothing left to rest (tests turn it off to compare against the state kept whole)."""

    def __init__(self) -> None:
        self.anomalies: list[Anomaly] = []
        self.problems: list[Problem] = []
        self.exercised: Counter[str] = Counter({kind.name: 0 for kind in defined()})
        self.config: dict[str, Any] = dict(CONFIG_DEFAULTS)
        self.events_seen = 0
        self.now = 0
        self.last_seq = -1
        self.messages = MessageLog(self._reset_volatile, self.archive_chunk)
        """Every published message by offset, the settled ones archived off the heap (checks/messages.py)."""
        self.keys: dict[str, KeyState] = {}
        """The keys with something unresolved, outstanding, awaiting or blocked (and those not yet put to rest)."""
        self._resting: dict[str, tuple[int, Incarnation, int, int | None] | None] = {}
        """Keys with nothing left (dropped from `keys` at the end of an op): where each was last delivered, which
        KS-ASN-1 and KS-ASN-2 judge its next delivery against."""
        self._emptied: set[str] = set()
        """Keys that may have nothing left since the last op ended (candidates to put to rest)."""
        self._spare_states: list[KeyState] = []
        """The empty states of keys put to rest, for keys woken or published next (all empty states are alike, and
        a steady trace wakes a key for nearly every message: reusing one is a fraction of building one)."""
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
        self.seek: tuple[int, int] | None = None
        """After a seek, until the next restart: (its target, its seq) (KS-CUR-9)."""
        self.seek_holders: dict[int, set[str]] = {}
        """Per offset, the consumers whose delivery of it the last seek cut (KS-CUR-11)."""
        self.state_version = 0
        self.synced_version = 0
        self.delta_log: ChangeLog | None = None
        """When judging a shard of keys: every change this checker makes to the facts that span keys (a publish, a
        delivery begun or ended, a resolution), as (seq, what, offset, consumer), to prove them (sharding/facts.py)."""
        self.late_version = -1
        self.last_resolution_seq: int | None = None
        self.segments: dict[int, Segment] = {}
        self.bucket_outstanding: dict[tuple[int, int], dict[int, Delivery]] = {}
        self.bucket_unresolved: dict[tuple[int, int], OrderedOffsets] = {}
        self.checkpoints: dict[tuple[int, int], tuple[int, int]] = {}
        """Per bucket, its last checkpoint and that event's seq (they outlive a restart: the store keeps them)."""
        self.batches: dict[int, list[int]] = {}
        """Per batch (its first offset), the offsets it was published with (`publish_entry`)."""
        self.batch_run: BatchRun | None = None
        """The batch whose delivery has begun and must go on, delivery after delivery (KS-BKT-10)."""
        self._batch_findings: list[tuple[list[int], explain.Explained]] = []
        """What KS-BKT-10 found in the open op: reported when it closes (entry-split is an end-of-op check)."""
        self._continuing_batch = False
        """True while judging a delivery that continues `batch_run` (exempt from capacity and window, KS-BKT-10)."""
        self.created_in_op: list[int] = []
        """The segments created in the open op: with `layout = "reported"` their layout is judged when it closes."""
        self.layout_findings: list[tuple[list[str], str, list[int]]] = []
        """With `layout = "reported"`, publishes routed to a segment never reported, judged when the op closes."""
        self.loaded_checkpoints: dict[tuple[int, int], tuple[int, int]] = {}
        """With `checkpoint_resume`, the checkpoints the last restart resumed from (KS-BKT-9)."""
        self.bucket_last: dict[tuple[int, int], tuple[int, Incarnation, int]] = {}
        """Per bucket, (epoch, incarnation, seq) of its last delivery (policies other than `sorted`)."""
        self.parking = Parking()
        """With `park_after` set: the parked offsets, which the read bound and the window leave out (KS-ISO-4)."""
        self.withheld_buckets: set[tuple[int, int]] = set()
        """The buckets whose last `bucket_withheld` no `bucket_assigned` has followed (a handoff, KS-BKT-4)."""
        self.bucket_decided: dict[tuple[int, int], tuple[str, int, int]] = {}
        """Per bucket, the target its last `bucket_assigned` or `bucket_withheld` named, that event's seq and epoch."""
        self._buckets_moved: dict[tuple[int, int], set[int]] = {}
        """Per (epoch, segment) begun by a join, the buckets seen moving to the joiner (KS-BKT-8)."""
        self.read_below = 0
        """With `read_trigger = "heartbeat"`: every offset below it has been read (by a tick's dispatch pass, or
        shown by an event naming it): a message at or above it may wait for the next tick's read (KS-GEN-8)."""
        self.persist_due_since: int | None = None
        """With `timer_slack` set: the tick since which an unpersisted change has been due (KS-CUR-5, KS-GEN-9)."""
        self.flush_owed = False
        """With `persist_flush` set: a flush tick passed with the cursor unpersisted, so the next tick's phase 6 (within
        timer_slack) must write it (KS-CUR-12)."""
        self.op: OpState | None = None
        self.closing: int | None = None
        """While the end of an op is judged: its index (a situation of the whole subscription met there is that op's,
        `_exercise_shared`)."""
        self.op_count = 0
        self._expect_ack_class = False
        self._serial = 0
        self._incarnations = 0
        self._timeouts: list[tuple[int, int, int, Delivery]] = []
        self._timer_pushes = 0
        """Pushes onto `_timeouts`: the tie-break of a delivery whose deadline an extension moved (KS-RTY-8)."""
        self._readiness: list[tuple[int, int, int]] = []
        self._disconnected: dict[int, Incarnation] = {}
        """Disconnected members that can be evicted (`evict_after` > 0), until their eviction is due."""
        self._offline: set[int] = set()
        """The incarnation numbers of the members that are disconnected (any, not only the evictable)."""
        self._over_budget: set[int] = set()
        self._poison_reported: set[tuple[int, int]] = set()
        self._idle_heads: set[str] = set()
        self._awaiting_keys: set[str] = set()
        self._blocked_keys: set[str] = set()
        self._holding_keys: set[str] = set()
        """Keys with outstanding deliveries, so no op scans every key."""
        self._outstanding_epochs: Counter[int] = Counter()
        """Outstanding deliveries per epoch they were made in: no op looks for deliveries of an earlier epoch
        (split-owner's situation) while there are none."""
        self._idle_reported: set[tuple[int, int]] = set()
        self.delays_seen = False
        """True once a delayed message (`publish_delayed`) was published: only then do the ordering and idle checks
        look for messages not yet due (KS-ORD-6), so traces without delays are judged as before, as fast."""
        self._delayed: set[int] = set()
        """Offsets of delayed messages that may be unresolved and not yet surely due (pruned as they resolve or fall
        due: `delays_pending`, `_note_delays_due`)."""
        self._phantoms: dict[str, Incarnation] = {}
        """Non-members that received deliveries, one per name until a member of that name joins."""
        self.declared: dict[str, Any] = {}
        """What the implementation declared beyond the config (the config event's `declared`: cursor, outcomes)."""
        self.explicit_ops = False
        self.restarts = 0
        """How many restarts and seeks the trace has had: a message's `ended` deliveries count only within the same
        one."""
        """True when the driver marks every op (the harness): an ack-class effect then never opens an op."""
        self._applies: dict[str, bool] = {}
        self._configure()

    def _configure(self) -> None:
        profiles = requirement_profiles()
        profile = self.config["profile"]
        self.profile = profile
        self.best_effort = profile == "best-effort"
        self.buckets = self.config["selector"] == "buckets"
        self._applies = {kind.name: profile in profiles.get(kind.requirement, ()) for kind in defined()}
        if self.config["out_of_order"]:
            for name in OUT_OF_ORDER_KINDS:  # req: KS-ORD-1, KS-DRN-1 (given up by the declared out_of_order)
                self._applies[name] = False
        self.has_cursor = self.declared.get("cursor", True) is not False
        self.durable_attempts = self.declared.get("durable_attempts") is True
        self.any_selector = self.config["selector"] == "any"
        self.danube_ticks = self.config["tick_order"] == "danube"
        self.returns_as_failures = bool(self.config["returns_as_failures"]) and not self.best_effort
        self.controller_moves = self.buckets and bool(self.config["controller_moves"])
        self.layout_reported = self.buckets and self.config["layout"] == "reported"
        self.max_unacked = 0 if self.best_effort else int(self.config["max_unacked"])
        self.permits = self.config["flow_control"] == "permits"
        self.lookahead = self.config["read_bound"] == "lookahead"
        self.park_after = self.parking.after = int(self.config.get("park_after") or 0)
        self.heartbeat_reads = self.config["read_trigger"] == "heartbeat"
        self.timer_slack = int(self.config["timer_slack"])
        # The config values read at every event, converted once (the config event is the only one that sets them).
        self.ack_timeout = int(self.config["ack_timeout"])
        self.window = int(self.config["window"])
        self.persist_holes = bool(self.config["persist_ack_holes"])
        self.persist_interval = int(self.config["persist_interval"])
        self.persist_on_advance = self.config["persist_trigger"] == "advance" and not self.best_effort
        self.persist_flush = int(self.config["persist_flush"]) if self.persist_on_advance else 0
        if self.persist_on_advance and not self.persist_flush:
            # req: KS-LIV-2 (given up by a declared persist_trigger = advance without a flush: a last move within
            # the interval stays unwritten until the cursor moves again, so an idle cursor may never catch up)
            self._applies["cursor-stall"] = False
        self.slots_by_hash = self.config["drain_granularity"] == "hash" and self.config["selector"] in SLOT_SELECTORS
        self.idle_unjudged = self.best_effort or self.config["selector"] == "pulsar-sticky"
        excluded = (CURSOR_KINDS if not self.has_cursor else frozenset()) | (
            AFFINITY_KINDS if self.any_selector else frozenset()
        )
        # req: KS-FLW-1, KS-FLW-4 (one form of capacity applies), KS-FLW-2 (the window bounds reads unless
        # the look-ahead does, and KS-FLW-5 is not judged)
        excluded |= frozenset({"capacity-overrun"} if self.permits else {"permit-overrun"})
        excluded |= frozenset({"window-overrun"} if self.lookahead else ())
        for name in excluded:
            self._applies[name] = False

    def ancestors_unresolved(self, segment: Segment) -> Iterator[tuple[Segment, Message]]:
        """Each ancestor of `segment` (its predecessors, theirs, ...) once, with each of its unresolved messages."""
        seen: set[int] = set()
        pending = list(segment.predecessors)
        while pending:
            ancestor = self.segments.get(pending.pop())
            if ancestor is None or ancestor.number in seen:
                continue
            seen.add(ancestor.number)
            for offset in ancestor.unresolved:
                yield ancestor, self.message_at(offset)
            pending += ancestor.predecessors

    def index_placement(self, message: Message) -> None:
        """Selector buckets: count a placed, unresolved message among its segment's and its bucket's (none for a
        segment never created; a shard of keys does this for other shards' messages too, sharding/shard.py)."""
        if message.segment is not None and message.bucket is not None and message.segment in self.segments:
            self.segments[message.segment].unresolved.add(message.offset)
            self.bucket_unresolved.setdefault((message.segment, message.bucket), OrderedOffsets()).add(message.offset)

    def unindex_placement(self, message: Message) -> None:
        """Selector buckets: a resolved message leaves its segment's and its bucket's unresolved ones."""
        if message.segment is None:
            return
        segment = self.segments.get(message.segment)
        if segment is not None:
            segment.unresolved.discard(message.offset)
        if message.bucket is not None:
            pending = self.bucket_unresolved.get((message.segment, message.bucket))
            if pending is not None:
                pending.discard(message.offset)

    def message_at(self, offset: int) -> Message:
        """The message at `offset`, whichever key (a shard of keys also holds what the bucket checks read of other
        shards' messages: sharding/shard.py)."""
        return self.messages[offset]

    def applies(self, name: str) -> bool:
        """True if the anomaly's requirement applies to the trace's profile."""
        return self._applies.get(name, False)

    @property
    def verdict(self) -> Verdict:
        """invalid if any MUST anomaly was found, unknown if the trace contradicts itself, else valid."""
        return verdict_of(self.anomalies, undecidable=bool(self.problems))

    def _exercise(self, name: str, count: int = 1) -> None:
        if self._applies.get(name):
            self.exercised[name] += count

    def _report(self, name: str, seq: int, witness: Iterable[int | None], explained: explain.Explained) -> None:
        if not self._applies.get(name, False) or self.problems:
            # After a contradiction the reconstructed state is not trustworthy: judge nothing more.
            return
        let, then, details = explained
        seqs = tuple(sorted({s for s in witness if s is not None}))
        self.anomalies.append(Anomaly(name, seq, seqs, Explanation(tuple(let), then), details))

    def _problem(self, seq: int, message: str) -> None:
        self.problems.append(Problem(seq, message))

    def _exercise_shared(self, name: str, count: int = 1) -> None:
        """Count a situation of the whole subscription (a control event, an op's end, any key at all): judged with
        the keys split into shards, every shard may see it, and the merge counts it once (sharding/merge.py)."""
        if self._applies.get(name):
            self.exercised[name] += count

    # --- facts that span keys: a shard of keys reads them from the subscription's ledger (sharding/shard.py) ----

    def holding(self, incarnation: Incarnation) -> int:
        """How many deliveries the consumer holds (outstanding), of every key."""
        return len(incarnation.outstanding)

    def holding_seqs(self, incarnation: Incarnation) -> list[int]:
        """The seqs of the deliveries the consumer holds, of every key, in order."""
        return sorted(d.seq for d in incarnation.outstanding.values())

    def all_unresolved(self) -> BitMap:
        """Every unresolved offset, of every key (read it, never change it)."""
        return self.unresolved

    def any_unresolved(self) -> bool:
        """True if some message, of any key, is unresolved."""
        return bool(self.unresolved)

    def unresolved_rank(self, offset: int) -> int:
        """How many unresolved offsets, of every key, are at or below `offset`."""
        return self.unresolved.rank(offset)

    def is_unresolved(self, offset: int) -> bool:
        """True if the message at `offset` (of any key) is unresolved."""
        return offset in self.unresolved

    def outstanding_offsets(self) -> list[int]:
        """The offsets of every outstanding delivery, of every key, in order."""
        return sorted(
            {d.offset for m in (*self.members.values(), *self._phantoms.values()) for d in m.outstanding.values()}
        )

    def owns(self, offset: int) -> bool:
        """True if this checker holds the message at `offset` (a shard holds its keys' messages only): a finding
        about one message is reported by the checker that holds it."""
        return True

    def cursor(self) -> int:
        """The smallest unresolved published offset, or the number of published messages."""
        unresolved = self.unresolved
        return unresolved.min() if unresolved else self.messages.published

    def resolved_above_cursor(self) -> BitMap:
        """The ack holes: resolved offsets above the cursor."""
        cursor = self.cursor()
        holes = BitMap()
        if cursor < len(self.messages):
            holes.add_range(cursor + 1, len(self.messages))
            holes -= self.all_unresolved()
        return holes

    def _settle(self) -> None:
        """Archive the messages no rule can change any more unless an event names them again (see MessageLog).

        Below the cursor every message is resolved; below the persisted cursor a restart resumes none of them.
        """
        self.messages.settle(self.settle_limit(), _settled)
        self._rest_keys()
        archived = self.messages.archived_below
        while self.batches:  # a batch whose messages are all archived (resolved) has no mate left to wait for
            first = next(iter(self.batches))
            if self.batches[first][-1] >= archived:
                break
            del self.batches[first]

    def settle_limit(self) -> int:
        """Below this offset every message is resolved for good: below the cursor, and (with a cursor) below the
        persisted one a restart resumes from."""
        limit = self.cursor()
        if self.has_cursor and not self.best_effort:
            limit = min(limit, self.persisted_cursor)
        return limit

    def _key(self, key: str) -> KeyState:
        """The state of a key that has been published, woken from rest if it had nothing left."""
        state = self.keys.get(key)
        if state is None:
            state = self.keys[key] = self._new_key_state(self._resting.pop(key))
            self._emptied.add(key)  # back to rest at the end of the op if nothing is left
        return state

    def _new_key_state(self, last_delivery: tuple[int, Incarnation, int, int | None] | None) -> KeyState:
        """An empty key state with this last delivery: a spare one if there is one (see `_spare_states`)."""
        if self._spare_states:
            state = self._spare_states.pop()
            state.last_delivery = last_delivery
            return state
        return KeyState(last_delivery=last_delivery)

    def _rest_keys(self) -> None:
        """Put to rest the keys left with nothing unresolved, outstanding, awaiting or blocked: their state is
        their last delivery only, so memory follows the keys in use rather than every key ever published."""
        if not self.rest_keys:
            self._emptied.clear()
            return
        keys, resting, spare = self.keys, self._resting, self._spare_states
        for key in self._emptied:
            state = keys.get(key)
            if state is None or state.outstanding or state.awaiting or state.blocked or state.unresolved:
                continue
            resting[key] = state.last_delivery
            del keys[key]
            self._idle_heads.discard(key)
            self._awaiting_keys.discard(key)
            self._blocked_keys.discard(key)
            self._holding_keys.discard(key)
            if not state.undelivered and len(spare) < SPARE_STATES:
                state.last_delivery = None
                spare.append(state)
        self._emptied.clear()

    def _message_of(self, event: Event) -> Message | None:
        """The message an effect names, or None (a problem) when the offset or key cannot be placed."""
        offset = int(event["offset"])
        seq = int(event["seq"])
        message = self.messages.by_offset.get(offset)  # the live ones, at the cost of a dict lookup
        if message is None:
            if not 0 <= offset < self.messages.published:
                self._problem(seq, f"{event['event']} names offset {offset}, which was not published")
                return None
            message = self.messages[offset]
        key = event.get("key")
        if key is not None and key != message.key:
            self._problem(seq, f"{event['event']} of offset {offset} names key {key!r}, but its key is {message.key!r}")
            return None
        message.last_event_seq = seq
        return message

    def _new_epoch(self, change: str, incarnation: Incarnation | None, seq: int) -> None:
        self.epoch += 1
        self.epoch_change[self.epoch] = (change, incarnation, seq)
        if not self.bucket_decided:  # the bucket checks look back to each bucket's last decision (KS-BKT-8)
            self.epoch_change.pop(self.epoch - 2, None)

    def _end_incarnation(self, incarnation: Incarnation, seq: int, returned: bool) -> None:
        """A leave, eviction or restart: the incarnation's deliveries end without resolving their messages."""
        if returned and incarnation.outstanding and not self.best_effort:
            self._exercise_shared("lost")
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
                self._key(message.key).awaiting.add(offset)
                self._awaiting_keys.add(message.key)
            self._refresh_head(message.key)
        incarnation.outstanding.clear()
        incarnation.member = False
        incarnation.ended_seq = seq
        self.members.pop(incarnation.name, None)
        self._disconnected.pop(incarnation.number, None)
        self._offline.discard(incarnation.number)
        self.left[incarnation.name] = seq

    def ended_deliveries(self, message: Message) -> dict[int, str]:
        """The deliveries of a message made and ended since the last restart: the holder's name, by attempt."""
        return message.ended if message.ended is not None and message.ended_in == self.restarts else {}

    def _push_timeout(self, due: int, delivery: Delivery) -> None:
        """Remember that `delivery` must have timed out by tick `due` (its deadline plus the timer slack)."""
        self._timer_pushes += 1
        heapq.heappush(self._timeouts, (due, delivery.serial, self._timer_pushes, delivery))

    def timeout_due(self, delivery: Delivery) -> int:
        """The tick `delivery` times out at: its extended deadline (KS-RTY-8), else its tick plus `ack_timeout`."""
        return delivery.deadline if delivery.deadline is not None else delivery.tick + self.ack_timeout

    def _end_delivery(self, message: Message) -> None:
        delivery = message.outstanding
        if delivery is None:
            return
        message.outstanding = None
        offset, key = message.offset, message.key
        holder = delivery.holder
        ended = message.ended
        if ended is None or message.ended_in != self.restarts:
            ended = message.ended = {}
            message.ended_in = self.restarts
        ended[delivery.attempt] = holder.name
        epochs = self._outstanding_epochs
        epoch = delivery.epoch
        left = epochs[epoch] - 1
        if left:
            epochs[epoch] = left
        else:
            del epochs[epoch]
        outstanding = holder.outstanding
        outstanding.pop(offset, None)
        if self.delta_log is not None:
            self.delta_log.append((self.last_seq, DELIVERY_ENDED, offset, logged_name(holder)))
        if holder.unacked_blocked_seq is not None and self.holding(holder) <= self.max_unacked // 2:
            holder.unacked_blocked_seq = None  # req: KS-FLW-1 (max_unacked: resumed at half the limit)
        state = self.keys.get(key) or self._key(key)
        outstanding = state.outstanding
        outstanding.pop(offset, None)
        if not outstanding:
            self._holding_keys.discard(key)
            self._emptied.add(key)
        if self.park_after:
            self.parking.ended(key, offset, self.last_seq)
        if message.segment is not None and message.bucket is not None:
            self.bucket_outstanding.get((message.segment, message.bucket), {}).pop(offset, None)

    def _retry_due(self, message: Message) -> int:
        base, cap = int(self.config["backoff_base"]), int(self.config["backoff_max"])
        failures = max(self.counted_failures(message), 1)  # with returns_as_failures, returns count here too (KS-RTY-4)
        return message.failure_tick + min(base << min(failures - 1, 64), cap)

    def _fail(self, message: Message, kind: str, seq: int) -> None:
        """A failed delivery (nack or timeout): the message is retrying until its back-off ends (section 10)."""
        state = self._key(message.key)
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
        if self.counted_failures(message) == maximum + 1:
            self._exercise("retry-overrun")
            self._exercise("poison-ignored")
        if self.counted_failures(message) > maximum:
            self._over_budget.add(message.offset)
        self._refresh_head(message.key)

    def controller_moved(self, segment: int | None, bucket: int | None, name: str, since_seq: int) -> bool:
        """Whether the controller handed the bucket to `name` after `since_seq` (KS-BKT-3 with `controller_moves`): a
        move it announced with `bucket_assigned` or `bucket_withheld`, needing no membership change."""
        if not self.controller_moves or segment is None or bucket is None:
            return False
        decided = self.bucket_decided.get((segment, bucket))
        return decided is not None and decided[0] == name and decided[1] > since_seq

    def ended_by_return(self, message: Message) -> bool:
        """Whether the message's last delivery ended by a return (a leave, an eviction, or a restart counted as one):
        under returns_as_failures a return that used up the budget leaves the message free to go again (KS-RTY-6)."""
        return message.returns > 0 and message.returned_delivery_seq == message.last_delivery_seq

    def counted_failures(self, message: Message) -> int:
        """The failures KS-RTY-6 counts: with the declared option `returns_as_failures`, the returns too."""
        return message.failures + (message.returns if self.returns_as_failures else 0)

    def _clear_awaiting(self, message: Message, state: KeyState) -> None:
        message.retrying = False
        message.ready = False
        message.returned = False
        message.awaiting_seq = None
        state.awaiting.discard(message.offset)

    def _resolve_silently(self, message: Message, resolution: str, seq: int) -> None:
        offset, key = message.offset, message.key
        state = self.keys.get(key) or self._key(key)
        message.resolved = True
        message.resolution = resolution
        message.resolution_seq = seq
        message.restored_seq = None
        self.last_resolution_seq = seq
        op = self.op
        if op is not None:
            op.resolved = True
        self.unresolved.discard(offset)
        self.state_version += 1
        if self.delta_log is not None:
            self.delta_log.append((seq, RESOLVED, offset, None))
        state.unresolved.discard(offset)
        self._emptied.add(key)
        if self.park_after:
            self.parking.resolved(key, offset, seq)
        state.undelivered.discard(offset)
        self._clear_awaiting(message, state)
        self._over_budget.discard(offset)
        if offset in state.blocked:
            state.blocked.discard(offset)
            message.blocked = False
        if message.segment is not None:  # (selector buckets only: no call on the common path)
            self.unindex_placement(message)
        self._refresh_head(key)

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
        message.delivered_since_restart = False
        message.retrying = False
        message.ready = False
        message.returned = False
        message.awaiting_seq = None
        message.blocked = False
        message.held = False
        message.last_hold_reason = None

    # --- parked messages (spec section 15, KS-ISO-4: checks/parking.py) ------------------------------------

    def _parked_below(self, offset: int) -> int:
        """How many parked offsets are below `offset`."""
        return self.parking.below(offset) if self.park_after else 0

    def _rebuild_indexes(self) -> None:
        """After a restart: every per-key and per-bucket index from the messages' state."""
        unresolved: dict[str, list[int]] = {}
        for offset in self.unresolved:
            unresolved.setdefault(self.messages[offset].key, []).append(offset)
        for key in unresolved:
            self._key(key)  # a key at rest whose messages the restart restored
        if self.park_after:  # nothing is outstanding after a restart: each key's messages behind P are parked
            self.parking.rebuild(unresolved, self.last_seq)
        for key, state in self.keys.items():
            offsets = unresolved.get(key, [])
            state.unresolved = OrderedOffsets(offsets)
            state.undelivered = OrderedOffsets(offsets)
            state.outstanding = {}
            state.awaiting = set()
            state.blocked = set()
        self.bucket_outstanding = {}
        self.withheld_buckets = set()
        self._outstanding_epochs = Counter()
        self._holding_keys = set()
        self.bucket_unresolved = {}
        for segment in self.segments.values():
            segment.unresolved = OrderedOffsets()
        for offset in self.unresolved:
            self.index_placement(self.messages[offset])
        self._timeouts = []
        self._readiness = []
        self._disconnected = {}
        self._over_budget = set()
        self._idle_heads = set()
        self._awaiting_keys = set()
        self._blocked_keys = set()
        for key in self.keys:
            self._refresh_head(key)

    def not_due(self, message: Message) -> bool:
        """True while a delayed message may still wait for its due tick: before it, or (with `timer_slack = s`) less
        than s ticks after it (KS-ORD-5, KS-GEN-9). Such a message has no place yet in its key's order (KS-ORD-6)."""
        return message.deliver_at is not None and self.now < message.deliver_at + self.timer_slack

    def counts_for_order(self, offset: int) -> bool:
        """True if an unresolved message holds its place in its key's order (KS-ORD-6): it was delivered since the
        last restart, or it is due (surely, the slack past)."""
        message = self.messages[offset]
        return message.delivered_since_restart or not self.not_due(message)

    def delays_pending(self) -> bool:
        """True while some unresolved delayed message is not surely due (a settle keeps waiting for it)."""
        for offset in sorted(self._delayed):
            message = self.messages[offset]
            if message.resolved:
                self._delayed.discard(offset)
            elif self.not_due(message):
                return True
        return False

    def _note_delays_due(self) -> None:
        """At the end of an op: every delayed message that is now surely due (past its due tick and the slack) and
        unresolved is one KS-ORD-7 judges from here on, delivered in this op or not; it is then watched no more."""
        for offset in sorted(self._delayed):
            message = self.messages[offset]
            if message.resolved:
                self._delayed.discard(offset)
            elif not self.not_due(message):
                self._exercise("due-left-waiting")
                self._delayed.discard(offset)

    def _refresh_head(self, key: str) -> None:
        """Keep the set of keys whose earliest unresolved message has no outstanding delivery (KS-ISO-1)."""
        state = self.keys.get(key)  # a key at rest has no head
        if state is not None and state.unresolved:
            head = state.unresolved.min()
            message = self.messages.by_offset.get(head)  # an unresolved message is live: the dict lookup alone
            if (message or self.messages[head]).outstanding is None:
                self._idle_heads.add(key)
                return
        self._idle_heads.discard(key)


def _settled(message: Message) -> bool:
    return message.resolved and message.outstanding is None


def logged_name(holder: Incarnation) -> str:
    """A holder's name in a logged change: a member's own, a non-member's after PHANTOM."""
    return holder.name if holder.member else PHANTOM + holder.name
