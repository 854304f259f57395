"""The per-key pass: the state of spec/checking.md section 1 for the messages of one key, and the key's anomalies.

A trace's events of one key, in seq order, plus a small global context (incarnations, membership
epochs, restarts with their persisted cursor, quiescent points) are enough to judge everything that
is local to a key. This module is plain Python so that it can be tested without Spark; Spark runs it
on every partition of keys in parallel (`ks_spark.validation.keypass`).

It follows the Python checker (`ks_conformance.checker`) rule for rule on the anomalies it computes,
explains them in the checker's own words (`ks_conformance.explain`), and emits what the global
checks need: each delivery's interval (for capacity) and, per message and restart era, when it
stopped being unresolved and when it was first delivered (window and cursor).

Long because it is one state machine, the per-key state of checking.md section 1 with every per-key rule Spark
computes; issue 14 replaces it by the Python checker's own per-key logic rather than splitting it.
"""

from __future__ import annotations

import bisect
import heapq
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from ks_conformance import explain, rules

NEVER = (1 << 62) - 1
"""A seq later than any event: 'not resolved in this era', 'the incarnation never ended'."""

# Event kinds the per-key pass reads.
(
    PUBLISH,
    DELIVER,
    ACK,
    NACK,
    TIMEOUT,
    DROP,
    DEAD_LETTER,
    FILTER,
    HELD,
    BLOCKED,
    RELEASED,
    SKIPPED,
    ACK_IGNORED,
    NACK_IGNORED,
) = range(14)
KIND_CODES: dict[str, int] = {
    "publish": PUBLISH,
    "deliver": DELIVER,
    "ack": ACK,
    "nack": NACK,
    "timeout": TIMEOUT,
    "drop": DROP,
    "dead_letter": DEAD_LETTER,
    "filter": FILTER,
    "outcome": DROP,  # an implementation-defined outcome resolves its message (its justification: not computed)
    "held": HELD,
    "key_blocked": BLOCKED,
    "key_released": RELEASED,
    "key_skipped": SKIPPED,
    "ack_ignored": ACK_IGNORED,
    "nack_ignored": NACK_IGNORED,
}
KEY_EVENTS = tuple(KIND_CODES)
RESOLUTIONS = {ACK: "acked", DROP: "dropped", DEAD_LETTER: "dead_lettered", FILTER: "filtered"}

# How an incarnation ended.
END_NONE, END_REMOVED, END_EVICTED, END_RESTART = range(4)
NO_INCARNATION = -1

# Rows the pass emits (first field of each output tuple).
ROW_ANOMALY, ROW_INTERVAL, ROW_ERA, ROW_EXERCISED, ROW_CONTRADICTION, ROW_RETURN = range(6)

RETURN_MARK = "@return:"
"""Counter names `@return:<seq>` mark a leave or eviction that returned outstanding deliveries."""
QUIESCENT_MARK = "@quiescent:"
"""Counter names `@quiescent:<seq>` carry the number of messages unresolved at that quiescent point."""

EXPLAINED_PER_KIND = 8
"""Per task and anomaly kind, explanations are rendered only for the anomalies with the smallest seqs."""


@dataclass(frozen=True)
class Incarnation:
    """A consumer name between its `consumer_added` and the event that ended it."""

    inc_id: int
    name: str
    added: int
    capacity: int
    ended: int = NEVER
    end_kind: int = END_NONE
    accepts_all: bool = True  # no filters (or, for pulsar-sticky, this is decided per quiescent point)


@dataclass(frozen=True)
class Restart:
    """A `restart` event and the persisted cursor and holes it resumed from."""

    seq: int
    cursor: int
    holes: tuple[tuple[int, int], ...] = ()

    def persisted(self, offset: int) -> bool:
        """True when the store recorded this offset as resolved (below the cursor or in a hole)."""
        if offset < self.cursor:
            return True
        index = bisect.bisect_right(self.holes, (offset, NEVER)) - 1
        return index >= 0 and self.holes[index][0] <= offset <= self.holes[index][1]


