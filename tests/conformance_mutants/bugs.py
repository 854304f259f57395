"""The bugs themselves: each class is the reference dispatcher (or adapter) with one rule broken.

Each docstring's first line says what is wrong in the words a broker team would use; the comment
at the change names the requirement it breaks. Nothing here is imported by the reference.

The `@mutant(...)` above a broken class registers it: its name, the requirement IDs the suite must
catch it on (`warns`, `may`), and the capability slice it runs with (slices.py, or capabilities as
keywords); the comments above say why. `MUTANTS` lists the registrations in the order of this file.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Mapping
from typing import Any

from ks_reference.adapter import ReferenceAdapter
from ks_reference.buckets import BucketLayout, Placement, Segment
from ks_reference.core import Member, Message, MessageState
from ks_reference.cursor import Cursor
from ks_reference.dispatch import Decision
from ks_reference.dispatcher import Dispatcher, Outcome
from ks_reference.filters import accepts
from ks_reference.selectors import PartitionsSelector
from ks_reference.store import MemoryStore
from ks_spec.config import CONFIG_DEFAULTS
from pyroaring import BitMap64

from conformance_mutants.registry import mutant
from conformance_mutants.slices import (
    ACK_BY_ID,
    BASE,
    BUCKETS,
    CHECKPOINTS,
    DELAYED,
    EXTENSIONS,
    FLUSHED,
    GROWING,
    HEARTBEAT_READS,
    KEY_BATCH_PERMITS,
    KEY_BATCHES,
    LOOKAHEAD,
    ON_ADVANCE,
    OWNER,
    PARKING,
    PERMITS,
    RING,
    SEEK,
    SEEK_DEBOUNCED,
    SHARED_NAMES,
    SLACK_OF_ONE,
    STRICT,
    ZOMBIES,
)

# --- ordering (section 6) -------------------------------------------------------------------------


class _OwnerOrderBug(Dispatcher):
    """Base: the owner profile's per-key loop, with a hook choosing the order messages are visited in."""

    def visit_order(self, key: str, queue: list[int]) -> list[int]:
        return queue

    def deliver_key(self, key: str) -> None:
        queue = list(self.queues.get(key, ()))
        for offset in self.visit_order(key, queue):
            message = self.messages.get(offset)
            if message is None or message.state is MessageState.OUTSTANDING:
                continue
            if message.state is not MessageState.PENDING:
                return
            if self.dispatch_message(message) in ("held", "waits"):
                return


def _fresh(messages: list[Message]) -> bool:
    """True when none of these messages failed, was returned or is blocked (only first deliveries are due)."""
    return all(
        m.state in (MessageState.PENDING, MessageState.OUTSTANDING) and not m.awaiting_redelivery for m in messages
    )


# visiting a key newest first, a message that waits beyond the window (with parking, spec section 15) stops the key
# before its older messages are visited: idle (ISO-1) or unfiltered (FLT-3), or, for a message a restart restored,
# restart-skip (CUR-3)
@mutant("newest_first", "KS-ORD-1", may="KS-ISO-1 KS-FLT-3 KS-CUR-3", **OWNER, **RING)
class NewestFirst(_OwnerOrderBug):
    """Messages queued behind a key's held head are sent newest first once the head goes (a LIFO backlog)."""

    def visit_order(self, key: str, queue: list[int]) -> list[int]:
        messages = [self.messages[o] for o in queue]
        if not _fresh(messages):
            return queue
        held = [m.offset for m in messages if m.held is not None]
        backlog = [m.offset for m in messages if m.held is None]
        return held + backlog[::-1]  # breaks KS-ORD-1 (a held message itself is never overtaken)


# overtaken-hold is a key-reorder of a held message: both are reported at the delivery (and, as newest_first, a
# message a restart restored may wait: restart-skip)
@mutant("held_overtaken", "KS-ORD-1 KS-FLW-3", may="KS-ISO-1 KS-FLT-3 KS-CUR-3", **OWNER, **RING)
class HeldOvertaken(_OwnerOrderBug):
    """Once a key's message has been held, the newest message of the key goes first when room frees."""

    def visit_order(self, key: str, queue: list[int]) -> list[int]:
        messages = [self.messages[o] for o in queue]
        if _fresh(messages) and any(m.held is not None for m in messages):
            return queue[::-1]  # breaks KS-FLW-3
        return queue


@mutant("strict_pipelines", "KS-ORD-2", **STRICT, **RING)
class StrictPipelines(Dispatcher):
    """The strict profile pipelines a key like the owner profile: the next message goes before the ack."""

    def first_candidate(self, key: str) -> int | None:
        if key in self.blocked:
            return None
        for offset in self.queues[key]:
            state = self.messages[offset].state
            if state is MessageState.PENDING:
                return offset
            if state is not MessageState.OUTSTANDING:
                return None
        return None

    def deliver_key(self, key: str) -> None:
        for offset in list(self.queues.get(key, ())):
            message = self.messages.get(offset)
            if message is None or message.state is MessageState.OUTSTANDING:
                continue  # breaks KS-ORD-2
            if message.state is not MessageState.PENDING:
                return
            if self.dispatch_message(message) in ("held", "waits"):
                return


@mutant("retry_behind", "KS-ORD-3", **BASE)
class RetryBehind(_OwnerOrderBug):
    """A message waiting out its retry back-off does not stop later messages of its key."""

    def first_candidate(self, key: str) -> int | None:
        if key in self.blocked:
            return None
        for offset in self.queues[key]:
            state = self.messages[offset].state
            if state is MessageState.PENDING:
                return offset
            if state is MessageState.BLOCKED:
                return None
        return None

    def deliver_key(self, key: str) -> None:
        for offset in list(self.queues.get(key, ())):
            message = self.messages.get(offset)
            if message is None or message.state in (MessageState.OUTSTANDING, MessageState.RETRYING):
                continue  # breaks KS-ORD-3 (a retrying message is passed over)
            if message.state is not MessageState.PENDING:
                return
            if self.dispatch_message(message) in ("held", "waits"):
                return


# --- draining (section 7) -------------------------------------------------------------------------


@mutant("no_draining", "KS-DRN-1", **BASE)
class NoDraining(Dispatcher):
    """A key's new owner is served at once, before the old owner acked what it holds."""

    def decide(self, message: Message) -> Decision:
        holders = self.key_holders.pop(message.key, None)  # breaks KS-DRN-1: the holders are not consulted
        try:
            return super().decide(message)
        finally:
            if holders is not None:
                self.key_holders[message.key] = holders


# messages stuck behind the drain are idle (ISO-1); at quiescence they are drain-stuck (DRN-2), and what a
# leave returned into the stuck key is lost (MEM-1) or stuck (LIV-1), what a restart brought back restart-skip
@mutant("drain_never_clears", "KS-ISO-1", may="KS-DRN-2 KS-LIV-1 KS-MEM-1 KS-CUR-3", **BASE)
class DrainNeverClears(Dispatcher):
    """A key that once drained stays marked draining: its messages wait forever."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ever_drained: set[str] = set()
        super().__init__(*args, **kwargs)

    def decide(self, message: Message) -> Decision:
        decision = super().decide(message)
        if decision.reason == "draining":
            self.ever_drained.add(message.key)
        elif message.key in self.ever_drained and decision.action == "deliver":
            target = decision.member.name if decision.member else None
            return Decision("hold", reason="draining", target=target)  # breaks KS-DRN-2
        return decision


# --- assignment (section 4) and filters (section 5) -----------------------------------------------


# routing by offset moves keys within an epoch (ASN-1) and across a join to old members (ASN-2)
@mutant("per_message_routing", "KS-ASN-1 KS-ASN-2", **BASE)
class PerMessageRouting(Dispatcher):
    """Each message is routed by its offset as well as its key, so a key's messages spread over consumers."""

    routing_salt = 0

    def decide(self, message: Message) -> Decision:
        self.routing_salt = message.offset
        return super().decide(message)

    def target_name(self, key: str, placement: Placement | None) -> str | None:
        eligible = self.eligible(key)
        if eligible == ():
            return None
        return self.selector.target(f"{key}#{self.routing_salt % 3}", eligible)  # breaks KS-ASN-1


@mutant("modulo_ring", "KS-ASN-2", **BASE, ops=GROWING)
class ModuloRing(Dispatcher):
    """The "ring" picks `members[hash % n]`: every membership change moves keys between old members."""

    def target_name(self, key: str, placement: Placement | None) -> str | None:
        eligible = self.eligible(key)
        names = sorted(self.members) if eligible is None else sorted(eligible)
        if not names:
            return None
        return names[self.selector.position(key) % len(names)]  # breaks KS-ASN-2


class RebalancingPartitions(PartitionsSelector):
    """Partitions that rebalance on a join, Kafka-style: the joiner takes partitions from the busiest members."""

    def add(self, member: str, ranges: Any = ()) -> None:
        super().add(member, ranges)
        while True:
            held = {m: [p for p, h in sorted(self._active.items()) if h == m] for m in self._members}
            busiest = max(self._members, key=lambda m: len(held[m]))
            if len(held[busiest]) - len(held[member]) <= 1:
                return
            self._active[held[busiest][-1]] = member  # breaks KS-ASN-2 (under partitions a joiner takes none)


