"""The bugs themselves: each class is the reference dispatcher with one rule broken.

Each docstring's first line says what is wrong in the words a broker team would use; the comment
at the change names the requirement it breaks. Nothing here is imported by the reference.
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

# --- ordering -------------------------------------------------------------------------------------


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


class NewestFirst(_OwnerOrderBug):
    """Messages queued behind a key's held head are sent newest first once the head goes (a LIFO backlog)."""

    def visit_order(self, key: str, queue: list[int]) -> list[int]:
        messages = [self.messages[o] for o in queue]
        if not _fresh(messages):
            return queue
        held = [m.offset for m in messages if m.held is not None]
        backlog = [m.offset for m in messages if m.held is None]
        return held + backlog[::-1]  # breaks KS-ORD-1 (a held message itself is never overtaken)


class HeldOvertaken(_OwnerOrderBug):
    """Once a key's message has been held, the newest message of the key goes first when room frees."""

    def visit_order(self, key: str, queue: list[int]) -> list[int]:
        messages = [self.messages[o] for o in queue]
        if _fresh(messages) and any(m.held is not None for m in messages):
            return queue[::-1]  # breaks KS-FLW-3
        return queue


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


# --- draining -------------------------------------------------------------------------------------


class NoDraining(Dispatcher):
    """A key's new owner is served at once, before the old owner acked what it holds."""

    def decide(self, message: Message) -> Decision:
        holders = self.key_holders.pop(message.key, None)  # breaks KS-DRN-1: the holders are not consulted
        try:
            return super().decide(message)
        finally:
            if holders is not None:
                self.key_holders[message.key] = holders


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


# --- assignment and filters -----------------------------------------------------------------------


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


class PartitionsRebalancedOnJoin(Dispatcher):
    """Selector `partitions` gives a joiner partitions of present members (a move to a joiner: fine for a ring)."""

    def load_from_store(self) -> None:
        super().load_from_store()
        if self.config.selector == "partitions":
            self.selector = RebalancingPartitions(self.config.partitions)


class FiltersIgnoredInRouting(Dispatcher):
    """A key goes to its ring target among all consumers, whether or not that consumer's filters accept it."""

    def target_name(self, key: str, placement: Placement | None) -> str | None:
        if self.eligible(key) == ():
            return None
        return self.selector.target(key, None)  # breaks KS-FLT-2


class FilterByRingTarget(Dispatcher):
    """A message is filtered out when its ring target does not accept it, even if another consumer would."""

    def decide(self, message: Message) -> Decision:
        if self.members:
            target = self.selector.target(message.key, None)
            member = self.members.get(target) if target is not None else None
            if member is not None and member.filters and not accepts(member.filters, message.key):
                return Decision("filter")  # breaks KS-FLT-3
        return super().decide(message)


class FilterWithoutMembers(Dispatcher):
    """With no consumer at all, messages are resolved as filtered instead of waiting for one."""

    def decide(self, message: Message) -> Decision:
        if not self.members:
            return Decision("filter")  # breaks KS-FLT-4
        return super().decide(message)


# --- flow control ---------------------------------------------------------------------------------


class CapacityIgnored(Dispatcher):
    """A consumer's capacity (its permits) is never checked."""

    def decide(self, message: Message) -> Decision:
        decision = super().decide(message)
        if decision.reason == "capacity" and decision.target is not None:
            return Decision("deliver", member=self.members[decision.target])  # breaks KS-FLW-1
        return decision


class WindowOverread(Dispatcher):
    """The read window is checked after reading, so one message more than `window` is read."""

    def read_into_window(self) -> None:
        window = self.config.window
        object.__setattr__(self.config, "window", window + 1)  # breaks KS-FLW-2
        try:
            super().read_into_window()
        finally:
            object.__setattr__(self.config, "window", window)


class PermitsOverdrawn(Dispatcher):
    """Under permits, a consumer whose permits are used up is still sent one more message."""

    def has_room(self, member: Member) -> bool:
        if self.config.flow_control == "permits":
            return member.permits > -1  # breaks KS-FLW-4: one delivery beyond the grants
        return super().has_room(member)


class LookaheadStopsEarly(Dispatcher):
    """Under the look-ahead bound, reading stops one waiting message before the limit."""

    def read_budget(self) -> int:
        budget = super().read_budget()
        if self.config.read_bound == "lookahead":
            return budget - 1  # breaks KS-ISO-3: reads stop while fewer than L messages wait
        return budget


