"""One shard of keys judged by the trace checker itself: `ShardChecker` is `Checker` fed its keys' events, every
event that names no key, and the boundaries of every op, with the facts that span keys read from the ledger.

What a shard needs besides its own events:
- every op's boundaries (`Op`, read in order through an `OpWindow`, ops.py): the checks at an op's end run for its
  keys at every op, even one all of whose events belong to other shards, since the facts they read (a consumer's
  room, the window) change there;
- the other shards' changes to the facts that span keys (facts.py), applied in seq order as the shard goes (a
  delivery among them also ends a batch's run of deliveries, KS-BKT-10, which must go delivery after delivery);
- who judges the subscription: the first shard alone runs the persistence checks at ops' ends (KS-CUR-5, KS-CUR-10),
  which read nothing but the facts and the cursor's own history;
- with selector `buckets`, the other shards' messages as the bucket checks read them (section 17: a bucket's and a
  segment's unresolved messages, its outstanding deliveries and last owner): every publish is shown to every shard,
  which keeps a shadow of another shard's message (hash, segment, bucket) and follows its deliveries and resolution
  from the ledger's changes through the checker's own functions, judging nothing of it. Segment, handoff and
  checkpoint events name no key, so every shard judges them alike and the merge keeps one finding. What a shard
  cannot see it says (`ShardJudgment.unsharded`: a batch of several shards' keys, whose checks read the other keys'
  states; a delivery to a non-member) and the trace is judged in one process.

A situation of the whole subscription may be counted as exercised by several shards (`_exercise_shared`): each
records where (an op's index or an event's seq) and the merge counts each place once.

Long because the shard checker overrides the checker where it reads what spans keys (the ledger's facts, the ops of
other shards, the shadows of selector buckets), and each override belongs beside the others it must agree with.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import NamedTuple

from pyroaring import BitMap

from ks_conformance.anomalies import Anomaly
from ks_conformance.checker import LAYOUT_EVENTS, Checker, Event
from ks_conformance.checks.changes import (
    DELIVERED,
    DELIVERY_ENDED,
    PARKED,
    PHANTOM,
    PUBLISHED,
    REOPENED,
    RESOLVED,
    SEEKED,
    SHOWN,
    UNPARKED,
)
from ks_conformance.checks.end_of_op import close_op, open_op, tick_phase
from ks_conformance.checks.hooks import END_OF_OP_CHECKS
from ks_conformance.checks.records import Delivery, Incarnation, Message, OpState, Problem
from ks_conformance.checks.state import DANUBE_PHASE_3, logged_name, phase_of
from ks_conformance.rules.buckets import check_bucket_delivery, check_layout, interrupt_batch, place
from ks_conformance.rules.cursor import check_persistence, persisted_and_unmoved
from ks_conformance.rules.isolation import check_idle
from ks_conformance.sharding.facts import NOTHING, Change
from ks_conformance.sharding.ops import OpWindow, table_chunks
from ks_conformance.sharding.proof import Proof

FIRST_SHARD_KINDS = frozenset({"persist-late", "persist-early", "seek-unpersisted"})
"""Anomaly kinds of the persisted cursor's schedule, which the persistence checks at ops' ends keep (KS-CUR-5, KS-CUR-7,
KS-CUR-10): the first shard alone runs those, so only its findings and counts of these kinds are taken."""
TEMPTATIONS = (
    "key-reorder",
    "overtaken-hold",
    "retry-overtaken",
    "blocked-key-leak",
    "split-owner",
    "bucket-split-owner",
)
"""The situations an op's end counts for its keys (count_temptations in checks/end_of_op.py): between two ops of
this shard's keys nothing of theirs changes, so an op with none of their events counts as the op before it did."""

TEMPTATION_POINTS = [(name, True) for name in TEMPTATIONS]
"""Their keys in `ShardJudgment.shared_points`."""
END_OF_CHANGES: Change = (sys.maxsize, -1, -1, None)
"""After the other shards' last change: a seq no event reaches (so a scan of the changes needs one test)."""
END_OF_CHUNK: Change = (sys.maxsize, -1, -1, None)
"""After the last change of a chunk of them in memory (the next chunk is read then): another object than
END_OF_CHANGES, told apart by identity."""
CHUNK = 65536
"""The size of the chunks of other shards' changes `judge_shard` hands its checker (tests make it small)."""