# a Kafka-style rebalance on a join is a move to the joiner: allowed for a ring, not under partitions
@mutant("partitions_rebalanced_on_join", "KS-ASN-2", **{**BASE, "selectors": ["partitions"]}, ops=GROWING)
class PartitionsRebalancedOnJoin(Dispatcher):
    """Selector `partitions` gives a joiner partitions of present members (a move to a joiner: fine for a ring)."""

    def load_from_store(self) -> None:
        super().load_from_store()
        if self.config.selector == "partitions":
            self.selector = RebalancingPartitions(self.config.partitions)


# a key routed to a consumer that refuses it can leave an accepting consumer idle (ISO-1)
@mutant("filters_ignored", "KS-FLT-2", may="KS-ISO-1", **BASE)
class FiltersIgnoredInRouting(Dispatcher):
    """A key goes to its ring target among all consumers, whether or not that consumer's filters accept it."""

    def target_name(self, key: str, placement: Placement | None) -> str | None:
        if self.eligible(key) == ():
            return None
        return self.selector.target(key, None)  # breaks KS-FLT-2


@mutant("target_filters", "KS-FLT-3", **BASE)
class FilterByRingTarget(Dispatcher):
    """A message is filtered out when its ring target does not accept it, even if another consumer would."""

    def decide(self, message: Message) -> Decision:
        if self.members:
            target = self.selector.target(message.key, None)
            member = self.members.get(target) if target is not None else None
            if member is not None and member.filters and not accepts(member.filters, message.key):
                return Decision("filter")  # breaks KS-FLT-3
        return super().decide(message)


@mutant("filter_when_empty", "KS-FLT-4", **BASE)
class FilterWithoutMembers(Dispatcher):
    """With no consumer at all, messages are resolved as filtered instead of waiting for one."""

    def decide(self, message: Message) -> Decision:
        if not self.members:
            return Decision("filter")  # breaks KS-FLT-4
        return super().decide(message)


# --- flow control (section 8) ---------------------------------------------------------------------


# under permits (the KS-FLW-4 vector's configuration) ignoring the room check overdraws permits as well
@mutant("capacity_ignored", "KS-FLW-1", may="KS-FLW-4", **BASE)
class CapacityIgnored(Dispatcher):
    """A consumer's capacity (its permits) is never checked."""

    def decide(self, message: Message) -> Decision:
        decision = super().decide(message)
        if decision.reason == "capacity" and decision.target is not None:
            return Decision("deliver", member=self.members[decision.target])  # breaks KS-FLW-1
        return decision


@mutant("window_overread", "KS-FLW-2", **BASE)
class WindowOverread(Dispatcher):
    """The read window is checked after reading, so one message more than `window` is read."""

    def read_into_window(self) -> None:
        window = self.config.window
        object.__setattr__(self.config, "window", window + 1)  # breaks KS-FLW-2
        try:
            super().read_into_window()
        finally:
            object.__setattr__(self.config, "window", window)


@mutant("permits_overdrawn", "KS-FLW-4", **PERMITS)
class PermitsOverdrawn(Dispatcher):
    """Under permits, a consumer whose permits are used up is still sent one more message."""

    def has_room(self, member: Member) -> bool:
        if self.config.flow_control == "permits":
            return member.permits > -1  # breaks KS-FLW-4: one delivery beyond the grants
        return super().has_room(member)


# the unread message is idle while fewer than L wait: judged through idle-while-ready (KS-ISO-1); with L = 1
# nothing is ever read, so it also stays stuck (LIV-1), unfiltered (FLT-3) and unread after a restart (CUR-3)
@mutant("lookahead_stops_early", "KS-ISO-1", may="KS-LIV-1 KS-FLT-3 KS-CUR-3", **LOOKAHEAD)
class LookaheadStopsEarly(Dispatcher):
    """Under the look-ahead bound, reading stops one waiting message before the limit."""

    def read_budget(self) -> int:
        budget = super().read_budget()
        if self.config.read_bound == "lookahead":
            return budget - 1  # breaks KS-ISO-3: reads stop while fewer than L messages wait
        return budget


# the unread message is idle while the window, parked messages aside, has room: idle-while-ready (KS-ISO-1),
# or unfiltered-wait (KS-FLT-3) when no member accepts its key
@mutant("parking_ignored", "KS-ISO-1", may="KS-FLT-3", **PARKING)
class ParkingIgnored(Dispatcher):
    """Declares parking, but counts the parked messages toward the read bound as if parking were off."""

    def is_parked(self, index: int, message: Message) -> bool:
        return False  # breaks KS-ISO-4: a stuck key's backlog fills the window again and reading stops


# an outstanding message counted as parked lets a first delivery pass the window (KS-FLW-2)
@mutant("outstanding_parked", "KS-FLW-2", **PARKING)
class OutstandingParked(Dispatcher):
    """Counts every message behind a key's first `park_after` unresolved ones as parked, outstanding ones too."""

    def is_parked(self, index: int, message: Message) -> bool:
        return 0 < self.config.park_after <= index  # breaks KS-ISO-4, KS-FLW-2: outstanding ones leave the count


# --- acks, nacks, timeouts, retries (sections 9, 10) ----------------------------------------------


@mutant("stale_ack_accepted", "KS-ACK-2", **BASE)
class StaleAckAccepted(Dispatcher):
    """An ack resolves an outstanding message whoever sends it (e.g. the key's previous owner)."""

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is not member:
            self.resolve(message, "acked", "ack", consumer=member.name)  # breaks KS-ACK-2
            return
        super().on_ack(member, offset)


# Pulsar's consumer names need not be unique (KS-ASN-5): an ack is still the holder's alone
@mutant("ack_by_consumer_name", "KS-ACK-2", **SHARED_NAMES)
class AckByConsumerName(Dispatcher):
    """Matches an ack to its delivery by the system's consumer name: a member sharing the holder's name acks for it."""

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        holder = message.holder if message is not None else None
        if message is not None and message.state is MessageState.OUTSTANDING and holder is not None:
            if holder is not member and (holder.hash_name or holder.name) == (member.hash_name or member.name):
                self.resolve(message, "acked", "ack", consumer=member.name)  # breaks KS-ACK-2
                return
        super().on_ack(member, offset)


@mutant("first_ack_lost", "KS-ACK-1", **BASE)
class FirstAckLost(Dispatcher):
    """The first ack of every redelivered message is lost (reported as not from the holder)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lost_once: set[int] = set()
        super().__init__(*args, **kwargs)

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.holder is member and message.attempts > 1 and offset not in self.lost_once:
            self.lost_once.add(offset)
            self.ignore_ack("ack_ignored", member, offset, "not-holder", key=message.key)  # breaks KS-ACK-1
            return
        super().on_ack(member, offset)


@mutant("stale_nack_accepted", "KS-RTY-1", **BASE)
class StaleNackAccepted(Dispatcher):
    """A nack from any consumer sends the message back for retry, not only the holder's."""

    def on_nack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is not member:
            # breaks KS-RTY-1
            self.emit("nack", offset=offset, key=message.key, consumer=member.name, attempt=message.attempts)
            self.end_delivery(message)
            self.fail(message, "nack")
            return
        super().on_nack(member, offset)


# section 9: a result for a delivery that ended (KS-ACK-3), and the option ack_by_id's own rule
@mutant("zombie_ack_accepted", "KS-ACK-3", **ZOMBIES)
class ZombieAckAccepted(Dispatcher):
    """A worker whose delivery ended (it timed out, left or was evicted) still acks it, and the ack resolves the
    message, whoever holds it now; the dispatcher does not declare `ack_by_id`."""

    def on_zombie(self, op: str, consumer: str, offset: int) -> None:
        message = self.messages.get(offset)
        if op == "zombie_ack" and message is not None:
            self.resolve(message, "acked", "ack", consumer=consumer)  # breaks KS-ACK-3 (no fencing)
            return
        super().on_zombie(op, consumer, offset)


# section 6: delayed delivery (KS-ORD-5 to KS-ORD-7)
@mutant("delayed_delivered_early", "KS-ORD-5", **DELAYED)
class DelayedDeliveredEarly(Dispatcher):
    """A delayed message is dispatched as soon as it is read: the tracker ignores its due tick."""

    def read_into_window(self) -> None:
        super().read_into_window()
        for offset in sorted(self.delayed):
            self.set_state(self.messages[offset], MessageState.PENDING)  # breaks KS-ORD-5


# a later message that is itself delayed and due waits too: due-left-waiting (KS-ORD-7)
@mutant("delayed_blocks_key", "KS-ORD-6", may="KS-ORD-7", **DELAYED)
class DelayedBlocksKey(Dispatcher):
    """A key's later messages wait behind its delayed message until that one falls due (kept in key order)."""

    def first_candidate(self, key: str) -> int | None:
        first = super().first_candidate(key)
        queue = self.queues[key]
        if first is not None and any(o < first and self.messages[o].state is MessageState.DELAYED for o in queue):
            return None  # breaks KS-ORD-6
        return first


# the message is never delivered: once due it holds its key's place, so a later first delivery is a reorder;
# it stays unresolved at quiescence and the cursor stops at it
@mutant("delayed_never_due", "KS-ORD-7", may="KS-ORD-1 KS-LIV-1 KS-LIV-2", **DELAYED)
class DelayedNeverDue(Dispatcher):
    """The delayed-delivery tracker never releases a message: once read, a delayed message waits for ever."""

    def delays_due(self) -> None:
        return  # breaks KS-ORD-7