class ParkingIgnored(Dispatcher):
    """Declares parking, but counts the parked messages toward the read bound as if parking were off."""

    def is_parked(self, index: int, message: Message) -> bool:
        return False  # breaks KS-ISO-4: a stuck key's backlog fills the window again and reading stops


class OutstandingParked(Dispatcher):
    """Counts every message behind a key's first `park_after` unresolved ones as parked, outstanding ones too."""

    def is_parked(self, index: int, message: Message) -> bool:
        return 0 < self.config.park_after <= index  # breaks KS-ISO-4, KS-FLW-2: outstanding ones leave the count


# --- acks, nacks, timeouts, retries ---------------------------------------------------------------


class StaleAckAccepted(Dispatcher):
    """An ack resolves an outstanding message whoever sends it (e.g. the key's previous owner)."""

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is not member:
            self.resolve(message, "acked", "ack", consumer=member.name)  # breaks KS-ACK-2
            return
        super().on_ack(member, offset)


class ZombieAckAccepted(Dispatcher):
    """A worker whose delivery ended (it timed out, left or was evicted) still acks it, and the ack resolves the
    message, whoever holds it now; the dispatcher does not declare `ack_by_id`."""

    def on_zombie(self, op: str, consumer: str, offset: int) -> None:
        message = self.messages.get(offset)
        if op == "zombie_ack" and message is not None:
            self.resolve(message, "acked", "ack", consumer=consumer)  # breaks KS-ACK-3 (no fencing)
            return
        super().on_zombie(op, consumer, offset)


class AckByIdIgnored(Dispatcher):
    """Declares `ack_by_id` but still fences a late ack: a zombie ack of an unresolved message is ignored."""

    def on_zombie(self, op: str, consumer: str, offset: int) -> None:
        if op == "zombie_ack" and self.config.ack_by_id and not self.cursor.is_resolved(offset):
            self.ack_ignored_total["ended"] += 1
            key = self.log[offset].key
            self.emit("ack_ignored", offset=offset, key=key, consumer=consumer, reason="ended")  # breaks KS-ACK-3
            return
        super().on_zombie(op, consumer, offset)


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


class SeekKeepsAcked(Dispatcher):
    """A backwards seek replays only what was unacknowledged: what was acked before it is not delivered again."""

    def on_seek(self, target: int) -> None:
        acked = [offset for offset in range(target, len(self.log)) if self.cursor.is_resolved(offset)]
        super().on_seek(target)
        for offset in acked:
            self.cursor.resolve(offset)  # breaks KS-CUR-8 (the replay skips what was acked)


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