@dataclass
class Context:
    """What every key needs to know about the rest of the trace: small, broadcast to every task.

    `quiescents` lists every quiescent point; unresolved messages are judged only at those in `judged`
    (where a member accepts every key); `active` holds the anomaly names whose requirement applies to
    the profile.
    """

    profile: str
    active: frozenset[str]
    incarnations: dict[str, list[Incarnation]] = field(default_factory=dict)
    epoch_changes: list[int] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    quiescents: list[int] = field(default_factory=list)
    judged: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        self._added = {name: [inc.added for inc in incs] for name, incs in self.incarnations.items()}
        self._restart_seqs = [r.seq for r in self.restarts]
        self.best_effort = self.profile == "best-effort"

    def incarnation(self, consumer: str, seq: int) -> Incarnation | None:
        """The incarnation of `consumer` that is a member at `seq`, if any."""
        added = self._added.get(consumer)
        if not added:
            return None
        index = bisect.bisect_left(added, seq) - 1
        if index < 0:
            return None
        inc = self.incarnations[consumer][index]
        return inc if seq < inc.ended else None

    def epoch(self, seq: int) -> int:
        """The membership epoch at `seq`: how many membership changes happened before it."""
        return bisect.bisect_left(self.epoch_changes, seq)

    def era(self, seq: int) -> int:
        """The restart era at `seq`: how many restarts happened before it."""
        return bisect.bisect_left(self._restart_seqs, seq)


class Message:
    """The checker's state of one message (spec/checking.md section 1)."""

    __slots__ = (
        "alive",
        "awaiting",
        "awaiting_seq",
        "delivered_ever",
        "deliveries",
        "era_end",
        "era_fd",
        "held",
        "hold_reason",
        "hold_seq",
        "last_delivery",
        "last_seq",
        "offset",
        "out_consumer",
        "out_end",
        "out_end_kind",
        "out_epoch",
        "out_inc",
        "out_seq",
        "pub",
        "res_seq",
        "resolution",
        "resolved",
        "restored",
        "returned",
        "returned_delivery",
        "segment",
    )

    def __init__(self, offset: int, pub: int, segment: int = -1) -> None:
        self.offset = offset
        self.pub = pub
        self.segment = segment  # selector `buckets`: the segment it was published to (-1 otherwise)
        self.resolved = False
        self.resolution = ""
        self.res_seq = -1
        self.deliveries = 0
        self.delivered_ever = False
        self.out_inc = NO_INCARNATION
        self.out_seq = -1
        self.out_consumer = ""
        self.out_end = NEVER
        self.out_end_kind = END_NONE
        self.out_epoch = -1
        self.awaiting = False  # retrying after a failure, returned by a leaving holder, or released
        self.awaiting_seq = -1
        self.returned = False
        self.returned_delivery = -1
        self.held = False
        self.hold_reason = ""
        self.hold_seq = -1
        self.last_delivery = -1
        self.last_seq = pub
        self.alive = True  # unresolved at some point of the current era
        self.era_end = NEVER  # when it stopped being unresolved in this era
        self.era_fd = -1  # its first delivery in this era
        self.restored = False  # made unresolved again by a restart, not delivered since (KS-CUR-3)


Row = tuple[object, ...]