@mutant("ack_by_id_ignored", "KS-ACK-3", **ACK_BY_ID)
class AckByIdIgnored(Dispatcher):
    """Declares `ack_by_id` but still fences a late ack: a zombie ack of an unresolved message is ignored."""

    def on_zombie(self, op: str, consumer: str, offset: int) -> None:
        if op == "zombie_ack" and self.config.ack_by_id and not self.cursor.is_resolved(offset):
            self.ack_ignored_total["ended"] += 1
            key = self.log[offset].key
            self.emit("ack_ignored", offset=offset, key=key, consumer=consumer, reason="ended")  # breaks KS-ACK-3
            return
        super().on_zombie(op, consumer, offset)


@mutant(
    "ack_by_id_keeps_delivering",
    "KS-RES-2",
    # the message is acked again later, the cursor stays behind it, and the stats count it unresolved
    may="KS-RES-1 KS-CUR-5 KS-ISO-1 KS-OBS-1",
    **ACK_BY_ID,
)
class AckByIdKeepsDelivering(Dispatcher):
    """With `ack_by_id`, a zombie ack is recorded as an ack, but the message stays queued and is delivered again."""

    def on_zombie(self, op: str, consumer: str, offset: int) -> None:
        message = self.messages.get(offset)
        if op == "zombie_ack" and self.config.ack_by_id and message is not None:
            # breaks KS-RES-2 (the ack is reported, the message is not taken out of the subscription)
            self.emit("ack", offset=offset, key=message.key, consumer=consumer)
            if message.state is MessageState.OUTSTANDING:
                self.end_delivery(message)
                self.set_state(message, MessageState.PENDING)
            return
        super().on_zombie(op, consumer, offset)


# section 14, seek: the replay, what is given up, the durable write and the fence of the deliveries it cut
@mutant(
    "seek_keeps_acked",
    "KS-CUR-8",
    # the mutant's own cursor counts the skipped messages resolved: it persists past them
    may="KS-CUR-1 KS-CUR-3 KS-CUR-10 KS-CUR-5 KS-ISO-1 KS-LIV-1 KS-LIV-2 KS-FLW-2 KS-FLT-3 KS-ORD-1 KS-ORD-2 KS-OBS-1",
    **SEEK,
)
class SeekKeepsAcked(Dispatcher):
    """A backwards seek replays only what was unacknowledged: what was acked before it is not delivered again."""

    def on_seek(self, target: int) -> None:
        acked = [offset for offset in range(target, len(self.log)) if self.cursor.is_resolved(offset)]
        super().on_seek(target)
        for offset in acked:
            self.cursor.resolve(offset)  # breaks KS-CUR-8 (the replay skips what was acked)


@mutant("seek_accepts_old_acks", "KS-CUR-11", **SEEK)
class SeekAcceptsOldAcks(Dispatcher):
    """After a seek, an ack from a consumer whose delivery the seek cut still resolves the replayed message.

    As an ack by message id would: the consumer's old delivery is not fenced."""

    def on_seek(self, target: int) -> None:
        self.cut = {offset: message.holder.name for offset, message in self.messages.items() if message.holder}
        super().on_seek(target)

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        cut = getattr(self, "cut", {})
        if message is not None and message.holder is not member and cut.get(offset) == member.name:
            self.resolve(message, "acked", "ack", consumer=member.name)  # breaks KS-CUR-11
            return
        super().on_ack(member, offset)


@mutant(
    "seek_resurrects",
    "KS-CUR-9",
    # a message kept below the target keeps its attempt count and counts as a hole below the cursor
    may="KS-RTY-5 KS-RES-1 KS-RES-2 KS-CUR-1 KS-CUR-3 KS-CUR-5 KS-ORD-1 KS-ORD-2 KS-DRN-1 KS-OBS-1 KS-ISO-1 "
    "KS-LIV-1 KS-FLT-3",
    **SEEK,
)
class SeekResurrects(Dispatcher):
    """A forwards seek moves the cursor but keeps the read messages below its target, which are still delivered."""

    def on_seek(self, target: int) -> None:
        kept = {offset: message for offset, message in self.messages.items() if offset < target}
        queues = {key: [o for o in offsets if o < target] for key, offsets in self.queues.items()}
        super().on_seek(target)
        for offset, message in kept.items():
            # breaks KS-CUR-9 (the read messages below the target stay in the window)
            message.holder = None
            message.state = MessageState.PENDING
            message.held = None
            self.messages[offset] = message
            self.pending_counts[message.key] += 1
        for key, offsets in queues.items():
            if offsets:
                self.queues[key] = offsets


@mutant(
    "seek_not_persisted",
    "KS-CUR-10",
    # a restart before the debounced write resumes from the old cursor: the replay the checker expects never
    # comes (or what the seek gave up comes back), and the late write moves the persisted cursor backwards
    may="KS-CUR-2 KS-CUR-3 KS-CUR-4 KS-CUR-5 KS-CUR-8 KS-CUR-9 KS-ORD-1 KS-ISO-1 KS-LIV-1 KS-FLT-3 KS-OBS-1",
    **SEEK_DEBOUNCED,
)
class SeekNotPersisted(Dispatcher):
    """A seek moves the cursor in memory and leaves the write to the next debounced persistence."""

    def on_seek(self, target: int) -> None:
        if self.config.persist_interval == 0:
            super().on_seek(target)
            return
        persisted = (self.persisted_position, self.persisted_at)
        old_chunks = {offset >> 16 for offset in self.cursor.holes}
        store = self.store
        self.store = MemoryStore()  # the seek's own write goes nowhere
        try:
            super().on_seek(target)
        finally:
            self.store = store
        # breaks KS-CUR-10 (the store still holds the old cursor until the debounced write: a crash loses the seek)
        self._effects.pop()
        self.persisted_position, self.persisted_at = persisted
        self.cursor.changed = True
        self.cursor.dirty_chunks = old_chunks | {target >> 16}