class ExtendIgnored(Dispatcher):
    """Records the holder's extension but keeps the delivery's old deadline: it times out as if never extended."""

    def on_extend(self, member: Member, offset: int, ticks: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is member:
            # breaks KS-RTY-8 (the deadline stays delivery + ack_timeout)
            self.emit("extended", offset=offset, key=message.key, consumer=member.name, attempt=message.attempts)
            return
        super().on_extend(member, offset, ticks)


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


class DisconnectedAcksIgnored(Dispatcher):
    """An ack from a consumer whose connection dropped (not yet evicted) is ignored although it holds the message."""

    def on_ack(self, member: Member, offset: int) -> None:
        message = self.messages.get(offset)
        if message is not None and message.holder is member and not member.connected:
            self.ignore_ack("ack_ignored", member, offset, "not-holder", key=message.key)  # breaks KS-ACK-1
            return
        super().on_ack(member, offset)


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


class NoBackoff(Dispatcher):
    """A failed message is retried at the next tick, whatever the back-off says."""

    def fail(self, message: Message, how: str) -> None:
        super().fail(message, how)
        message.retry_at = self.now  # breaks KS-RTY-4


class AttemptReset(Dispatcher):
    """A redelivery restarts the attempt count at 1."""

    def deliver(self, message: Message, member: Member) -> None:
        message.attempts = 0  # breaks KS-RTY-5
        super().deliver(message, member)


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


# --- poison policies and operator actions ---------------------------------------------------------


class DropOnFirstFailure(Dispatcher):
    """The poison policy is applied at the first failure, not after `max_redeliveries` of them."""

    def fail(self, message: Message, how: str) -> None:
        super().fail(message, how)
        message.failures = max(message.failures, self.config.max_redeliveries + 1)  # breaks KS-RES-1


class DeadLetterAttempt(Dispatcher):
    """The dead letter carries the attempt count of the message's first delivery, not its last."""

    def apply_poison_policy(self, message: Message) -> None:
        attempts = message.attempts
        message.attempts = 1  # breaks KS-POI-2
        super().apply_poison_policy(message)
        message.attempts = attempts


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


class PoisonOneEarly(Dispatcher):
    """A message is poisoned when its failures reach max_redeliveries, one failure too early."""

    def phase_poison(self) -> None:
        limit = self.config.max_redeliveries
        for offset in sorted(self.retrying):
            message = self.messages[offset]
            if message.failures >= max(limit, 1):  # breaks KS-POI-3 (and KS-RTY-6): `>` is the rule
                self.apply_poison_policy(message)


class ReleaseKeepsBudget(Dispatcher):
    """An operator's release unblocks the key but keeps the message's failure count: it blocks again at once."""

    def on_release(self, key: str) -> None:
        kept = {offset: self.messages[offset].failures for offset in self.blocked.get(key, [])}
        super().on_release(key)
        for offset, failures in kept.items():
            self.messages[offset].failures = failures  # breaks KS-POI-4: no fresh budget


class SkipIgnored(Dispatcher):
    """The operator's skip is accepted but does nothing: the key stays blocked."""

    def on_skip(self, key: str) -> None:
        return  # breaks KS-POI-5


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


# --- membership -----------------------------------------------------------------------------------


class LeaveCountsAsAck(Dispatcher):
    """When a consumer leaves, what it held is acknowledged on its behalf and never delivered again."""

    def on_leave(self, member: Member) -> None:
        if self.config.reliable:
            for offset in sorted(member.outstanding):
                message = self.messages.get(offset)
                if message is not None:
                    self.resolve(message, "acked", "ack", consumer=member.name)  # breaks KS-MEM-1
        super().on_leave(member)


class ReturnsCountAsFailures(Dispatcher):
    """A message returned by a leaving or evicted consumer counts that as a failure toward poisoning."""

    def return_to_pending(self, message: Message) -> None:
        message.failures += 1  # breaks KS-RTY-7: the message did nothing wrong
        super().return_to_pending(message)


class DeclaredReturnsUncounted(Dispatcher):
    """It declares that returns count as failures (returns_as_failures), yet a return leaves the count alone."""

    def return_to_pending(self, message: Message) -> None:
        self.end_delivery(message)
        self.set_state(message, MessageState.PENDING)  # breaks KS-RTY-6 under the option: the return is a failure
        message.awaiting_redelivery = True


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


class UnackedResumesWhenEmpty(Dispatcher):
    """It declares Pulsar's unacked limit (max_unacked), but a blocked consumer resumes only once it holds nothing,
    not at half the limit."""

    def end_delivery(self, message: Message) -> Member:
        was_blocked = message.holder is not None and message.holder.unacked_blocked
        holder = super().end_delivery(message)
        if was_blocked and holder.outstanding:
            holder.unacked_blocked = True  # breaks KS-FLW-1's resume rule: it waits for every ack (ISO-1 sees it)
        return holder


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


class DisconnectedServed(Dispatcher):
    """A disconnected consumer keeps receiving messages until it is evicted."""

    def decide(self, message: Message) -> Decision:
        decision = super().decide(message)
        if decision.reason == "inactive" and decision.target is not None:
            member = self.members[decision.target]
            if len(member.outstanding) < member.capacity:
                return Decision("deliver", member=member)  # breaks KS-MEM-3
        return decision


# --- resolutions ----------------------------------------------------------------------------------


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


# --- the cursor -----------------------------------------------------------------------------------


class _HighestAckCursor(Cursor):
    def resolve(self, offset: int) -> None:
        if offset < self.position:
            return  # already passed over
        super().resolve(offset)
        if offset >= self.position:
            self.holes.remove_range(self.position, offset + 1)
            self.position = offset + 1  # breaks KS-CUR-1


class CursorAtHighestAck(Dispatcher):
    """The cursor moves to the highest resolved offset plus one, past messages still unresolved."""

    def load_from_store(self) -> None:
        super().load_from_store()
        self.cursor.__class__ = _HighestAckCursor


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


class PersistOnTickOnly(Dispatcher):
    """The cursor is persisted only on ticks, even when `persist_interval` is 0."""

    def persist_if_due(self, in_tick_phase_6: bool, tick: bool = False) -> None:
        if in_tick_phase_6:  # breaks KS-CUR-5
            super().persist_if_due(in_tick_phase_6, tick)


class PersistEagerly(Dispatcher):
    """The cursor is persisted at the end of every op that changed it, whatever `persist_interval` says."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        if self.config.persist_interval and self.cursor.position != self.persisted_position:
            return True  # breaks KS-CUR-7 (a cheap bug: it shows in almost every example that acks)
        return super().persistence_due(in_tick_phase_6, tick)


class CursorTailUnflushed(Dispatcher):
    """The cursor is persisted in batches of two offsets; a last odd offset is never flushed."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        if self.cursor.position - self.persisted_position < 2 and not self.config.persist_ack_holes:
            return False  # breaks KS-LIV-2
        return super().persistence_due(in_tick_phase_6, tick)


class AdvanceWrittenAtTick(Dispatcher):
    """Declares `persist_trigger = advance` but writes a moved cursor only in the next tick's phase 6 (a timer)."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        if not tick:
            return False  # breaks KS-CUR-12 (the move that made it due is not written at its op's end)
        return super().persistence_due(in_tick_phase_6, tick) or (
            self.cursor.position != self.persisted_position
            and (self.persisted_at is None or self.now - self.persisted_at >= self.config.persist_interval)
        )


class FlushNeverRuns(Dispatcher):
    """Declares `persist_flush` but never runs the periodic flush: a move within the interval waits for the next."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        self.flush_owed = False  # breaks KS-CUR-12 (the flush tick passes and writes nothing)
        return super().persistence_due(in_tick_phase_6, False) and self.cursor.position != self.position_at_begin


# --- isolation and the tick -----------------------------------------------------------------------


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


class HeartbeatSkipped(Dispatcher):
    """Declares heartbeat reads but polls the log at every other heartbeat only: an odd tick reads nothing."""

    def dispatch_pass(self, heartbeat: bool = False) -> None:
        super().dispatch_pass(heartbeat and self.now % 2 == 0)  # breaks KS-GEN-8 at odd ticks


class TimersTooLate(Dispatcher):
    """Runs its timers at every third tick, so they fire up to two ticks late, while it declares a slack of one."""

    def timers_due(self) -> bool:
        return self.now % 3 == 0  # breaks KS-GEN-9 with timer_slack 1


class DispatchBeforeEviction(Dispatcher):
    """A tick dispatches before it evicts (and again after), so evictions land after deliveries."""

    def phase_eviction(self) -> None:
        self.dispatch_pass()  # breaks KS-GEN-7
        super().phase_eviction()


# --- observability --------------------------------------------------------------------------------


class BlockedKeysHidden(Dispatcher):
    """The stats do not list blocked keys."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats["blocked_keys"] = []  # breaks KS-OBS-2
        stats["stuck_keys"] = [s for s in stats["stuck_keys"] if s["reason"] != "blocked"]
        stats["held_by_key"] = {k: v for k, v in stats["held_by_key"].items() if v["reason"] != "blocked"}
        return stats


# --- buckets --------------------------------------------------------------------------------------


class _Layout(BucketLayout):
    """Base for broken layouts: the dispatcher swaps its layout's class after every (re)load."""


class _OffByOneLayout(_Layout):
    def place(self, key: str) -> Placement:
        placement = super().place(key)
        buckets = self.segments[placement.segment].buckets
        return Placement(placement.hash, placement.segment, (placement.bucket + 1) % buckets)  # breaks KS-BKT-1


class _NoHandoffLayout(_Layout):
    def is_withheld(self, placement: Placement) -> bool:
        return False  # breaks KS-BKT-4


class _SuccessorFirstLayout(_Layout):
    def predecessor_pending(self, segment_number: int) -> bool:
        return False  # breaks KS-BKT-5


class _CheckpointAheadLayout(_Layout):
    def advance_checkpoints(self, durably_resolved: Any) -> dict[tuple[int, int], int]:
        return super().advance_checkpoints(lambda offset: True)  # breaks KS-BKT-6


class _MergeWaitsForOneLayout(_Layout):
    def predecessor_pending(self, segment_number: int) -> bool:
        segment = self.segments[segment_number]
        second = segment.second_predecessor
        segment.second_predecessor = None  # breaks KS-BKT-5: a merged segment waits for its lower predecessor only
        try:
            return super().predecessor_pending(segment_number)
        finally:
            segment.second_predecessor = second


class _LayoutBug(Dispatcher):
    layout_class: type[_Layout] = _Layout

    def load_from_store(self) -> None:
        super().load_from_store()
        if self.layout is not None:
            self.layout.__class__ = self.layout_class


class BucketOffByOne(_LayoutBug):
    """A message goes to the bucket after the one its hash names."""

    layout_class = _OffByOneLayout


class NoHandoff(_LayoutBug):
    """A bucket is handed to its new owner at once, while the old owner still holds its messages."""

    layout_class = _NoHandoffLayout


class SuccessorFirst(_LayoutBug):
    """A successor segment is served while its predecessor still has unresolved messages of its range."""

    layout_class = _SuccessorFirstLayout


class CheckpointAhead(_LayoutBug):
    """A bucket's checkpoint moves to its last published message, past unresolved ones."""

    layout_class = _CheckpointAheadLayout


class MergeWaitsForOne(_LayoutBug):
    """A merged segment is served once its lower predecessor drained, while the upper one still has messages."""

    layout_class = _MergeWaitsForOneLayout


class CheckpointsIgnoredAtRestart(Dispatcher):
    """Checkpoints follow every resolution of their bucket, but a restart resumes from the global cursor only."""

    def resume_from_checkpoints(self) -> None:
        return  # breaks KS-BKT-9


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


class BatchSplit(Dispatcher):
    """A batch is dispatched message by message, like single messages: its keys go in the pass's key order."""

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        return [message]  # breaks KS-BKT-10


class KeyBatchSplit(Dispatcher):
    """A key-based batch (outside buckets) is dispatched message by message: its later messages wait for room."""

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        if self.layout is None:
            return [message]  # breaks KS-BKT-10 (the rest goes in a later op, or to the key's next consumer)
        return super().batch_to_deliver(message, holder)


class BatchChargedOnePermit(Dispatcher):
    """Under permits a batch is charged one permit, like one message, as if permits counted entries."""

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        batch = super().batch_to_deliver(message, holder)
        if batch is not None and self.config.flow_control == "permits":
            holder.permits += len(batch) - 1  # breaks KS-FLW-4 (each delivery of the batch then takes one back)
        return batch


class OwnersReversed(Dispatcher):
    """Bucket owners are counted over the members sorted in reverse name order."""

    def membership_changed(self) -> None:
        super().membership_changed()
        self.members_by_name = sorted(self.members, reverse=True)  # breaks KS-BKT-3


# --- best-effort ----------------------------------------------------------------------------------


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


class DropsUncounted(Dispatcher):
    """Best-effort drops are recorded as events but not counted in the stats."""

    def best_effort_drop(self, offset: int, key: str, reason: str) -> None:
        super().best_effort_drop(offset, key, reason)
        self.dropped_total[reason] -= 1  # breaks KS-BEF-2
        if self.dropped_total[reason] == 0:
            del self.dropped_total[reason]
        self.resolved_total["dropped"] -= 1


# --- refusals and configuration -------------------------------------------------------------------


class DuplicateNameAccepted(Dispatcher):
    """A consumer joining under a name already in use replaces the member instead of being refused."""

    def check_join(
        self, name: object, capacity: object, filters: object, ranges: object, hash_name: object = None
    ) -> Member:
        if isinstance(name, str) and name in self.members:
            self.on_leave(self.members[name])  # breaks KS-GEN-4
        return super().check_join(name, capacity, filters, ranges, hash_name)


class LenientConfigAdapter(ReferenceAdapter):
    """Reset drops configuration fields it does not know instead of refusing them."""

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        known = set(CONFIG_DEFAULTS)  # every field of spec section 20: only the unknown ones are dropped
        if isinstance(config, Mapping):
            config = {k: v for k, v in config.items() if k in known}  # breaks KS-CFG-1
        return super().reset(config)


class RestartKeepsVolatileAcks(Dispatcher):
    """A restart keeps the acks it had not persisted yet and never dispatches those messages again."""

    def on_restart(self) -> None:
        volatile = BitMap64(self.cursor.holes)
        super().on_restart()
        for offset in volatile:
            if offset >= self.cursor.position:
                self.cursor.holes.add(offset)  # breaks KS-CUR-3: resumes from memory, not from the store


# --- adapter protocol v2: no key affinity, no cursor, implementation-defined outcomes -------------


class NeverFilters(Dispatcher):
    """A message whose key no member accepts waits for a consumer that may never come, instead of being filtered."""

    def decide(self, message: Message) -> Decision:
        if self.members and self.eligible(message.key) == ():
            return Decision("hold", reason="no-consumer")  # breaks KS-FLT-3
        return super().decide(message)


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


class OutcomeUndeclared(OutcomeAdapter):
    """A poisoned message ends with an outcome ('discarded') that the implementation declares as no resolution."""


# --- SHOULD requirements: caught as warnings ------------------------------------------------------


class StatsMiscount(Dispatcher):
    """The stats count a redelivery twice in `delivered_total`."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats["delivered_total"] += stats["redelivered_total"]  # breaks KS-OBS-1
        return stats


class StatsNowLags(Dispatcher):
    """The stats report `now` as it was before the last tick (the gauge is refreshed lazily)."""

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        stats["now"] = max(0, stats["now"] - 1)  # breaks KS-OBS-1 (a cheap bug: it shows at the first tick)
        return stats


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


class ReconnectIgnored(Dispatcher):
    """A reconnect is acknowledged but changes nothing: the member stays inactive and is evicted on schedule."""

    def on_reconnect(self, member: Member) -> None:
        return  # breaks KS-MEM-4


class StickyInName(Dispatcher):
    """Declares the sticky bucket policy, but assigns buckets by position among the sorted names."""

    def load_from_store(self) -> None:
        super().load_from_store()
        if self.layout is not None:
            self.layout.policy = "sorted"  # breaks KS-BKT-8: a join shifts buckets between members that stay


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


class DrainUnmovedHash(Dispatcher):
    """Hash-granularity draining that counts every hash with a delivery outstanding as draining, even at the hash's
    own target: PIP-379 marks a hash draining only when its owner changes."""

    def slot_mate_draining(self, message: Message, target: Member) -> bool:
        if self.key_holders.get(message.key):
            return True  # breaks KS-DRN-2: the slot's target did not move, nothing drains
        return super().slot_mate_draining(message, target)


class DanubeOrderUndeclared(Dispatcher):
    """Delivers ready retries before eviction (Danube's order) while the configuration says `standard`."""

    def phase_retry_ready(self) -> None:
        super().phase_retry_ready()
        self.deliver_step()  # breaks KS-GEN-7 unless tick_order is danube


# --- declarations and system faults (issue 33) ----------------------------------------------------


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


class TimesOutWithoutTimers(ReferenceAdapter):
    """Declares no timers (timers: false), yet a delivery not acked within 2 ticks times out."""

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(config, Mapping) and config.get("profile") != "best-effort":
            config = {**config, "ack_timeout": 2}  # breaks KS-RTY-2: the declared absence of timers
        return super().reset(config)


# --- shapes and nondeterminism (issue 33) -----------------------------------------------------------


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


class ReportedLayoutMisroutes(Dispatcher):
    """It splits a segment where its load divides (layout reported), but reports the midpoint as the split point."""

    def _reported(self, outcome: Outcome, created: list[Segment]) -> Outcome:
        outcome = super()._reported(outcome, created)
        if outcome.segments is not None and len(created) == 2:
            lower, upper = outcome.segments
            middle = (lower["range_lo"] + upper["range_hi"]) // 2  # breaks KS-BKT-1: routing follows the load point
            lower["range_hi"], upper["range_lo"] = middle, middle + 1
        return outcome


class ReportedLayoutInvalid(Dispatcher):
    """Its split reports the upper child from the split point itself, so both children claim that slot."""

    def _reported(self, outcome: Outcome, created: list[Segment]) -> Outcome:
        outcome = super()._reported(outcome, created)
        if outcome.segments is not None and len(created) == 2:
            outcome.segments[1]["range_lo"] -= 1  # breaks KS-BKT-11: the children overlap at the split point
        return outcome


class DelayedDeliveredEarly(Dispatcher):
    """A delayed message is dispatched as soon as it is read: the tracker ignores its due tick."""

    def read_into_window(self) -> None:
        super().read_into_window()
        for offset in sorted(self.delayed):
            self.set_state(self.messages[offset], MessageState.PENDING)  # breaks KS-ORD-5


class DelayedBlocksKey(Dispatcher):
    """A key's later messages wait behind its delayed message until that one falls due (kept in key order)."""

    def first_candidate(self, key: str) -> int | None:
        first = super().first_candidate(key)
        queue = self.queues[key]
        if first is not None and any(o < first and self.messages[o].state is MessageState.DELAYED for o in queue):
            return None  # breaks KS-ORD-6
        return first


class DelayedNeverDue(Dispatcher):
    """The delayed-delivery tracker never releases a message: once read, a delayed message waits for ever."""

    def delays_due(self) -> None:
        return  # breaks KS-ORD-7