class Op(NamedTuple):
    """One op of the whole trace: the kind of its first event and the seqs of its first and last events."""

    kind: str
    start: int
    end: int


@dataclass
class ShardJudgment:
    """What one shard found: anomalies, problems, counts, and the changes it made to the facts that span keys."""

    anomalies: list[Anomaly]
    problems: list[Problem]
    exercised: dict[str, int]
    """Counts of situations of its own keys (added up over shards)."""
    shared_points: dict[tuple[str, bool], BitMap]
    """Per (kind, at an op's end), where a situation of the whole subscription was met: the op's index, or the seq
    of the event it was met at."""
    shared_counts: dict[tuple[str, bool, int], int] = field(default_factory=dict)
    """Places where such a situation was counted more than once (a tick with several evictions due)."""
    mispredicted: int | None = None
    """None if the shard made exactly the ledger's predicted changes for its keys, else the seq where it did not."""
    unsharded: str | None = None
    """Why the trace must be judged in one process after all, if this shard found a reason (selector buckets: a
    batch of keys of several shards, a delivery to a non-member, another shard's message it no longer holds)."""
    peak_rss: int = 0
    """The peak memory of the process that judged it, in bytes (0 if not measured)."""
    seconds: float = 0.0
    """How long judging it took (0 if not measured)."""