# section 10.1: extending a delivery's deadline (KS-RTY-8) and fencing the extensions of anyone else (KS-RTY-9);
# an extension applied by message id moves the holder's real deadline, which the checker keeps: missed-timeout
@mutant("extend_ignored", "KS-RTY-8", **EXTENSIONS)
class ExtendIgnored(Dispatcher):
    """Records the holder's extension but keeps the delivery's old deadline: it times out as if never extended."""

    def on_extend(self, member: Member, offset: int, ticks: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is member:
            # breaks KS-RTY-8 (the deadline stays delivery + ack_timeout)
            self.emit("extended", offset=offset, key=message.key, consumer=member.name, attempt=message.attempts)
            return
        super().on_extend(member, offset, ticks)


@mutant("extend_by_zombie", "KS-RTY-9", may="KS-RTY-3", **EXTENSIONS)
class ExtendByZombie(Dispatcher):
    """Applies an extension to the message's current delivery whoever sends it, a worker whose lease ended included.

    The zombie (or any other consumer) keeps the new holder's delivery alive.

    Fencing only the names whose delivery of the message ended (a narrower zombie bug) is not found within the ci
    budget: under a ring the timed-out worker gets its message back unless the membership changed in between."""

    def on_extend(self, member: Member, offset: int, ticks: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is not member:
            # breaks KS-RTY-9 (no fencing: the renewal names the message, not the lease)
            message.deadline = self.now + ticks
            self.emit("extended", offset=offset, key=message.key, consumer=member.name, attempt=message.attempts)
            return
        super().on_extend(member, offset, ticks)


# section 12: a disconnected member is still a member; its holder's ack resolves the message
@mutant("disconnected_acks_ignored", "KS-ACK-1", **BASE)
class DisconnectedAcksIgnored(Dispatcher):
    """An ack from a consumer whose connection dropped (not yet evicted) is ignored although it holds the message."""

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.holder is member and not member.connected:
            self.ignore_ack("ack_ignored", member, offset, "not-holder", key=message.key)  # breaks KS-ACK-1
            return
        super().on_ack(member, offset)


@mutant(
    "reconnect_ignored",
    "KS-MEM-4",
    warns="KS-OBS-1",  # the stats say the member is disconnected
    may="KS-ISO-1 KS-DRN-2 KS-LIV-1 KS-MEM-1",  # its keys wait for a member the checker sees connected
    **BASE,
)
class ReconnectIgnored(Dispatcher):
    """A reconnect is acknowledged but changes nothing: the member stays inactive and is evicted on schedule."""

    def on_reconnect(self, member: Member) -> None:
        return  # breaks KS-MEM-4


@mutant(
    "danube_order_undeclared",
    "KS-GEN-7",
    may="KS-MEM-2",  # a phase-3 delivery read as phase 5 puts an eviction due in phase 4 behind it
    **BASE,
)
class DanubeOrderUndeclared(Dispatcher):
    """Delivers ready retries before eviction (Danube's order) while the configuration says `standard`."""

    def phase_retry_ready(self) -> None:
        super().phase_retry_ready()
        self.deliver_step()  # breaks KS-GEN-7 unless tick_order is danube


# a message a restart brought back and the over-eager drain holds is reported restart-skip (CUR-3), the
# checker's name for an idle message with that history
@mutant(
    "hash_drain_everything",
    "KS-ISO-1",
    may="KS-CUR-3 KS-DRN-2",
    **OWNER,
    selectors=["pulsar-consistent"],
    poison_policies=["drop"],
    config_values={"drain_granularity": ["hash"]},
)
class HashDrainEverything(Dispatcher):
    """Hash-granularity draining that holds a key while any other key drains, retries or is blocked, whatever
    its slot."""

    def slot_mate_draining(self, message: Message, target: Member) -> bool:
        for other, offsets in self.queues.items():
            if other == message.key:
                continue
            if other in self.blocked or any(holder is not target for holder in self.key_holders.get(other, ())):
                return True  # breaks KS-ISO-1: no slot-mate explains the hold
            if any(self.messages[o].state is MessageState.RETRYING for o in offsets):
                return True
        return False


@mutant(
    "drain_unmoved_hash",
    "KS-DRN-2",
    **OWNER,
    selectors=["pulsar-consistent"],
    poison_policies=["drop"],
    config_values={"drain_granularity": ["hash"]},
)
class DrainUnmovedHash(Dispatcher):
    """Hash-granularity draining that counts every hash with a delivery outstanding as draining, even at the hash's
    own target: PIP-379 marks a hash draining only when its owner changes."""

    def slot_mate_draining(self, message: Message, target: Member) -> bool:
        if self.key_holders.get(message.key):
            return True  # breaks KS-DRN-2: the slot's target did not move, nothing drains
        return super().slot_mate_draining(message, target)


@mutant("early_timeout", "KS-RTY-2", **BASE)
class EarlyTimeout(Dispatcher):
    """The ack timeout is counted from the tick before the delivery (an off-by-one)."""

    def phase_timeouts(self) -> None:
        for member in self.members.values():
            for offset in member.outstanding:
                self.messages[offset].delivered_at -= 1  # breaks KS-RTY-2
        try:
            super().phase_timeouts()
        finally:
            for member in self.members.values():
                for offset in member.outstanding:
                    self.messages[offset].delivered_at += 1


@mutant("late_timeout", "KS-RTY-3", **BASE)
class LateTimeout(Dispatcher):
    """A delivery times out one tick after its ack timeout has passed."""

    def phase_timeouts(self) -> None:
        for member in self.members.values():
            for offset in member.outstanding:
                self.messages[offset].delivered_at += 1  # breaks KS-RTY-3
        try:
            super().phase_timeouts()
        finally:
            for member in self.members.values():
                for offset in member.outstanding:
                    self.messages[offset].delivered_at -= 1


@mutant("no_backoff", "KS-RTY-4", **BASE)
class NoBackoff(Dispatcher):
    """A failed message is retried at the next tick, whatever the back-off says."""

    def fail(self, message: Message, how: str) -> None:
        super().fail(message, how)
        message.retry_at = self.now  # breaks KS-RTY-4


@mutant("attempt_reset", "KS-RTY-5", **BASE)
class AttemptReset(Dispatcher):
    """A redelivery restarts the attempt count at 1."""

    def deliver(self, message: Message, member: Member) -> None:
        message.attempts = 0  # breaks KS-RTY-5
        super().deliver(message, member)


@mutant("retry_forever", "KS-RTY-6", **BASE)
class RetryForever(Dispatcher):
    """`max_redeliveries` is never enforced: a failing message is retried forever."""

    def phase_poison(self) -> None:
        return  # breaks KS-RTY-6

    def phase_retry_ready(self) -> None:
        for offset in sorted(self.retrying):
            message = self.messages[offset]
            if message.retry_at <= self.now:
                self.set_state(message, MessageState.PENDING)
                message.awaiting_redelivery = True


# --- poison policies and operator actions (section 11) --------------------------------------------


# a message dropped at its first failure after a return reads as its return counted as a failure (RTY-7)
@mutant("drop_on_first_failure", "KS-RES-1", may="KS-RTY-7", **BASE)
class DropOnFirstFailure(Dispatcher):
    """The poison policy is applied at the first failure, not after `max_redeliveries` of them."""

    def fail(self, message: Message, how: str) -> None:
        super().fail(message, how)
        message.failures = max(message.failures, self.config.max_redeliveries + 1)  # breaks KS-RES-1


@mutant("dead_letter_attempt", "KS-POI-2", **OWNER, **RING, poison_policies=["dead-letter"])
class DeadLetterAttempt(Dispatcher):
    """The dead letter carries the attempt count of the message's first delivery, not its last."""

    def apply_poison_policy(self, message: Message) -> None:
        attempts = message.attempts
        message.attempts = 1  # breaks KS-POI-2
        super().apply_poison_policy(message)
        message.attempts = attempts


@mutant("blocked_leak", "KS-POI-3", **OWNER, **RING, poison_policies=["block"])
class BlockedLeak(Dispatcher):
    """A blocked message does not stop later messages of its key."""

    def first_candidate(self, key: str) -> int | None:
        for offset in self.queues[key]:
            state = self.messages[offset].state
            if state is MessageState.PENDING:
                return offset
            if state is MessageState.RETRYING:
                return None
        return None

    def deliver_key(self, key: str) -> None:
        for offset in list(self.queues.get(key, ())):
            message = self.messages.get(offset)
            if message is None or message.state in (MessageState.OUTSTANDING, MessageState.BLOCKED):
                continue  # breaks KS-POI-3
            if message.state is not MessageState.PENDING:
                return
            if self.dispatch_message(message) in ("held", "waits"):
                return


@mutant("skip_ignored", "KS-POI-5", **OWNER, **RING, poison_policies=["block"])
class SkipIgnored(Dispatcher):
    """The operator's skip is accepted but does nothing: the key stays blocked."""

    def on_skip(self, key: str) -> None:
        return  # breaks KS-POI-5


# blocking one failure early also blocks a released message early (POI-4), and a returned one (RTY-7)
@mutant("poison_one_early", "KS-POI-3", may="KS-POI-4 KS-RTY-7", **OWNER, **RING, poison_policies=["block"])
class PoisonOneEarly(Dispatcher):
    """A message is poisoned when its failures reach max_redeliveries, one failure too early."""

    def phase_poison(self) -> None:
        limit = self.config.max_redeliveries
        for offset in sorted(self.retrying):
            message = self.messages[offset]
            if message.failures >= max(limit, 1):  # breaks KS-POI-3 (and KS-RTY-6): `>` is the rule
                self.apply_poison_policy(message)


# with max_redeliveries 0 a kept budget blocks exactly when a fresh one would: the slice declares 1 and 2
@mutant(
    "release_keeps_budget",
    "KS-POI-4",
    may="KS-RTY-7",  # the failures kept across the release make a later return look counted as a failure
    **OWNER,
    **RING,
    poison_policies=["block"],
    config_values={"max_redeliveries": [1, 2], "backoff_base": [0], "backoff_max": [0]},
)
class ReleaseKeepsBudget(Dispatcher):
    """An operator's release unblocks the key but keeps the message's failure count: it blocks again at once."""

    def on_release(self, key: str) -> None:
        kept = {offset: self.messages[offset].failures for offset in self.blocked.get(key, [])}
        super().on_release(key)
        for offset, failures in kept.items():
            self.messages[offset].failures = failures  # breaks KS-POI-4: no fresh budget


# the stranded messages are stuck (LIV-1); one that a leave had returned is reported lost (MEM-1) instead, and
# one a restart brought back (resolved after the last persistence) restart-skip (CUR-3): the same violation
# under the names its history gives it, seen only when the example has that history
@mutant(
    "dropped_key_stranded",
    "KS-LIV-1",
    may="KS-CUR-3 KS-MEM-1 KS-ISO-1",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
)
class DroppedKeyStranded(Dispatcher):
    """After a poison drop, the rest of the key's queue is never delivered (the key is marked dead)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.dead_keys: set[str] = set()
        super().__init__(*args, **kwargs)

    def apply_poison_policy(self, message: Message) -> None:
        self.dead_keys.add(message.key)
        super().apply_poison_policy(message)

    def deliver_key(self, key: str) -> None:
        if key in self.dead_keys:
            return  # breaks KS-LIV-1
        super().deliver_key(key)


# --- membership (section 12) ----------------------------------------------------------------------


# the forgotten message is lost (MEM-1); later ones of its key overtake it (ORD-3) or wait forever (LIV-1)
@mutant(
    "lost_on_leave",
    "KS-MEM-1 KS-LIV-1 KS-ORD-3",
    may="KS-CUR-3 KS-ISO-1",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
)
class LostOnLeave(Dispatcher):
    """When a consumer leaves, the deliveries it held are forgotten: never acked, never delivered again."""

    def on_leave(self, member: Member) -> None:
        if self.config.reliable:
            for offset in sorted(member.outstanding):
                message = self.messages.get(offset)
                if message is not None:
                    self.end_delivery(message)  # breaks KS-MEM-1: it stays outstanding, held by nobody
            member.outstanding.clear()
        super().on_leave(member)


# acks nobody sent (ACK-2), judged within the leave that caused them (an op's own effects never split it)
@mutant("leave_counts_as_ack", "KS-ACK-2", **BASE)
class LeaveCountsAsAck(Dispatcher):
    """When a consumer leaves, what it held is acknowledged on its behalf and never delivered again."""

    def on_leave(self, member: Member) -> None:
        if self.config.reliable:
            for offset in sorted(member.outstanding):
                message = self.messages.get(offset)
                if message is not None:
                    self.resolve(message, "acked", "ack", consumer=member.name)  # breaks KS-MEM-1
        super().on_leave(member)


@mutant("early_eviction", "KS-MEM-2", **BASE)
class EarlyEviction(Dispatcher):
    """A disconnected consumer is evicted one tick before `evict_after` has passed."""

    def phase_eviction(self) -> None:
        for member in self.members.values():
            if not member.connected:
                member.disconnected_at -= 1  # breaks KS-MEM-2
        try:
            super().phase_eviction()
        finally:
            for member in self.members.values():
                if not member.connected:
                    member.disconnected_at += 1


# a rolling restart poisons healthy messages (the procrastinate adapter shows this bug in a real system); a
# message it poisoned one failure early is gone while the checker expects it delivered (ISO-1)
# (under a declared returns_as_failures its returns count twice: poisoned early, an unjustified resolution)
@mutant("returns_count_as_failures", "KS-RTY-7", may="KS-ISO-1 KS-RES-1", **BASE)
class ReturnsCountAsFailures(Dispatcher):
    """A message returned by a leaving or evicted consumer counts that as a failure toward poisoning."""

    def return_to_pending(self, message: Message) -> None:
        message.failures += 1  # breaks KS-RTY-7: the message did nothing wrong
        super().return_to_pending(message)


# PIP-486's controller moves (declared), unannounced: a key's bucket is delivered by another consumer within one
# membership epoch with no decision naming it (BKT-3; the key itself moved: ASN-1)
@mutant(
    "controller_moves_unannounced",
    "KS-BKT-3",
    may="KS-ASN-1 KS-BKT-8",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values={"bucket_assignment": ["controller"], "controller_moves": [True]},
)
class ControllerMovesUnannounced(Dispatcher):
    """Its controller moves buckets between staying consumers (declared), but never announces the move."""

    unannounced: frozenset[tuple[int, int]] = frozenset()

    def controller_step(self) -> None:
        before = dict(self.layout.owners) if self.layout is not None else {}
        super().controller_step()
        if self.layout is not None:
            moved = {bucket for bucket, owner in self.layout.owners.items() if before.get(bucket) != owner}
            self.unannounced = self.unannounced | moved

    def reconcile_buckets(self) -> None:
        if self.layout is None:
            return
        for event, bucket, consumer in self.layout.reconcile(self.members_by_name):
            if bucket in self.unannounced:  # breaks KS-BKT-3 under controller_moves: the move goes unannounced
                if event == "bucket_assigned":
                    self.unannounced = self.unannounced - {bucket}
                continue
            self.emit(event, segment=bucket[0], bucket=bucket[1], consumer=consumer)


# Pulsar's allowOutOfOrderDelivery (declared: key order and draining given up) still routes a key to one consumer
# per membership epoch; this one routes each message anew (ASN-1): the class of per_message_routing (section 4),
# registered again with the option declared
mutant(
    "out_of_order_per_message",
    "KS-ASN-1",
    may="KS-ASN-2 KS-ISO-1",
    **{**BASE, "config_values": {"out_of_order": [True]}},
)(PerMessageRouting)


# Pulsar's unacked limit (declared) resuming only when everything is acked: the consumer idles with room (ISO-1)
@mutant(
    "unacked_resumes_when_empty",
    "KS-ISO-1",
    may="KS-FLT-3 KS-CUR-3",  # a message restored by a restart waits for the blocked consumer: restart-skip
    **{**BASE, "config_values": {"max_unacked": [2, 3]}},
)
class UnackedResumesWhenEmpty(Dispatcher):
    """It declares Pulsar's unacked limit (max_unacked), but a blocked consumer resumes only once it holds nothing,
    not at half the limit."""

    def end_delivery(self, message: Message) -> Member:
        was_blocked = message.holder is not None and message.holder.unacked_blocked
        holder = super().end_delivery(message)
        if was_blocked and holder.outstanding:
            holder.unacked_blocked = True  # breaks KS-FLW-1's resume rule: it waits for every ack (ISO-1 sees it)
        return holder


# the same system with the declaration, whose counting forgets the returns: a message over its counted budget is
# delivered again (RTY-6)
@mutant("declared_returns_uncounted", "KS-RTY-6", **{**BASE, "config_values": {"returns_as_failures": [True]}})
class DeclaredReturnsUncounted(Dispatcher):
    """It declares that returns count as failures (returns_as_failures), yet a return leaves the count alone."""

    def return_to_pending(self, message: Message) -> None:
        self.end_delivery(message)
        self.set_state(message, MessageState.PENDING)  # breaks KS-RTY-6 under the option: the return is a failure
        message.awaiting_redelivery = True


@mutant("disconnected_served", "KS-MEM-3", **BASE)
class DisconnectedServed(Dispatcher):
    """A disconnected consumer keeps receiving messages until it is evicted."""

    def decide(self, message: Message) -> Decision:
        decision = super().decide(message)
        if decision.reason == "inactive" and decision.target is not None:
            member = self.members[decision.target]
            if len(member.outstanding) < member.capacity:
                return Decision("deliver", member=member)  # breaks KS-MEM-3
        return decision


# --- resolutions and duplicates (section 13) ------------------------------------------------------


# the second copy is a duplicate (RES-2) that takes a second permit (FLW-1)
# the second send needs room it does not have: capacity (FLW-1), or under permits a permit (FLW-4)
@mutant("sent_twice", "KS-RES-2 KS-FLW-1", may="KS-FLW-4", **BASE)
class SentTwice(Dispatcher):
    """A first delivery is sent twice (a retried write to the consumer's channel)."""

    def deliver(self, message: Message, member: Member) -> None:
        super().deliver(message, member)
        if message.attempts == 1:
            message.attempts += 1
            self.delivered_total += 1
            self.redelivered_total += 1
            # breaks KS-RES-2
            self.emit("deliver", offset=message.offset, key=message.key, consumer=member.name, attempt=2)


# --- the cursor (section 14) ----------------------------------------------------------------------


class _HighestAckCursor(Cursor):
    def resolve(self, offset: int) -> None:
        if offset < self.position:
            return  # already passed over
        super().resolve(offset)
        if offset >= self.position:
            self.holes.remove_range(self.position, offset + 1)
            self.position = offset + 1  # breaks KS-CUR-1


# the window counts from the broken cursor, so reading goes wrong too (FLW-2, ISO-1, ORD-1) and messages
# below the cursor are never read again after a restart (LIV-1)
@mutant(
    "cursor_at_highest_ack",
    "KS-CUR-1",
    warns="KS-OBS-1",
    may="KS-FLW-2 KS-ISO-1 KS-LIV-1 KS-ORD-1 KS-FLT-3",
    **BASE,
)
class CursorAtHighestAck(Dispatcher):
    """The cursor moves to the highest resolved offset plus one, past messages still unresolved."""

    def load_from_store(self) -> None:
        super().load_from_store()
        self.cursor.__class__ = _HighestAckCursor


# the replayed old write moves the cursor back (CUR-2) and is a write persistence did not call for (CUR-5)
# the stale write is also an extra write: persist-early, a SHOULD since spec 1.2 (KS-CUR-7)
@mutant("stale_cursor_write", "KS-CUR-2", warns="KS-CUR-7", **BASE)
class StaleCursorWrite(Dispatcher):
    """A retried old cursor write lands again: every third write first stores the position of two writes ago."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.written: list[int] = []
        super().__init__(*args, **kwargs)

    def persist(self) -> None:
        self.written.append(self.cursor.position)
        if len(self.written) % 3 == 0:
            position = self.cursor.position
            self.cursor.position = self.written[-3]  # breaks KS-CUR-2
            try:
                super().persist()
            finally:
                self.cursor.position = position
        super().persist()


# a message in a persisted hole was resolved, and the restart did not lose that: resurrected and duplicate
# after it, the dispatcher owes deliveries of messages the checker knows resolved: its acks, timeouts, capacity,
# isolation and stats then disagree with the events (consequences, reached by rounds that spend their budget)
@mutant(
    "holes_reread",
    "KS-CUR-4 KS-RES-2",
    may="KS-ACK-1 KS-CUR-5 KS-FLW-1 KS-ISO-1 KS-RES-1 KS-RTY-3 KS-OBS-1",
    **BASE,
    filters=False,
)
class HolesReread(Dispatcher):
    """After a restart, messages in the persisted ack holes are read and delivered again."""

    def load_from_store(self) -> None:
        super().load_from_store()
        self.reread = set(self.cursor.holes)

    def read_into_window(self) -> None:
        while len(self.messages) < self.config.window and self.read_position < len(self.log):
            offset = self.read_position
            if self.cursor.is_resolved(offset) and offset not in self.reread:  # breaks KS-CUR-4
                self.read_position += 1
                continue
            self.reread.discard(offset)
            self.read_position += 1
            entry = self.log[offset]
            self.messages[offset] = Message(offset, entry.key)
            self.queues.setdefault(entry.key, []).append(offset)
            self.pending_counts[entry.key] += 1


# the kept acks were never persisted: the cursor it persists later passes messages the checker still owes
# (CUR-1), and later messages of their keys overtake them (ORD-1, FLW-2 through the window)
@mutant(
    "restart_keeps_volatile_acks",
    "KS-CUR-3",
    may="KS-CUR-1 KS-CUR-5 KS-ORD-1 KS-FLW-2 KS-FLT-3 KS-ISO-1",
    **BASE,
    stats=False,
)
class RestartKeepsVolatileAcks(Dispatcher):
    """A restart keeps the acks it had not persisted yet and never dispatches those messages again."""

    def on_restart(self) -> None:
        volatile = BitMap64(self.cursor.holes)
        super().on_restart()
        for offset in volatile:
            if offset >= self.cursor.position:
                self.cursor.holes.add(offset)  # breaks KS-CUR-3: resumes from memory, not from the store


@mutant("persist_on_tick_only", "KS-CUR-5", **BASE)
class PersistOnTickOnly(Dispatcher):
    """The cursor is persisted only on ticks, even when `persist_interval` is 0."""

    def persist_if_due(self, in_tick_phase_6: bool, tick: bool = False) -> None:
        if in_tick_phase_6:  # breaks KS-CUR-5
            super().persist_if_due(in_tick_phase_6, tick)


@mutant("persist_eagerly", "", warns="KS-CUR-7", **BASE)  # a SHOULD since spec 1.2
class PersistEagerly(Dispatcher):
    """The cursor is persisted at the end of every op that changed it, whatever `persist_interval` says."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        if self.config.persist_interval and self.cursor.position != self.persisted_position:
            return True  # breaks KS-CUR-7 (a cheap bug: it shows in almost every example that acks)
        return super().persistence_due(in_tick_phase_6, tick)


# the unflushed tail is late (CUR-5) and, at quiescence, a stalled cursor (LIV-2)
@mutant("cursor_tail_unflushed", "KS-CUR-5", may="KS-LIV-2", **BASE)
class CursorTailUnflushed(Dispatcher):
    """The cursor is persisted in batches of two offsets; a last odd offset is never flushed."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        if self.cursor.position - self.persisted_position < 2 and not self.config.persist_ack_holes:
            return False  # breaks KS-LIV-2
        return super().persistence_due(in_tick_phase_6, tick)


# the debounces of Danube and Pulsar (KS-CUR-12, judged through persist-late): each declares its option and breaks
# the option's own rule
# writing at a tick that moved nothing is also early (KS-CUR-7, a SHOULD)
@mutant("advance_written_at_tick", "KS-CUR-5", may="KS-CUR-7", **ON_ADVANCE)
class AdvanceWrittenAtTick(Dispatcher):
    """Declares `persist_trigger = advance` but writes a moved cursor only in the next tick's phase 6 (a timer)."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        if not tick:
            return False  # breaks KS-CUR-12 (the move that made it due is not written at its op's end)
        return super().persistence_due(in_tick_phase_6, tick) or (
            self.cursor.position != self.persisted_position
            and (self.persisted_at is None or self.now - self.persisted_at >= self.config.persist_interval)
        )


@mutant("flush_never_runs", "KS-CUR-5", may="KS-LIV-2", **FLUSHED)
class FlushNeverRuns(Dispatcher):
    """Declares `persist_flush` but never runs the periodic flush: a move within the interval waits for the next."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        self.flush_owed = False  # breaks KS-CUR-12 (the flush tick passes and writes nothing)
        return super().persistence_due(in_tick_phase_6, False) and self.cursor.position != self.position_at_begin


# --- isolation (section 15), the tick (section 3) -------------------------------------------------


# the pass that stops at a stuck key never reaches a message nobody accepts either (FLT-3)
@mutant("head_of_line", "KS-ISO-1", may="KS-FLT-3", **BASE)
class HeadOfLine(Dispatcher):
    """The dispatch pass stops at the first key it must hold: keys behind it wait (head-of-line blocking)."""

    def deliver_step(self) -> None:
        self.holds = {}
        candidates = sorted(
            (first, key) for key in self.pending_counts if (first := self.first_candidate(key)) is not None
        )
        for _, key in candidates:
            self.deliver_key(key)
            if key in self.holds:
                return  # breaks KS-ISO-1


# heartbeat-driven systems (KS-GEN-8, KS-GEN-9): each declares its option and breaks the option's own rule
@mutant("heartbeat_skipped", "KS-ISO-1", may="KS-FLT-3 KS-CUR-3", **HEARTBEAT_READS)
class HeartbeatSkipped(Dispatcher):
    """Declares heartbeat reads but polls the log at every other heartbeat only: an odd tick reads nothing."""

    def dispatch_pass(self, heartbeat: bool = False) -> None:
        super().dispatch_pass(heartbeat and self.now % 2 == 0)  # breaks KS-GEN-8 at odd ticks


@mutant("timers_too_late", "KS-RTY-3", may="KS-MEM-2 KS-CUR-5 KS-ISO-1 KS-FLT-3", **SLACK_OF_ONE)
class TimersTooLate(Dispatcher):
    """Runs its timers at every third tick, so they fire up to two ticks late, while it declares a slack of one."""

    def timers_due(self) -> bool:
        return self.now % 3 == 0  # breaks KS-GEN-9 with timer_slack 1


# the deliveries before the eviction cross phase 4 with the eviction missing (MEM-2), then it comes late
@mutant("dispatch_before_eviction", "KS-GEN-7 KS-MEM-2", **BASE)
class DispatchBeforeEviction(Dispatcher):
    """A tick dispatches before it evicts (and again after), so evictions land after deliveries."""

    def phase_eviction(self) -> None:
        self.dispatch_pass()  # breaks KS-GEN-7
        super().phase_eviction()


# --- observability (section 16) -------------------------------------------------------------------


@mutant("blocked_keys_hidden", "KS-OBS-2", **OWNER, **RING, poison_policies=["block"])
class BlockedKeysHidden(Dispatcher):
    """The stats do not list blocked keys."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats["blocked_keys"] = []  # breaks KS-OBS-2
        stats["stuck_keys"] = [s for s in stats["stuck_keys"] if s["reason"] != "blocked"]
        stats["held_by_key"] = {k: v for k, v in stats["held_by_key"].items() if v["reason"] != "blocked"}
        return stats


# --- buckets (section 17) -------------------------------------------------------------------------


class _Layout(BucketLayout):
    """Base for broken layouts: the dispatcher swaps its layout's class after every (re)load."""


class _OffByOneLayout(_Layout):
    def place(self, key: str) -> Placement:
        placement = super().place(key)
        buckets = self.segments[placement.segment].buckets
        return Placement(placement.hash, placement.segment, (placement.bucket + 1) % buckets)  # breaks KS-BKT-1


class _LayoutBug(Dispatcher):
    layout_class: type[_Layout] = _Layout

    def load_from_store(self) -> None:
        super().load_from_store()
        if self.layout is not None:
            self.layout.__class__ = self.layout_class


@mutant("bucket_off_by_one", "KS-BKT-1", **OWNER, **BUCKETS, poison_policies=["drop"])
class BucketOffByOne(_LayoutBug):
    """A message goes to the bucket after the one its hash names."""

    layout_class = _OffByOneLayout


@mutant(
    "sticky_in_name",
    "KS-BKT-8",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values={"bucket_assignment": ["sticky"]},
)
class StickyInName(Dispatcher):
    """Declares the sticky bucket policy, but assigns buckets by position among the sorted names."""

    def load_from_store(self) -> None:
        super().load_from_store()
        if self.layout is not None:
            self.layout.policy = "sorted"  # breaks KS-BKT-8: a join shifts buckets between members that stay


@mutant("owners_reversed", "KS-BKT-3", **OWNER, **BUCKETS, poison_policies=["drop"])
class OwnersReversed(Dispatcher):
    """Bucket owners are counted over the members sorted in reverse name order."""

    def membership_changed(self) -> None:
        super().membership_changed()
        self.members_by_name = sorted(self.members, reverse=True)  # breaks KS-BKT-3


class _NoHandoffLayout(_Layout):
    def is_withheld(self, placement: Placement) -> bool:
        return False  # breaks KS-BKT-4


@mutant("no_handoff", "KS-BKT-4", **OWNER, **BUCKETS, poison_policies=["drop"])
class NoHandoff(_LayoutBug):
    """A bucket is handed to its new owner at once, while the old owner still holds its messages."""

    layout_class = _NoHandoffLayout


class _SuccessorFirstLayout(_Layout):
    def predecessor_pending(self, segment_number: int) -> bool:
        return False  # breaks KS-BKT-5


@mutant("successor_first", "KS-BKT-5", **OWNER, **BUCKETS, poison_policies=["drop"])
class SuccessorFirst(_LayoutBug):
    """A successor segment is served while its predecessor still has unresolved messages of its range."""

    layout_class = _SuccessorFirstLayout


class _CheckpointAheadLayout(_Layout):
    def advance_checkpoints(self, durably_resolved: Any) -> dict[tuple[int, int], int]:
        return super().advance_checkpoints(lambda offset: True)  # breaks KS-BKT-6


# searched without checkpoint_resume; on a vector with it, a restart resumes from the checkpoint it moved too far:
# the cursor then passes what it skipped (CUR-1), and the stats' cursor is ahead of the events (OBS-1, a warning)
@mutant(
    "checkpoint_ahead",
    "KS-BKT-6",
    may="KS-CUR-1 KS-OBS-1 KS-ISO-1",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values={"checkpoint_resume": [False]},
)
class CheckpointAhead(_LayoutBug):
    """A bucket's checkpoint moves to its last published message, past unresolved ones."""

    layout_class = _CheckpointAheadLayout


class _MergeWaitsForOneLayout(_Layout):
    def predecessor_pending(self, segment_number: int) -> bool:
        segment = self.segments[segment_number]
        second = segment.second_predecessor
        segment.second_predecessor = None  # breaks KS-BKT-5: a merged segment waits for its lower predecessor only
        try:
            return super().predecessor_pending(segment_number)
        finally:
            segment.second_predecessor = second


@mutant("merge_waits_for_one", "KS-BKT-5", **OWNER, **BUCKETS, poison_policies=["drop"])
class MergeWaitsForOne(_LayoutBug):
    """A merged segment is served once its lower predecessor drained, while the upper one still has messages."""

    layout_class = _MergeWaitsForOneLayout


# a message the checkpoint covers stays resolved in the trace: delivering it again is also a duplicate (RES-2);
# after it, as for holes_reread, the dispatcher owes deliveries of messages the checker knows resolved: its acks,
# timeouts, capacity, persistence and stats then disagree with the events
@mutant(
    "checkpoints_ignored_at_restart",
    "KS-BKT-9",
    may="KS-RES-2 KS-ACK-1 KS-CUR-5 KS-FLW-1 KS-RES-1 KS-RTY-3 KS-OBS-1",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values={"checkpoint_resume": [True]},
)
class CheckpointsIgnoredAtRestart(Dispatcher):
    """Checkpoints follow every resolution of their bucket, but a restart resumes from the global cursor only."""

    def resume_from_checkpoints(self) -> None:
        return  # breaks KS-BKT-9


# the messages it skips stay unresolved in the trace, so the cursor persisted past them is the first sign (CUR-1);
# then whatever waits behind them: a checkpoint past them (BKT-6), a successor served (BKT-5), a later message of
# their key (ORD-1), the window counting them (FLW-2), liveness (LIV-1), the skip itself (CUR-3); the stats'
# cursor is ahead of the events (OBS-1, a warning)
@mutant(
    "one_checkpoint_for_all",
    "KS-CUR-1",
    may="KS-CUR-3 KS-BKT-6 KS-BKT-5 KS-ORD-1 KS-FLW-2 KS-LIV-1 KS-OBS-1 KS-ISO-1",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values=CHECKPOINTS,
)
class OneCheckpointForAll(Dispatcher):
    """A restart resumes every bucket of a segment from the segment's highest bucket checkpoint."""

    def resume_from_checkpoints(self) -> None:
        assert self.layout is not None
        highest: dict[int, int] = {}
        for (segment, _), position in self.layout.checkpoints.items():
            highest[segment] = max(highest.get(segment, 0), position)
        for segment, position in highest.items():
            for bucket in range(self.layout.segments[segment].buckets):
                self.layout.checkpoints[(segment, bucket)] = position  # breaks KS-CUR-3, then KS-CUR-1
        super().resume_from_checkpoints()


# a key-based batch split at the consumer's capacity: its rest follows in a later op (BKT-10); a message left
# waiting past the window overruns it when it goes (FLW-2), or idles with the key's consumer free (ISO-1)
@mutant("key_batch_split", "KS-BKT-10", may="KS-FLW-2 KS-ISO-1", **KEY_BATCHES)
class KeyBatchSplit(Dispatcher):
    """A key-based batch (outside buckets) is dispatched message by message: its later messages wait for room."""

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        if self.layout is None:
            return [message]  # breaks KS-BKT-10 (the rest goes in a later op, or to the key's next consumer)
        return super().batch_to_deliver(message, holder)


# a batch charged as one permit: the consumer is sent more than its grants (FLW-4)
@mutant("batch_charged_one_permit", "KS-FLW-4", **KEY_BATCH_PERMITS)
class BatchChargedOnePermit(Dispatcher):
    """Under permits a batch is charged one permit, like one message, as if permits counted entries."""

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        batch = super().batch_to_deliver(message, holder)
        if batch is not None and self.config.flow_control == "permits":
            holder.permits += len(batch) - 1  # breaks KS-FLW-4 (each delivery of the batch then takes one back)
        return batch


# a batch is read whole, past the window: delivered piece by piece, its later messages overrun it (FLW-2)
@mutant("batch_split", "KS-BKT-10", may="KS-FLW-2", **OWNER, **BUCKETS, poison_policies=["drop"], config_values={})
class BatchSplit(Dispatcher):
    """A batch is dispatched message by message, like single messages: its keys go in the pass's key order."""

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        return [message]  # breaks KS-BKT-10


# layout = "reported" (KS-BKT-11): the split point is chosen by load, but the layout reported is the imposed
# midpoint, so keys between the two points are placed in a segment the reported layout does not route them to
# (BKT-1); the segments' owners and drains then differ from what the checker derives (BKT-3, BKT-5, ASN-1), a
# later split's midpoint is taken from the real parent, not the reported one (BKT-11), and a merge or split the
# reported layout refuses or allows is answered by the real one (GEN-4)
@mutant(
    "reported_layout_misroutes",
    "KS-BKT-1",
    may="KS-BKT-3 KS-BKT-5 KS-BKT-8 KS-BKT-11 KS-ASN-1 KS-ISO-1 KS-GEN-4",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values={"layout": ["reported"]},
)
class ReportedLayoutMisroutes(Dispatcher):
    """It splits a segment where its load divides (layout reported), but reports the midpoint as the split point."""

    def _reported(self, outcome: Outcome, created: list[Segment]) -> Outcome:
        outcome = super()._reported(outcome, created)
        if outcome.segments is not None and len(created) == 2:
            lower, upper = outcome.segments
            middle = (lower["range_lo"] + upper["range_hi"]) // 2  # breaks KS-BKT-1: routing follows the load point
            lower["range_hi"], upper["range_lo"] = middle, middle + 1
        return outcome


# the upper child reported from the split point itself: both children claim one slot (BKT-11); a key of that
# slot is then routed to the child the checker does not pick (BKT-1), and a merge of the real neighbours is not
# one of adjacent segments in the reported layout (GEN-4)
@mutant(
    "reported_layout_invalid",
    "KS-BKT-11",
    may="KS-BKT-1 KS-BKT-3 KS-BKT-5 KS-ASN-1 KS-GEN-4",
    **OWNER,
    **BUCKETS,
    poison_policies=["drop"],
    config_values={"layout": ["reported"]},
)
class ReportedLayoutInvalid(Dispatcher):
    """Its split reports the upper child from the split point itself, so both children claim that slot."""

    def _reported(self, outcome: Outcome, created: list[Segment]) -> Outcome:
        outcome = super()._reported(outcome, created)
        if outcome.segments is not None and len(created) == 2:
            outcome.segments[1]["range_lo"] -= 1  # breaks KS-BKT-11: the children overlap at the split point
        return outcome


# --- best-effort (section 18) ---------------------------------------------------------------------


# a best-effort message had its outcome: sending it again is both a redelivery and a duplicate
@mutant("best_effort_redelivers", "KS-BEF-1 KS-RES-2", profiles=["best-effort"], **RING)
class BestEffortRedelivers(Dispatcher):
    """Best-effort: a leaving consumer's unreceived messages are sent again to the key's new owner."""

    def on_leave(self, member: Member) -> None:
        unreceived = sorted(member.outstanding) if not self.config.reliable else []
        super().on_leave(member)
        for offset in unreceived:
            key = self.log[offset].key
            name = self.target_name(key, None)
            target = self.members.get(name) if name is not None else None
            if target is not None and target.connected and len(target.outstanding) < target.capacity:
                target.outstanding.add(offset)
                self.best_effort_holder[offset] = target
                self.delivered_total += 1
                # breaks KS-BEF-1
                self.emit("deliver", offset=offset, key=key, consumer=target.name, attempt=2)


@mutant("drops_uncounted", "KS-BEF-2", profiles=["best-effort"], **RING)
class DropsUncounted(Dispatcher):
    """Best-effort drops are recorded as events but not counted in the stats."""

    def best_effort_drop(self, offset: int, key: str, reason: str) -> None:
        super().best_effort_drop(offset, key, reason)
        self.dropped_total[reason] -= 1  # breaks KS-BEF-2
        if self.dropped_total[reason] == 0:
            del self.dropped_total[reason]
        self.resolved_total["dropped"] -= 1


# --- refusals and configuration (sections 2, 3) ---------------------------------------------------


@mutant("duplicate_name_accepted", "KS-GEN-4", **BASE)
class DuplicateNameAccepted(Dispatcher):
    """A consumer joining under a name already in use replaces the member instead of being refused."""

    def check_join(
        self, name: object, capacity: object, filters: object, ranges: object, hash_name: object = None
    ) -> Member:
        if isinstance(name, str) and name in self.members:
            self.on_leave(self.members[name])  # breaks KS-GEN-4
        return super().check_join(name, capacity, filters, ranges, hash_name)


# --- adapter protocol v2: no key affinity (selector any), no cursor, implementation-defined outcomes ---


@mutant("never_filters", "KS-FLT-3", **BASE)
class NeverFilters(Dispatcher):
    """A message whose key no member accepts waits for a consumer that may never come, instead of being filtered."""

    def decide(self, message: Message) -> Decision:
        if self.members and self.eligible(message.key) == ():
            return Decision("hold", reason="no-consumer")  # breaks KS-FLT-3
        return super().decide(message)


# a message a restart brought back and left waiting is reported as restart-skip (CUR-3) instead of ISO-1
@mutant("any_busy_first", "KS-ISO-1", may="KS-CUR-3", **STRICT, selectors=["any"], poison_policies=["drop"])
class AnyBusyFirst(Dispatcher):
    """Without key affinity, a key waits for the first member by name even when another member is free."""

    def free_target(self, key: str) -> str | None:
        holders = self.key_holders.get(key)
        if holders:
            return next(iter(holders)).name
        eligible = self.eligible(key)
        names = sorted(self.members) if eligible is None else sorted(eligible)
        return names[0] if names else None  # breaks KS-ISO-1: ignores which members have room


class CursorlessAdapter(ReferenceAdapter):
    """Correct, cursorless: the reference keeps every resolution (ack holes on) and reports no cursor events."""

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(config, Mapping) and config.get("profile") != "best-effort":
            config = {**config, "persist_ack_holes": True, "persist_interval": 0}
        return super().reset(config)

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        response = super().op(op)
        if isinstance(response.get("events"), list):
            response["events"] = [e for e in response["events"] if e.get("event") != "cursor_persisted"]
        return response


# an acknowledged message delivered again after the restart is also a duplicate (RES-2); from then on the
# dispatcher's state is not the one its events describe, so later deliveries and resolutions look wrong too
@mutant(
    "cursorless_forgetful",
    "KS-CUR-4",
    may="KS-RES-2 KS-RES-1 KS-FLT-3 KS-FLW-1 KS-ISO-1 KS-ACK-1 KS-RTY-3 KS-RTY-1 KS-DRN-1",
    **BASE,
    cursor=False,
    persist_ack_holes=False,
    stats=False,
)
class CursorlessForgetful(CursorlessAdapter):
    """Without a cursor, a restart forgets which messages were acknowledged and delivers them again."""

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        store = getattr(self, "_store", None)
        if op.get("op") == "restart" and isinstance(store, MemoryStore):
            store._cursor = 0  # breaks KS-CUR-4: what was acknowledged is forgotten
            store._chunks.clear()
        return super().op(op)


class OutcomeAdapter(ReferenceAdapter):
    """Correct with an implementation-defined outcome: a poisoned message's drop is reported as outcome 'discarded'."""

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        response = super().op(op)
        if isinstance(response.get("events"), list):
            response["events"] = [
                {"event": "outcome", "offset": e["offset"], "key": e["key"], "reason": "discarded"}
                if e.get("event") == "drop" and e.get("reason") == "poison"
                else e
                for e in response["events"]
            ]
        return response


@mutant("outcome_undeclared", "KS-RES-1", **BASE, terminal_outcomes={"discarded": None})
class OutcomeUndeclared(OutcomeAdapter):
    """A poisoned message ends with an outcome ('discarded') that the implementation declares as no resolution."""


# --- SHOULD requirements: reported as warnings, never as failures ---------------------------------


@mutant("stats_miscount", "", **BASE, warns="KS-OBS-1")
class StatsMiscount(Dispatcher):
    """The stats count a redelivery twice in `delivered_total`."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats["delivered_total"] += stats["redelivered_total"]  # breaks KS-OBS-1
        return stats


@mutant("stats_now_lags", "", **BASE, warns="KS-OBS-1")
class StatsNowLags(Dispatcher):
    """The stats report `now` as it was before the last tick (the gauge is refreshed lazily)."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats["now"] = max(0, stats["now"] - 1)  # breaks KS-OBS-1 (a cheap bug: it shows at the first tick)
        return stats


@mutant("hash_ordered_pass", "", **BASE, warns="KS-GEN-5")
class HashOrderedPass(Dispatcher):
    """The dispatch pass visits keys in hash-map order, and the map's seed differs in every run."""

    runs = itertools.count()
    """Every dispatcher gets its own seed (not its address: CPython reuses a freed object's address)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shuffler = random.Random(next(self.runs))

    def deliver_step(self) -> None:
        self.holds = {}
        keys = sorted(self.pending_counts)
        self.shuffler.shuffle(keys)  # breaks KS-GEN-5: the order of a pass depends on the run, not the ops
        for key in keys:
            if self.first_candidate(key) is not None:
                self.deliver_key(key)


@mutant("start_seeded_pass", "", dispatcher=HashOrderedPass, **BASE, warns="KS-GEN-5")
class StartSeededAdapter(ReferenceAdapter):
    """The key order of a pass follows a hash seed chosen at each start: every reset agrees, a restart does not."""

    seed = 0

    def start(self) -> dict[str, Any]:
        self.seed = int.from_bytes(os.urandom(8))  # like Python's string hash or Go's map order, per process
        return super().start()

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        response = super().reset(config)
        if isinstance(self._dispatcher, HashOrderedPass):
            self._dispatcher.shuffler = random.Random(self.seed)  # breaks KS-GEN-5 across starts only
        return response


# --- refused configurations, declarations and system faults (issue 33) ----------------------------


@mutant("lenient_config", "KS-CFG-1", **BASE)
class LenientConfigAdapter(ReferenceAdapter):
    """Reset drops configuration fields it does not know instead of refusing them."""

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        known = set(CONFIG_DEFAULTS)  # every field of spec section 20: only the unknown ones are dropped
        if isinstance(config, Mapping):
            config = {k: v for k, v in config.items() if k in known}  # breaks KS-CFG-1
        return super().reset(config)


# a system fault is a finding (KS-GEN-4) with its scenario, not an adapter fault that ends the run
@mutant("publish_crashes_after_nack", "KS-GEN-4", **BASE)
class PublishCrashesAfterNack(ReferenceAdapter):
    """Every 7th publish to a key with a failed (nacked) message crashes the queue process: the publish is rejected."""

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        self._nacked: set[str] = set()
        self._publishes = 0
        return super().reset(config)

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        if op.get("op") == "publish" and op.get("key") in getattr(self, "_nacked", ()):
            self._publishes += 1
            if self._publishes % 7 == 0:  # breaks KS-GEN-4: a valid publish is not performed
                message = "queue process exited: assertion failed: retry_index <= head (publish rejected)"
                return {"ok": False, "error": {"code": "system_fault", "message": message}}
        response = super().op(op)
        for event in response.get("events", ()):
            if event.get("event") == "nack":
                self._nacked.add(str(event["key"]))
        return response


# a declared absence is a promise: timers: false, yet deliveries time out on tick
@mutant("times_out_without_timers", "KS-RTY-2", **BASE, timers=False, ack_timeout=False)
class TimesOutWithoutTimers(ReferenceAdapter):
    """Declares no timers (timers: false), yet a delivery not acked within 2 ticks times out."""

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(config, Mapping) and config.get("profile") != "best-effort":
            config = {**config, "ack_timeout": 2}  # breaks KS-RTY-2: the declared absence of timers
        return super().reset(config)


# --- shapes and nondeterminism (issue 33): SHAPE_MUTANTS, registered in __init__.py ---------------


class RetryBehindFailoverNewFirst(RetryBehind):
    """Two ordering bugs of one anomaly kind: a message waiting out its retry back-off does not stop later messages
    of its key, and the pass of a leave serves the key's newer messages before the leaver's returned ones."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.returned_by_leave: set[int] = set()
        self.leaving = False

    def remove_consumer(self, consumer: object) -> Any:
        self.leaving = True
        try:
            return super().remove_consumer(consumer)
        finally:
            self.leaving = False
            self.returned_by_leave.clear()

    def return_to_pending(self, message: Message) -> None:
        super().return_to_pending(message)
        if self.leaving:
            self.returned_by_leave.add(message.offset)
        else:
            self.returned_by_leave.discard(message.offset)

    def deliver_key(self, key: str) -> None:
        queue = list(self.queues.get(key, ()))
        back = [o for o in queue if o in self.returned_by_leave] if self.leaving else []
        for offset in [o for o in queue if o not in back] + back:  # breaks KS-ORD-3 (the leave's own pass)
            message = self.messages.get(offset)
            if message is None or message.state in (MessageState.OUTSTANDING, MessageState.RETRYING):
                continue  # breaks KS-ORD-3 (a retrying message is passed over)
            if message.state is not MessageState.PENDING:
                return
            if self.dispatch_message(message) in ("held", "waits"):
                return


class NackSometimesBehind(Dispatcher):
    """One nack in five (a race with the consumer's next receive) requeues the message behind the later messages
    of its key: they are delivered while it waits out its back-off."""

    rng = random.Random(0)
    """Set per adapter (`NackSometimesBehindAdapter`): the draws go on across resets, so replays differ."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.behind: set[int] = set()

    def on_nack(self, member: Member, offset: int) -> None:
        super().on_nack(member, offset)
        self.behind.discard(offset)
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.RETRYING and self.rng.random() < 0.2:
            self.behind.add(offset)

    def _passed_over(self, offset: int) -> bool:
        return offset in self.behind and self.messages[offset].state is MessageState.RETRYING

    def first_candidate(self, key: str) -> int | None:
        if key in self.blocked:
            return None
        for offset in self.queues[key]:
            state = self.messages[offset].state
            if state is MessageState.PENDING:
                return offset
            if state is MessageState.OUTSTANDING or self._passed_over(offset):
                continue
            return None
        return None

    def deliver_key(self, key: str) -> None:
        for offset in list(self.queues.get(key, ())):
            message = self.messages.get(offset)
            if message is None or message.state is MessageState.OUTSTANDING or self._passed_over(offset):
                continue  # breaks KS-ORD-3, in one nack of five
            if message.state is not MessageState.PENDING:
                return
            if self.dispatch_message(message) in ("held", "waits"):
                return


class NackSometimesBehindAdapter(ReferenceAdapter):
    """The adapter of `NackSometimesBehind`: one seeded random stream per adapter, shared by its subscriptions."""

    def __init__(self, durable: bool = True) -> None:
        super().__init__(durable)
        self.rng = random.Random(20)

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        answer = super().reset(config)
        if isinstance(self._dispatcher, NackSometimesBehind):
            self._dispatcher.rng = self.rng
        return answer