class KeyChecker:
    """Judges the events of one key, in seq order, against the per-key anomalies of the catalogue."""

    def __init__(
        self,
        key: str,
        context: Context,
        emit: Callable[[Row], None],
        exercised: dict[str, int],
        explained: dict[str, list[int]],
    ) -> None:
        self.key = key
        self.ctx = context
        self.emit = emit
        self.exercised = exercised
        self.explained = explained
        self.messages: dict[int, Message] = {}
        self.unresolved: dict[int, Message] = {}  # in offset order
        self.outstanding: dict[int, Message] = {}
        self.next_end = NEVER  # earliest end of an incarnation holding an outstanding delivery of this key
        self.restart_index = 0
        self.quiescent_index = 0
        self.era = 0
        self.last_delivery: tuple[int, str, int, int] | None = None  # (epoch, consumer, seq, segment)
        self.blocked: Message | None = None
        self.unique = -2  # incarnation ids for deliveries to non-members: each is its own holder

    # --- reporting -------------------------------------------------------------------------------------

    def _exercise(self, name: str) -> None:
        self.exercised[name] = self.exercised.get(name, 0) + 1

    def _report(
        self, name: str, seq: int, witnesses: list[int], message: Message, explain_it: Callable[[], explain.Explained]
    ) -> None:
        if name not in self.ctx.active:
            return
        smallest = self.explained.setdefault(name, [])  # a max-heap (negated) of the smallest seqs explained
        text = None
        if len(smallest) < EXPLAINED_PER_KIND or seq < -smallest[0]:
            if len(smallest) >= EXPLAINED_PER_KIND:
                heapq.heappop(smallest)
            heapq.heappush(smallest, -seq)
            let, then, details = explain_it()
            text = json.dumps({"let": let, "then": then, "details": details})
        witness = sorted({w for w in witnesses if w is not None and w >= 0})
        self.emit((ROW_ANOMALY, name, seq, witness, self.key, message.offset, text, message.pub, message.last_seq))

    # --- global happenings, applied lazily before each event ----------------------------------------

    def advance(self, seq: int) -> None:
        """Apply every return, restart and quiescent point that happened before `seq`, in order."""
        restarts = self.ctx.restarts
        quiescents = self.ctx.quiescents
        while True:
            next_restart = restarts[self.restart_index].seq if self.restart_index < len(restarts) else NEVER
            next_quiescent = quiescents[self.quiescent_index] if self.quiescent_index < len(quiescents) else NEVER
            upcoming = min(next_restart, next_quiescent, seq)
            if self.next_end < upcoming:
                self._return_deliveries(upcoming)
            if upcoming == seq:
                return
            if next_restart < next_quiescent:
                self._restart(restarts[self.restart_index])
                self.restart_index += 1
            else:
                self._quiescent(next_quiescent)
                self.quiescent_index += 1

    def finish(self) -> None:
        """Apply what remains after the key's last event, and emit the per-era rows."""
        self.advance(NEVER)
        self._emit_eras()
        for message in self.outstanding.values():
            self.emit((ROW_INTERVAL, message.out_inc, message.out_seq, None, message.out_consumer, message.offset))

    def _return_deliveries(self, before: int) -> None:
        """Deliveries whose holder left or was evicted before `before` end; their messages are returned (KS-MEM-1)."""
        ended = sorted((m for m in self.outstanding.values() if m.out_end < before), key=lambda m: m.out_end)
        for message in ended:
            left = message.out_end
            returned = message.out_end_kind in (END_REMOVED, END_EVICTED)
            delivery_seq = message.out_seq
            self._end_delivery(message, left)
            if returned and not self.ctx.best_effort:
                self.exercised[f"{RETURN_MARK}{left}"] = 1
                if not message.resolved:
                    message.returned = True
                    message.returned_delivery = delivery_seq
                    message.awaiting = True
                    message.awaiting_seq = left
        self.next_end = min((m.out_end for m in self.outstanding.values()), default=NEVER)

    def _end_delivery(self, message: Message, seq: int) -> None:
        if message.out_seq < 0:
            return
        self.emit((ROW_INTERVAL, message.out_inc, message.out_seq, seq, message.out_consumer, message.offset))
        message.out_inc = NO_INCARNATION
        message.out_seq = -1
        message.out_end = NEVER
        message.out_consumer = ""
        self.outstanding.pop(message.offset, None)

    def _restart(self, restart: Restart) -> None:
        """A restart ends every delivery and resets volatile state; unpersisted resolutions are undone."""
        for message in list(self.outstanding.values()):
            self._end_delivery(message, restart.seq)
        self.next_end = NEVER
        self._emit_eras()
        self.era += 1
        unresolved: dict[int, Message] = {}
        for offset, message in self.messages.items():
            message.deliveries = 0
            message.awaiting = False
            message.awaiting_seq = -1
            message.returned = False
            message.held = False
            message.hold_reason = ""
            message.era_fd = -1
            message.era_end = NEVER
            if message.resolved and restart.persisted(offset):
                message.alive = False
                message.era_end = -1
            else:
                message.alive = True
                if message.resolved:
                    message.resolved = False
                    message.resolution = ""
                    message.res_seq = -1
                    message.restored = True
                unresolved[offset] = message
        self.unresolved = dict(sorted(unresolved.items()))
        self.blocked = None

    def _emit_eras(self) -> None:
        for message in self.messages.values():
            if message.alive or message.era_fd >= 0:
                end = message.era_end if message.alive else -1
                fd = message.era_fd if message.era_fd >= 0 else None
                self.emit((ROW_ERA, self.era, message.offset, end, fd, message.pub, self.key))

    def _quiescent(self, seq: int) -> None:
        """At a quiescent point every published message must be resolved (KS-MEM-1, KS-DRN-2, KS-LIV-1)."""
        key = self.key
        count = 0
        for message in self.unresolved.values():
            if message.pub >= seq:
                break
            count += 1
        if count:
            marker = f"{QUIESCENT_MARK}{seq}"
            self.exercised[marker] = self.exercised.get(marker, 0) + count
        if seq not in self.ctx.judged:
            return
        for message in self.unresolved.values():
            if message.pub >= seq:
                break
            offset, pub = message.offset, message.pub
            if message.restored:
                continue  # restart-skip (KS-CUR-3), the one-task pass's kind, judges it, as the checker does
            if message.returned and not self.outstanding and self.blocked is None:
                # req: KS-MEM-1 (a message of its key outstanding or blocked holds it back: stuck-key, KS-POI-3; so does
                # a member without room that accepts the key, which the driver judges: globalchecks.lost_held_back)
                left = message.awaiting_seq
                self._report(
                    "lost",
                    seq,
                    [message.returned_delivery, left, seq],
                    message,
                    partial(rules.leaving.lost, key, offset, pub, left, seq),
                )
            elif message.hold_reason == "draining":
                # req: KS-DRN-2
                hold = message.hold_seq
                self._report(
                    "drain-stuck",
                    seq,
                    [hold, seq],
                    message,
                    partial(rules.draining.drain_stuck, key, offset, pub, hold, seq),
                )
            else:
                # req: KS-LIV-1
                last = message.last_seq
                self._report(
                    "stuck-key",
                    seq,
                    [pub, last, seq],
                    message,
                    partial(rules.liveness.stuck_key, key, offset, pub, last, seq),
                )

    # --- events of the key ---------------------------------------------------------------------------

    def event(self, seq: int, kind: int, offset: int, consumer: str, reason: str, segment: int = -1) -> None:
        """Apply one event of this key (its seq is larger than every event applied before)."""
        self.advance(seq)
        if kind == PUBLISH:
            message = Message(offset, seq, segment)
            self.messages[offset] = message
            self.unresolved[offset] = message
            return
        if kind == RELEASED:
            if self.blocked is not None:
                released = self.blocked
                self.blocked = None
                released.awaiting = True
                released.awaiting_seq = seq
                released.last_seq = seq
            else:
                self.emit((ROW_CONTRADICTION, seq, f"key {self.key!r} was released but is not blocked"))
            return
        if kind == SKIPPED:
            if self.blocked is None:
                self.emit((ROW_CONTRADICTION, seq, f"key {self.key!r} was skipped but is not blocked"))
            return
        found = self.messages.get(offset)
        if found is None:
            if kind == ACK_IGNORED:
                self._exercise("stale-ack-accepted")
            if kind not in (ACK_IGNORED, NACK_IGNORED) or reason != "unknown-offset":
                self.emit((ROW_CONTRADICTION, seq, f"an event of offset {offset} names key {self.key!r}, not its key"))
            return
        message = found
        message.last_seq = seq
        if kind == DELIVER:
            self._deliver(message, seq, consumer)
        elif kind == ACK:
            self._ack(message, seq, consumer)
        elif kind == NACK:
            if not message.resolved:
                self._fail(message, seq)
        elif kind == TIMEOUT:
            if message.out_seq >= 0 and message.out_consumer == consumer and not message.resolved:
                self._fail(message, seq)
        elif kind in RESOLUTIONS:
            self._resolve(message, seq, RESOLUTIONS[kind])
        elif kind == HELD:
            message.held = True
            message.hold_reason = reason
            message.hold_seq = seq
            if reason == "draining":
                self._exercise("drain-stuck")
        elif kind == ACK_IGNORED:
            inc = self.ctx.incarnation(consumer, seq)
            if not (message.out_seq >= 0 and inc is not None and message.out_inc == inc.inc_id):
                self._exercise("stale-ack-accepted")
        elif kind == NACK_IGNORED:
            return
        elif kind == BLOCKED:
            message.awaiting = False
            message.returned = False
            message.awaiting_seq = -1
            self.blocked = message

    def _fail(self, message: Message, seq: int) -> None:
        self._end_delivery(message, seq)
        message.awaiting = True
        message.returned = False
        message.awaiting_seq = seq

    def _deliver(self, message: Message, seq: int, consumer: str) -> None:
        ctx = self.ctx
        exercise = self._exercise
        key = self.key
        inc = ctx.incarnation(consumer, seq)
        if inc is not None:
            inc_id = inc.inc_id
        else:
            inc_id = self.unique
            self.unique -= 1
        first = message.deliveries == 0
        offset = message.offset
        pub = message.pub
        # One pass over the earlier unresolved messages of the key (usually none or one).
        earlier_unresolved: Message | None = None
        earlier_undelivered: Message | None = None
        earlier_held: Message | None = None
        earlier_awaiting: Message | None = None
        any_held = False
        for other in self.unresolved.values():
            if other.offset >= offset:
                break
            if earlier_unresolved is None:
                earlier_unresolved = other
            if other.held:
                any_held = True
            if other.deliveries == 0:
                if earlier_undelivered is None:
                    earlier_undelivered = other
                if earlier_held is None and other.held:
                    earlier_held = other
            if earlier_awaiting is None and other.awaiting:
                earlier_awaiting = other
        # Ordering (KS-ORD-1, KS-FLW-3, KS-ORD-2, KS-ORD-3).
        if first and earlier_unresolved is not None:
            exercise("key-reorder")
            if any_held:
                exercise("overtaken-hold")
            if earlier_undelivered is not None:
                # req: KS-ORD-1
                e = earlier_undelivered
                self._report(
                    "key-reorder",
                    seq,
                    [e.pub, pub, seq],
                    message,
                    lambda: rules.ordering.key_reorder(key, offset, pub, e.offset, e.pub, seq),
                )
                if earlier_held is not None:
                    # req: KS-FLW-3
                    h = earlier_held
                    self._report(
                        "overtaken-hold",
                        seq,
                        [h.hold_seq, pub, seq],
                        message,
                        lambda: rules.flow.overtaken_hold(key, offset, pub, h.offset, h.pub, h.hold_seq, seq),
                    )
        if len(self.unresolved) - (1 if offset in self.unresolved else 0) > 0:
            exercise("strict-overlap")
        if earlier_unresolved is not None:
            # req: KS-ORD-2
            u = earlier_unresolved
            self._report(
                "strict-overlap",
                seq,
                [u.pub, seq],
                message,
                lambda: rules.ordering.strict_overlap(key, offset, pub, u.offset, u.pub, seq),
            )
        if earlier_awaiting is not None:
            exercise("retry-overtaken")
            # req: KS-ORD-3
            w = earlier_awaiting
            self._report(
                "retry-overtaken",
                seq,
                [w.awaiting_seq, seq],
                message,
                lambda: rules.ordering.retry_overtaken(key, offset, pub, w.offset, w.pub, w.awaiting_seq, seq),
            )
        # One holder per key (KS-DRN-1).
        epoch = ctx.epoch(seq)
        if self.outstanding:
            holder: Message | None = None
            moved = False
            for other in self.outstanding.values():
                if other.out_epoch < epoch:
                    moved = True
                if holder is None and other.out_inc != inc_id:
                    holder = other
            if moved:
                exercise("split-owner")
            if holder is not None:
                # req: KS-DRN-1
                o = holder
                self._report(
                    "split-owner",
                    seq,
                    [o.out_seq, seq],
                    message,
                    lambda: rules.draining.split_owner(
                        key, offset, pub, o.offset, o.out_consumer, o.out_seq, consumer, seq
                    ),
                )
        # No delivery without a reason (KS-RES-2).
        if message.delivered_ever:
            exercise("duplicate")
        if message.resolved:
            # req: KS-RES-2
            resolution, res_seq = message.resolution, message.res_seq
            self._report(
                "duplicate",
                seq,
                [res_seq, seq],
                message,
                lambda: rules.resolutions.duplicate_resolved(key, offset, pub, resolution, res_seq, seq),
            )
        elif message.out_seq >= 0:
            out_consumer, out_seq = message.out_consumer, message.out_seq
            self._report(
                "duplicate",
                seq,
                [out_seq, seq],
                message,
                lambda: rules.resolutions.duplicate_outstanding(key, offset, pub, out_consumer, out_seq, seq),
            )
        # One target per key per epoch (KS-ASN-1).
        last = self.last_delivery
        # under `buckets` each segment has its own N, so its own bucket and target (KS-BKT-3): compare within one
        if last is not None and last[0] == epoch and last[3] == message.segment:
            exercise("key-moved")
            if last[1] != consumer:
                # req: KS-ASN-1
                previous, previous_seq = last[1], last[2]
                self._report(
                    "key-moved",
                    seq,
                    [previous_seq, seq],
                    message,
                    lambda: rules.assignment.key_moved(key, offset, pub, previous, previous_seq, consumer, seq),
                )
        # The delivery itself.
        if message.out_seq >= 0:
            self._end_delivery(message, seq)
        message.deliveries += 1
        message.restored = False
        message.delivered_ever = True
        message.last_delivery = seq
        message.out_inc = inc_id
        message.out_seq = seq
        message.out_consumer = consumer
        message.out_epoch = epoch
        message.out_end = inc.ended if inc is not None else NEVER
        message.out_end_kind = inc.end_kind if inc is not None else END_NONE
        message.awaiting = False
        message.awaiting_seq = -1
        message.returned = False
        if message.era_fd < 0:
            message.era_fd = seq
        self.outstanding[offset] = message
        if message.out_end < self.next_end:
            self.next_end = message.out_end
        self.last_delivery = (epoch, consumer, seq, message.segment)
        if ctx.best_effort and not message.resolved:
            self._resolve_silently(message, seq, "delivered")

    def _ack(self, message: Message, seq: int, consumer: str) -> None:
        inc = self.ctx.incarnation(consumer, seq)
        holds = message.out_seq >= 0 and inc is not None and message.out_inc == inc.inc_id
        if self.ctx.best_effort:
            if holds:
                self._end_delivery(message, seq)
            return
        if not holds:
            self._exercise("stale-ack-accepted")
            # req: KS-ACK-2
            key, offset, pub = self.key, message.offset, message.pub
            last = message.last_delivery if message.last_delivery >= 0 else None
            holder = message.out_consumer if message.out_seq >= 0 else None
            holder_seq = message.out_seq
            self._report(
                "stale-ack-accepted",
                seq,
                [message.last_delivery, seq],
                message,
                lambda: rules.acks.stale_ack_accepted(key, offset, pub, last, holder, holder_seq, consumer, seq),
            )
        self._resolve(message, seq, "acked")

    def _resolve(self, message: Message, seq: int, resolution: str) -> None:
        if message.resolved:
            if message.resolution == "delivered":
                message.resolution = resolution
            return
        self._end_delivery(message, seq)
        self._resolve_silently(message, seq, resolution)

    def _resolve_silently(self, message: Message, seq: int, resolution: str) -> None:
        message.resolved = True
        message.restored = False
        message.resolution = resolution
        message.res_seq = seq
        message.awaiting = False
        message.returned = False
        message.awaiting_seq = -1
        if self.blocked is message:
            self.blocked = None
        if message.alive and message.era_end == NEVER:
            message.era_end = seq
        self.unresolved.pop(message.offset, None)