class ShardChecker(Checker):
    """The trace checker of one shard of keys (see the module doc)."""

    def __init__(
        self, ops: OpWindow, foreign: Iterable[list[Change]], predicted: Iterable[Change], first: bool
    ) -> None:
        super().__init__()
        self.ops = ops
        """Every op's kind, first seq and last seq, read in order (the caller loads them as its rows go)."""
        self.proof = Proof(predicted)
        """Proves the ledger's predicted changes for this shard's keys are the ones its checker makes (facts.py)."""
        self.delta_log = self.parking.log = self.proof.made
        self.foreign_source = iter(foreign)
        """The other shards' changes to the facts that span keys, in seq order, a chunk at a time."""
        self.foreign = self.next_chunk()
        """The chunk of them in memory, ending in END_OF_CHUNK (or END_OF_CHANGES after the last)."""
        self.next_foreign = 0
        self.next_change_seq = self.foreign[0][0]
        """The seq of the next of them not yet applied (a seq past every event after the last)."""
        self.judges_subscription = first
        self.own_offsets = BitMap()
        self.foreign_unresolved = BitMap()
        self.foreign_parked = BitMap()
        """With `park_after` set, the other shards' parked offsets (KS-ISO-4)."""
        self.foreign_held: dict[str, dict[int, int]] = {}
        self.points: dict[tuple[str, bool], BitMap] = {}
        self.point_counts: dict[tuple[str, bool, int], int] = {}
        self.current_seq = -1
        """The seq of the event being judged (the place of a shared situation met at an event)."""
        self.op_index = 0
        """The index of the op this shard is in (0 before the first)."""
        self.last_closed = 0
        """The index of the last op whose end this shard judged with its own events (see TEMPTATIONS)."""
        self.tempted: list[str] = []
        """The temptations counted there (see TEMPTATIONS)."""
        self.tempted_at = 0
        """The op `tempted` was read at."""
        self.shown_publishes: dict[int, tuple[Event, int]] = {}
        """Selector buckets: other shards' publishes shown to this shard (with their op's index), until the ledger's
        change of their seq places them (`shadow_publish`), in seq order with every other change."""
        self.shadows: dict[int, Message] = {}
        """Selector buckets: the other shards' messages, as far as the bucket checks read them (hash, segment, bucket,
        outstanding delivery), from their publish (shown to every shard) until they settle below the cursor."""
        self.unsharded: str | None = None
        """Why this trace must be judged in one process after all (see `ShardJudgment.unsharded`), once found."""

    # --- the facts that span keys: this shard's part plus the ledger's ---------------------------------------

    def holding(self, incarnation: Incarnation) -> int:
        return len(incarnation.outstanding) + len(self.foreign_held.get(logged_name(incarnation), ()))

    def holding_seqs(self, incarnation: Incarnation) -> list[int]:
        own = [d.seq for d in incarnation.outstanding.values()]
        return sorted([*own, *self.foreign_held.get(logged_name(incarnation), {}).values()])

    def all_unresolved(self) -> BitMap:
        return self.unresolved | self.foreign_unresolved

    def any_unresolved(self) -> bool:
        return bool(self.unresolved) or bool(self.foreign_unresolved)

    def unresolved_rank(self, offset: int) -> int:
        return self.unresolved.rank(offset) + self.foreign_unresolved.rank(offset)

    def _parked_below(self, offset: int) -> int:
        if not self.park_after or offset <= 0:
            return 0
        return self.parking.parked.rank(offset - 1) + self.foreign_parked.rank(offset - 1)

    def owns(self, offset: int) -> bool:
        return offset in self.own_offsets

    def is_unresolved(self, offset: int) -> bool:
        return offset in self.unresolved or offset in self.foreign_unresolved

    def outstanding_offsets(self) -> list[int]:
        return sorted({*super().outstanding_offsets(), *(o for held in self.foreign_held.values() for o in held)})

    def _message_of(self, event: Event) -> Message | None:
        offset = event.get("offset")
        if offset is not None and offset not in self.messages.by_offset and offset not in self.own_offsets:
            if event["event"] != "publish":  # the router gives a shard only the rows naming its keys' messages
                self._problem(int(event["seq"]), f"{event['event']} names offset {offset}, of another shard's key")
                return None
        return super()._message_of(event)

    def cursor(self) -> int:
        own, foreign = self.unresolved, self.foreign_unresolved
        if own:
            if foreign:
                low, other = own.min(), foreign.min()
                return low if low < other else other
            return own.min()
        return foreign.min() if foreign else self.messages.published

    def message_at(self, offset: int) -> Message:
        shadow = self.shadows.get(offset)
        return shadow if shadow is not None else self.messages[offset]

    def _settle(self) -> None:
        super()._settle()
        if self.shadows:  # (as the checker archives: resolved below the cursor and the persisted one, not held)
            limit = self.settle_limit()
            shadows = self.shadows
            for offset in list(shadows):
                if offset >= limit:
                    break
                if shadows[offset].outstanding is None:
                    del shadows[offset]

    def _rebuild_indexes(self) -> None:
        super()._rebuild_indexes()
        for offset in self.foreign_unresolved if self.shadows else ():
            shadow = self.shadows.get(offset)
            if shadow is not None:
                self.index_placement(shadow)

    def _exercise_shared(self, name: str, count: int = 1) -> None:
        if not self._applies.get(name) or count <= 0:
            return
        at_end = self.closing is not None
        point = self.closing if self.closing is not None else self.current_seq
        if count == 1:
            points = self.points.get((name, at_end))
            if points is None:
                points = self.points[name, at_end] = BitMap()
            points.add(point)
        else:
            self.point_counts[name, at_end, point] = count

    def next_chunk(self) -> list[Change]:
        """The next chunk of the other shards' changes, ending in END_OF_CHUNK, or [END_OF_CHANGES] after the last."""
        for chunk in self.foreign_source:
            if chunk:
                return [*chunk, END_OF_CHUNK]
        return [END_OF_CHANGES]

    def catch_up(self, before: int) -> None:
        """Apply the other shards' changes made before seq `before`."""
        # Written for speed (about one change per call): the sentinel ends the loop; counts are added up once.
        if self.next_change_seq >= before:
            return
        foreign, index = self.foreign, self.next_foreign
        change = foreign[index]
        held = self.foreign_held
        unresolved = self.foreign_unresolved
        op = self.op
        published = resolved = 0
        buckets = self.buckets
        while change[0] < before:
            seq, what, offset, consumer = change
            if what == PUBLISHED:
                unresolved.add(offset)
                published += 1
                if buckets:
                    self.shadow_publish(offset)
            elif what == DELIVERED:
                assert consumer is not None
                if buckets:
                    self.shadow_delivered(seq, offset, consumer)
                mine = held.get(consumer)
                if mine is None:
                    mine = held[consumer] = {}
                mine[offset] = seq
                if self.heartbeat_reads and offset >= self.read_below:
                    self.read_below = offset + 1  # req: KS-GEN-8 (a message named was read, and all before it)
                if self.batch_run is not None:  # req: KS-BKT-10 (a batch goes delivery after delivery)
                    interrupt_batch(self, offset, consumer.removeprefix(PHANTOM), seq)
                member = self.members.get(consumer)  # (the ledger predicts deliveries to members only: a trace
                if member is not None:  # where this checker thinks otherwise has a problem, and is judged whole)
                    if member.permits is not None:
                        member.permits -= 1  # req: KS-FLW-4 (every delivery charges its consumer a permit)
                    if self.max_unacked and member.unacked_blocked_seq is None:
                        if self.holding(member) >= self.max_unacked:
                            member.unacked_blocked_seq = seq  # req: KS-FLW-1 (max_unacked: blocked at the limit)
            elif what == DELIVERY_ENDED:
                assert consumer is not None
                del held[consumer][offset]
                if buckets:
                    self.shadow_ended(offset)
                holder = self.members.get(consumer)
                if holder is not None and holder.unacked_blocked_seq is not None:
                    if self.holding(holder) <= self.max_unacked // 2:
                        holder.unacked_blocked_seq = None  # req: KS-FLW-1 (resumed at half the limit)
            elif what == RESOLVED:
                unresolved.discard(offset)
                resolved += 1
                if buckets:
                    self.shadow_resolved(offset)
                self.last_resolution_seq = seq
                if op is not None and seq >= op.seq:
                    op.resolved = True
            elif what == SHOWN:
                if offset >= self.read_below:
                    self.read_below = offset + 1  # req: KS-GEN-8 (a message named was read, and all before it)
            elif what == REOPENED:
                unresolved.add(offset)  # (a restart or seek counts its state's change once, for all shards)
                if buckets:
                    self.shadow_reopened(offset)
            elif what == SEEKED:
                unresolved.discard(offset)
                self.last_resolution_seq = seq
                if buckets:
                    self.shadow_resolved(offset)
            elif what == PARKED:
                self.foreign_parked.add(offset)
            elif what == UNPARKED:
                self.foreign_parked.discard(offset)
            elif what == NOTHING:
                pass
            else:  # DELAYED
                self.delays_seen = True  # req: KS-ORD-6 (from the first delayed message on, every key looks)
            index += 1
            change = foreign[index]
            if change is END_OF_CHUNK:
                self.foreign = foreign = self.next_chunk()
                index = 0
                change = foreign[0]
        self.next_foreign = index
        self.next_change_seq = change[0]
        if published:
            self.messages.published += published
        self.state_version += published + resolved

    # --- selector buckets: the other shards' messages, as the bucket checks read them --------------------------

    def shadow_publish(self, offset: int) -> None:
        """Another shard's publish, shown to this shard, at its change's turn: its message is placed in its segment and
        bucket as the checker places one (rules/buckets.py), unjudged (its shard judges it)."""
        shown = self.shown_publishes.pop(offset, None)
        if shown is None:  # (the router shows every publish of selector buckets before its change is applied)
            self.unsharded = self.unsharded or f"selector buckets: m{offset}'s publish was not shown to every shard"
            return
        event, op_index = shown
        seq = int(event["seq"])
        shadow = Message(offset, str(event["key"]), seq, op_index, last_event_seq=seq)
        if place(shadow, event):
            self.index_placement(shadow)
        self.shadows[offset] = shadow

    def shadow_delivered(self, seq: int, offset: int, consumer: str) -> None:
        """Another shard's delivery: what the bucket checks keep of it (its bucket's outstanding deliveries, last
        owner and moves), through the checker's own `check_bucket_delivery` with nothing judged or counted."""
        shadow = self.shadows.get(offset)
        incarnation = self.members.get(consumer)
        if shadow is None or incarnation is None:
            self.unsharded = self.unsharded or (
                f"selector buckets: seq {seq} delivers m{offset} to a non-member"
                if incarnation is None
                else f"selector buckets: seq {seq} delivers m{offset}, settled (another shard's message)"
            )
            return
        if shadow.segment is None or shadow.bucket is None:
            return
        if shadow.outstanding is not None:
            self.shadow_ended(offset)
        applies, self._applies = self._applies, {}  # (nothing applies: no finding, no count)
        try:
            check_bucket_delivery(self, shadow, seq, incarnation, consumer)
        finally:
            self._applies = applies
        delivery = Delivery(0, offset, incarnation, 0, self.now, seq, self.epoch)
        shadow.outstanding = delivery
        shadow.delivered_since_restart = True
        self.bucket_outstanding.setdefault((shadow.segment, shadow.bucket), {})[offset] = delivery

    def shadow_ended(self, offset: int) -> None:
        """Another shard's delivery ended."""
        shadow = self.shadows.get(offset)
        if shadow is not None and shadow.outstanding is not None:
            shadow.outstanding = None
            self.bucket_outstanding.get((shadow.segment or 0, shadow.bucket or 0), {}).pop(offset, None)

    def shadow_resolved(self, offset: int) -> None:
        """Another shard's message resolved (or passed by a seek)."""
        shadow = self.shadows.get(offset)
        if shadow is not None:
            self.unindex_placement(shadow)

    def shadow_reopened(self, offset: int) -> None:
        """Another shard's message unresolved again by a restart or seek."""
        shadow = self.shadows.get(offset)
        if shadow is None:
            self.unsharded = self.unsharded or f"selector buckets: m{offset} reopened, settled (another shard's)"
            return
        shadow.outstanding = None
        shadow.delivered_since_restart = False
        self.index_placement(shadow)

    # --- the ops ---------------------------------------------------------------------------------------------

    def feed_routed(self, event: Event, op_index: int, phase_only: bool = False) -> None:
        """Judge one event of this shard, `op_index` being the index of the op it belongs to; or, `phase_only`,
        go through the tick phase of another shard's event (a boundary of its tick's phases, KS-GEN-7)."""
        # Written for speed (it runs once per row): the common cases behind one test each.
        seq = event["seq"]
        if self.created_in_op or self.layout_findings:
            self.layout_ends(seq, str(event["event"]))
        if phase_only and self.buckets and event["event"] == "publish":
            self.shown_publishes[int(event["offset"])] = (event, op_index)  # (placed with its change: catch_up)
            return
        if op_index != self.op_index:
            if op_index == self.op_index + 1 and seq == self.last_seq + 1 and not phase_only:
                # The next op, begun by this event right after this shard's last one: `feed` closes the op before it
                # (whose last event that was) and opens this one, as the whole trace's checker does.
                if self.op is not None:
                    self.last_closed = self.op_index
                self.op_index = op_index
            else:
                self.close_through(op_index - 1)
                self.op_index = op_index
                ops = self.ops
                start = ops.starts[op_index - 1 - ops.base]
                self.op_count = op_index - 1
                if start != seq:  # the op began with another shard's event: open it here
                    self.catch_up(start)
                    self.now = int(event["tick"])
                    open_op(self, ops.kinds[op_index - 1 - ops.base], start)
        if self.next_change_seq < seq:
            self.catch_up(seq)
        self.current_seq = seq
        if phase_only:
            self.pass_phase(event)
            return
        if event["event"] == "publish":
            self.own_offsets.add(event["offset"])
            entry = event.get("entry") if self.buckets else None
            if entry is not None and entry not in self.own_offsets and self.unsharded is None:
                # (a batch spans keys under buckets: the checks of one message read the others' key states)
                self.unsharded = f"selector buckets: seq {seq} publishes a batch of several shards' keys"
        self.feed(event)

    def layout_ends(self, seq: int, kind: str) -> None:
        """Selector buckets: judge the layout reported (KS-BKT-11) where the whole trace's checker does, at the first
        event after the segment events (or after a publish routed by an unreported segment): this row, or another
        shard's row before it (segment events are every shard's, so any row not shown here is none of them)."""
        unseen = seq != self.last_seq + 1
        if (self.created_in_op and (unseen or kind != "segment_created")) or (
            self.layout_findings and (unseen or kind not in LAYOUT_EVENTS)
        ):
            check_layout(self)  # req: KS-BKT-11

    def pass_phase(self, event: Event) -> None:
        """What `feed` does for the tick phase of an effect, for another shard's effect."""
        op = self.op
        if op is None or op.kind != "tick":
            return
        phase = phase_of(event)
        if phase is None:
            return
        if phase == 5 and op.phase <= 3 and event["event"] in DANUBE_PHASE_3 and self.danube_ticks:
            phase = 3  # req: KS-GEN-7 (tick_order danube: phase 3 ends with a deliver step)
        tick_phase(self, event, phase)
        self.last_seq = int(event["seq"])

    def close_through(self, last: int) -> None:
        """Judge the end of the open op and of every later op up to index `last` (each one whole in other shards)."""
        if self.op is not None:
            self.close_open_op(self.op_index)
        first = self.op_index + 1
        if last <= self.op_index:
            return
        self.op_index = last
        if self.tempted_at != self.last_closed:
            self.tempted_at = last_closed = self.last_closed
            points = self.points
            self.tempted = [key[0] for key in TEMPTATION_POINTS if last_closed in points.get(key, ())]
        index = first
        if END_OF_OP_CHECKS or (self._idle_heads and not self.idle_unjudged):
            index = self.pass_foreign_ops(first, last)
        elif self.judges_subscription:
            index = self.pass_persisted_ops(first, last)
        if index <= last:  # the rest have nothing to judge for this shard: only their temptations are counted
            self.pass_unjudged_ops(index, last)

    def pass_unjudged_ops(self, first: int, last: int) -> None:
        """Ops `first` to `last` of other shards at whose ends nothing is judged here: their temptations are this
        shard's last op's (see TEMPTATIONS), and the state is settled if one of them is where settling falls."""
        for name in self.tempted:
            self.points[name, True].add_range(first, last + 1)
        settle_every = self.settle_every
        if last // settle_every * settle_every >= first:
            self._settle()

    def judge_foreign_op(self, index: int, cursor_at_start: int) -> None:
        """What `close_op` judges at the end of the `index`-th op, all of whose events are other shards', for this
        shard's keys and (first shard) the subscription (the op's own checks are its keys' shard's); the other
        shards' changes up to its end are applied with the op open (a resolution in it marks it resolved)."""
        ops = self.ops
        at = index - 1 - ops.base
        op = self.op = OpState(ops.kinds[at], ops.starts[at], index, cursor_at_start)
        end = ops.ends[at]
        if self.next_change_seq <= end:
            self.catch_up(end + 1)
        self.last_seq = end
        self.closing = index
        if self.judges_subscription:
            check_persistence(self, op)
        check_idle(self, op)
        for check in END_OF_OP_CHECKS:
            check(self, op)
        self.op = None
        self.closing = None

    def pass_foreign_ops(self, first: int, last: int) -> int:
        """The ends of ops `first` to `last`, all of whose events are other shards': what `close_op` judges there for
        this shard's keys and (first shard) the subscription; stops where nothing is left to judge, returns where."""
        # Written for speed (once per op of other shards): the ops' fields and the state read once.
        starts, base = self.ops.starts, self.ops.base + 1
        judges = self.judges_subscription
        tempted = [self.points[name, True] for name in self.tempted]
        settle_every = self.settle_every
        for index in range(first, last + 1):
            if not judges and (not self._idle_heads or self.idle_unjudged) and not END_OF_OP_CHECKS:
                return index
            start = starts[index - base]
            if self.next_change_seq < start:
                self.catch_up(start)
            self.op_count = index
            self.judge_foreign_op(index, self.cursor())
            for points in tempted:  # its keys' state is as at the end of this shard's last op (see TEMPTATIONS)
                points.add(index)
            if index % settle_every == 0:
                self._settle()
        return last + 1

    def pass_persisted_ops(self, first: int, last: int) -> int:
        """`pass_foreign_ops` in the first shard when only the persistence checks have something to judge: an op
        that leaves the cursor where it was and persisted is the end of `check_persistence` settled at once."""
        # Written for speed (once per op of other shards in the first shard): `persisted_and_unmoved` is the part
        # of `check_persistence` that judges such an op, which needs no OpState; a run of ops that cannot move the
        # cursor is judged at its last op, as each of its ops would be.
        if self.best_effort or self.persist_holes or self.seek is not None:
            return self.pass_foreign_ops(first, last)
        starts, ends, base = self.ops.starts, self.ops.ends, self.ops.base + 1
        persisted, own, foreign = self.persisted_cursor, self.unresolved, self.foreign_unresolved
        tempted = [self.points[name, True] for name in self.tempted]
        settle_every = self.settle_every
        index = first
        while index <= last:
            start = starts[index - base]
            if self.next_change_seq < start:
                self.catch_up(start)
            cursor = self.cursor()
            if cursor == persisted:
                # The ops that end before any change that may move the cursor all end as this one does: the cursor
                # is this shard's message (no other shard's change moves it: they resolve their own and publish
                # above it), or another's until its resolution (no event of this shard is in these ops).
                if own and own.min() == cursor:
                    stop = last + 1
                else:
                    moves_at = self.cursor_holds_until(cursor) if foreign and foreign.min() == cursor else start
                    stop = bisect_left(ends, moves_at, index - base, last - base + 1) + base
                if stop > index:
                    end = ends[stop - 1 - base]
                    if self.next_change_seq <= end:
                        self.catch_up(end + 1)
                    self.op_count, self.last_seq = stop - 1, end
                    persisted_and_unmoved(self, cursor, self.cursor())
                    self.pass_unjudged_ops(index, stop - 1)
                    index = stop
                    continue
            end = ends[index - base]
            if self.next_change_seq <= end:
                self.catch_up(end + 1)
            self.op_count, self.last_seq = index, end
            if not persisted_and_unmoved(self, cursor, self.cursor()):
                self.judge_foreign_op(index, cursor)  # (caught up already: its end's changes are applied)
            for points in tempted:  # its keys' state is as at the end of this shard's last op (see TEMPTATIONS)
                points.add(index)
            if index % settle_every == 0:
                self._settle()
            index += 1
        return last + 1

    def cursor_holds_until(self, cursor: int) -> int:
        """With the cursor at `cursor`, another shard's message: the seq of the first of the other shards' changes
        in memory that may move it (its message resolved, or one below it reopened); past the chunk in memory, its
        last change's seq (the changes of later seqs are not read yet)."""
        foreign = self.foreign
        for position in range(self.next_foreign, len(foreign)):
            seq, what, offset, _ = foreign[position]
            if (offset == cursor and (what == RESOLVED or what == SEEKED)) or (what == REOPENED and offset < cursor):
                return seq
        return foreign[-2][0] if foreign[-1] is END_OF_CHUNK else sys.maxsize

    def close_open_op(self, index: int) -> None:
        """Judge the end of the open op, the `index`-th, after the other shards' changes within it."""
        end = self.ops.ends[index - 1 - self.ops.base]
        if self.next_change_seq <= end:
            self.catch_up(end + 1)
        self.last_seq = end
        close_op(self)  # (the layout checks `end_op` adds are judged in `layout_ends`)
        self.last_closed = index

    def finish_shard(self) -> ShardJudgment:
        """Judge the ends of the ops left (through the trace's last) and return what the shard found."""
        if self.created_in_op or self.layout_findings:
            self.layout_ends(sys.maxsize, "")
        self.ops.load_all()
        self.close_through(len(self.ops))
        self.finish()
        self.proof.settle(sys.maxsize)  # the changes not yet compared, and any predicted change never made
        mispredicted = self.proof.failed
        self.messages.close()
        return ShardJudgment(
            list(self.anomalies),
            list(self.problems),
            dict(self.exercised),
            self.points,
            self.point_counts,
            mispredicted,
            unsharded=self.unsharded,
        )


def judge_shard(
    rows: Iterable[tuple[Event, int, bool]],
    ops: Sequence[Op],
    foreign: Sequence[Change],
    predicted: Sequence[Change],
    first: bool,
    checker_class: type[ShardChecker] | None = None,
) -> ShardJudgment:
    """Judge one shard's rows (each with its op's index and whether it is shown for its phase only), given every op,
    the other shards' predicted changes and its own (with `checker_class`, a subclass, in tests)."""
    events = ops[-1].end + 1 if ops else 0
    kinds = [op.kind for op in ops]
    window = OpWindow(table_chunks([op.start for op in ops], lambda low, high: kinds[low:high], events), events)
    window.load_all()
    chunks = [list(foreign[low : low + CHUNK]) for low in range(0, len(foreign), CHUNK)]
    checker = (checker_class or ShardChecker)(window, chunks, chain(predicted), first)
    for event, op_index, phase_only in rows:
        checker.feed_routed(event, op_index, phase_only)
    return checker.finish_shard()