class KeyStream:
    """Feeds rows sorted by (key, seq) to one KeyChecker per key; a key may span several `feed` calls."""

    def __init__(self, context: Context, emit: Callable[[Row], None], exercised: dict[str, int]) -> None:
        self.context = context
        self.emit = emit
        self.exercised = exercised
        self.explained: dict[str, list[int]] = {}
        self.checker: KeyChecker | None = None

    def feed(self, rows: Iterable[tuple[str, int, str, int | None, str | None, str | None, int | None]]) -> None:
        """Apply (key, seq, event, offset, consumer, reason, segment) rows."""
        checker = self.checker
        codes = KIND_CODES
        for key, seq, event, offset, consumer, reason, segment in rows:
            if checker is None or checker.key != key:
                if checker is not None:
                    checker.finish()
                checker = KeyChecker(key, self.context, self.emit, self.exercised, self.explained)
                self.checker = checker
            checker.event(
                seq,
                codes[event],
                offset if offset is not None else -1,
                consumer or "",
                reason or "",
                segment if segment is not None else -1,
            )

    def close(self) -> None:
        """Finish the last key."""
        if self.checker is not None:
            self.checker.finish()
            self.checker = None


def check_sorted_events(
    rows: Iterable[tuple[str, int, str, int | None, str | None, str | None, int | None]],
    context: Context,
    emit: Callable[[Row], None],
    exercised: dict[str, int],
) -> None:
    """Run the per-key pass over (key, seq, event, offset, consumer, reason, segment) rows sorted by (key, seq)."""
    stream = KeyStream(context, emit, exercised)
    stream.feed(rows)
    stream.close()
