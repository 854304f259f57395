"""The dispatch pass (spec section 3) with the ordering, draining and flow-control rules (sections 6 to 8).

A pass repeats (a) read while the window has room and (b) deliver: for every key with a
pending message, in order of the key's earliest pending offset, take its messages in offset
order and deliver each that the rules allow, stopping at the first that they do not.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import takewhile

from ks_reference.core import Core, Member, Message, MessageState, placement_of


@dataclass(frozen=True)
class Decision:
    """What the rules say about one pending message: deliver to `member`, hold for `reason`, or filter it."""

    action: str  # "deliver", "hold" or "filter"
    member: Member | None = None
    reason: str | None = None
    target: str | None = None


class DispatchPass(Core):
    """The dispatch pass and the rules that decide each delivery."""

    def dispatch_pass(self, heartbeat: bool = False) -> None:
        """Run reads and deliveries until nothing changes (KS-GEN-6). With `read_trigger = "heartbeat"` only a
        tick's pass (`heartbeat`) reads, as Danube polls its log at its heartbeat; every pass delivers (KS-GEN-8)."""
        reads = heartbeat or self.config.read_trigger == "every-op"  # req: KS-GEN-8
        while True:
            if reads:
                self.read_into_window()
            self.reconcile_buckets()
            before = self.cursor.position, self.cursor.hole_count(), self.delivered_total
            self.deliver_step()
            room = reads and self.read_budget() > 0 and self.read_position < len(self.log)
            # a resolution makes room in the window; a delivery makes room in the look-ahead (it no longer waits)
            if not room or (self.cursor.position, self.cursor.hole_count(), self.delivered_total) == before:
                return

    def read_budget(self) -> int:
        """How many more messages the read bound lets the pass read now (spec section 8)."""
        if self.config.read_bound == "lookahead":
            if not any(m.connected and self.has_room(m) for m in self.members.values()):
                return 0  # req: KS-ISO-3 (reading waits for a member that can take a delivery)
            waiting = sum(1 for m in self.messages.values() if m.state is not MessageState.OUTSTANDING)
            # req: KS-FLW-5, KS-ISO-3 (read while fewer than L read messages wait), KS-ISO-4 (parked ones aside)
            return self.config.lookahead_limit(len(self.members)) - (waiting - self.parked_count())
        # req: KS-FLW-2, KS-ISO-2, KS-ISO-4 (the window counts the read messages that are not parked)
        return self.config.window - (len(self.messages) - self.parked_count())

    def is_parked(self, index: int, message: Message) -> bool:
        """Spec section 15: a read, unresolved message is parked when it is not outstanding and at least
        `park_after` earlier messages of its key are unresolved (`index`: its place in its key's queue)."""
        return 0 < self.config.park_after <= index and message.state is not MessageState.OUTSTANDING

    def parked_count(self) -> int:
        """How many read messages are parked (none with parking off)."""
        if self.config.park_after == 0:
            return 0
        return sum(
            1
            for queue in self.queues.values()
            for index, offset in enumerate(queue)
            if self.is_parked(index, self.messages[offset])
        )

    def read_into_window(self) -> None:
        """Read the next messages in offset order while the read bound allows (KS-FLW-2, KS-ISO-2, KS-ISO-3)."""
        budget = self.read_budget()
        while self.read_position < len(self.log) and (budget > 0 or self.inside_batch(self.read_position)):
            offset = self.read_position
            self.read_position += 1
            if self.cursor.is_resolved(offset):
                continue  # req: KS-CUR-4 (a persisted ack hole is not read again)
            entry = self.log[offset]
            message = Message(offset, entry.key, entry=entry.entry, deliver_at=entry.deliver_at)
            if self.layout is not None:
                message.placement = placement_of(entry)
            self.messages[offset] = message
            queue = self.queues.setdefault(entry.key, [])
            if not self.is_parked(len(queue), message):
                budget -= 1  # a read message is unresolved (window) and waits (look-ahead), unless parked (KS-ISO-4)
            queue.append(offset)
            if entry.deliver_at is not None and entry.deliver_at > self.now:
                # req: KS-ORD-5 (not yet due: into the delayed-delivery tracker; it keeps its place in the window)
                message.state = MessageState.DELAYED
                self.delayed.add(offset)
            else:
                self.pending_counts[entry.key] += 1

    def delays_due(self) -> None:
        """Phase 3 (with the retries): every delayed message whose due tick has come becomes pending (KS-ORD-7)."""
        for offset in sorted(self.delayed):
            message = self.messages[offset]
            if message.deliver_at is not None and message.deliver_at <= self.now:
                # req: KS-ORD-7, KS-GEN-9 (due: as ready as any pending message; late by at most the slack)
                self.set_state(message, MessageState.PENDING)

    def inside_batch(self, offset: int) -> bool:
        """True when `offset` belongs to a batch that began before it: a batch is read whole (spec section 17)."""
        entry = self.log[offset].entry
        return entry is not None and entry < offset

    def reconcile_buckets(self) -> None:
        """Hand over or withhold buckets whose target changed (KS-BKT-4); emitted in the pass (phase 5)."""
        if self.layout is None:
            return
        for event, (segment, bucket), consumer in self.layout.reconcile(self.members_by_name):
            self.emit(event, segment=segment, bucket=bucket, consumer=consumer)

    def controller_step(self) -> None:
        """With `controller_moves`, PIP-486's controller evens the load once per tick (KS-BKT-3); a bucket it moves is
        handed over, or withheld while its prior owner drains, in the next pass (KS-BKT-4)."""
        if self.layout is None or not self.layout.controller_moves:
            return
        unresolved: Counter[tuple[int, int]] = Counter()
        for message in self.messages.values():
            if message.placement is not None:
                unresolved[(message.placement.segment, message.placement.bucket)] += 1
        self.layout.controller_step(unresolved, self.members_by_name)

    def deliver_step(self) -> None:
        """Visit every key with a pending message, earliest pending offset first."""
        self.holds = {}
        candidates = []
        for key in self.pending_counts:
            first = self.first_candidate(key)
            if first is not None:
                candidates.append((first, key))
        candidates.sort()  # req: KS-GEN-5 (a fixed order: the same ops give the same events)
        # req: KS-ISO-1 (every key with a pending message is visited, whatever other keys are stuck)
        for _, key in candidates:
            self.deliver_key(key)

    def first_candidate(self, key: str) -> int | None:
        """The key's first message a delivery could start from, or None when an earlier one makes it wait."""
        if key in self.blocked:
            # req: KS-POI-3 (owner: not even an earlier message of the key, retried after a later one was blocked)
            return None
        strict = self.config.profile == "strict"
        for offset in self.queues[key]:
            state = self.messages[offset].state
            if state is MessageState.PENDING:
                return offset
            if state is MessageState.DELAYED:
                continue  # req: KS-ORD-6 (a message not yet due holds back nothing of its key)
            if state is MessageState.OUTSTANDING and not strict:
                continue
            return None
        return None

    def deliver_key(self, key: str) -> None:
        """Deliver the key's messages in offset order, stopping at the first the rules hold back."""
        for offset in list(self.queues.get(key, ())):
            message = self.messages.get(offset)
            if message is None:
                continue  # resolved earlier in this loop
            if message.state is MessageState.DELAYED:
                continue  # req: KS-ORD-6 (not yet due: later messages of its key go without it)
            if message.state is MessageState.OUTSTANDING:
                if self.config.profile == "strict":
                    return  # req: KS-ORD-2 (nothing of a key while an earlier one is unresolved)
                continue  # req: KS-ORD-4 (owner: later messages may go to the holder while it holds earlier ones)
            if message.state is not MessageState.PENDING:
                return  # req: KS-ORD-3, KS-POI-3, KS-RES-2 (only pending messages are ever delivered)
            outcome = self.dispatch_message(message)
            if outcome in ("held", "waits"):
                return  # req: KS-FLW-3, KS-ORD-1 (a held message keeps its place; nothing later overtakes it)
            if outcome == "delivered" and self.config.profile == "strict":
                return  # req: KS-ORD-2

    def dispatch_message(self, message: Message) -> str:
        """Apply the rules to one pending message and act on them: "filtered", "held", "delivered", or "waits"
        (beyond the window, no event)."""
        decision = self.decide(message)
        if decision.action == "filter":
            # req: KS-FLT-3
            self.resolve(message, "filtered", "filter")
            return "filtered"
        if decision.action == "hold":
            self.hold(message, decision.reason or "", decision.target)
            return "held"
        if decision.member is None:
            raise AssertionError("a delivery decision without a member")
        if message.attempts == 0 and self.beyond_window(message.offset):
            return "waits"  # req: KS-FLW-2, KS-ISO-4 (parked messages delivered since it was read count again)
        if message.entry is not None and message.attempts == 0:
            batch = self.batch_to_deliver(message, decision.member)
            if batch is None:
                return "waits"  # req: KS-BKT-10 (queued: another message of the batch cannot go yet)
            for mate in batch:
                # req: KS-BKT-10, KS-FLW-1, KS-FLW-4 (the batch follows its first message, room or permits or not)
                self.deliver(mate, decision.member)
            return "delivered"
        self.deliver(message, decision.member)
        return "delivered"

    def batch_to_deliver(self, message: Message, holder: Member) -> list[Message] | None:
        """The batch's messages not yet delivered since they were read, from `message` on, when it may go whole now;
        None when `message` is not its first such message, or another cannot go: an earlier message of its key
        awaits redelivery or is not delivered, its key is blocked, or another consumer holds its key (KS-BKT-10)."""

        def undelivered(offset: int) -> bool:
            m = self.messages.get(offset)
            return m is not None and m.attempts == 0 and m.state is MessageState.PENDING

        if any(undelivered(offset) for offset in range(message.entry or 0, message.offset)):
            return None
        # A batch's offsets are consecutive: its mates end at the first offset of another entry.
        following = takewhile(
            lambda offset: self.log[offset].entry == message.entry, range(message.offset + 1, len(self.log))
        )
        mates = [self.messages[offset] for offset in following if undelivered(offset)]
        batch = [message, *mates]
        going = {m.offset for m in batch}
        for mate in mates:
            if mate.key == message.key:
                # req: KS-BKT-10, KS-ORD-6 (a mate of the first message's key goes where that one goes: the decision
                # made for it covers its key, and a key-based batch, PIP-34, has no other key)
                continue
            if mate.key in self.blocked:
                return None
            if any(h is not holder for h in self.key_holders.get(mate.key, ())):
                return None
            for offset in self.queues[mate.key]:
                if offset >= mate.offset:
                    break
                state = self.messages[offset].state
                if offset not in going and state is not MessageState.OUTSTANDING:
                    return None  # req: KS-ORD-1, KS-ORD-3 (an earlier message of its key must go first)
        return batch

    def beyond_window(self, offset: int) -> bool:
        """With parking under the window: True when `window` or more earlier read messages are unresolved and not
        parked. Reading counts only what is not parked, so a message read past parked ones can find the window
        full at its first delivery once they were delivered (KS-FLW-2, KS-ISO-4)."""
        if self.config.park_after == 0 or self.config.read_bound != "window":
            return False
        counted = sum(
            1
            for queue in self.queues.values()
            for index, earlier in enumerate(queue)
            if earlier < offset and not self.is_parked(index, self.messages[earlier])
        )
        return counted >= self.config.window

    def decide(self, message: Message) -> Decision:
        """Apply the rules of sections 4 to 17 to one pending message."""
        if not self.members:
            # req: KS-FLT-4
            return Decision("hold", reason="no-consumer")
        if self.eligible(message.key) == ():
            return Decision("filter")
        target_name = self.target_name(message.key, message.placement)
        if target_name is None:
            # req: KS-ASN-7 (no declared range covers the slot)
            return Decision("hold", reason="no-consumer")
        target = self.members[target_name]
        if self.layout is not None and message.placement is not None:
            if self.layout.predecessor_pending(message.placement.segment):
                # req: KS-BKT-5
                return Decision("hold", reason="predecessor", target=target_name)
            if self.layout.is_withheld(message.placement):
                # req: KS-BKT-4
                return Decision("hold", reason="handoff", target=target_name)
        holders = None if self.config.out_of_order else self.key_holders.get(message.key)
        if holders and any(holder is not target for holder in holders):
            # req: KS-DRN-1, KS-ASN-9 (a redelivery goes to the current target, after the drain)
            return Decision("hold", reason="draining", target=target_name)
        if (
            not self.config.out_of_order
            and self.config.drain_granularity == "hash"
            and self.slot_mate_draining(message, target)
        ):
            # req: KS-DRN-3 (PIP-379 drains hashes: a key waits while a key of its slot drains, retries or is blocked)
            return Decision("hold", reason="draining", target=target_name)
        if not target.connected:
            # req: KS-MEM-3
            return Decision("hold", reason="inactive", target=target_name)
        if not self.has_room(target):
            # req: KS-FLW-1, KS-FLW-4 (no room below the capacity, or no permit)
            return Decision("hold", reason="capacity", target=target_name)
        return Decision("deliver", member=target)

    def slot_mate_draining(self, message: Message, target: Member) -> bool:
        """True when another key of the message's slot is held by a consumer other than `target`, is blocked, or has
        an earlier message awaiting redelivery (hash-granularity draining, KS-DRN-3). Only an earlier one: two keys
        of a slot that both await redelivery would otherwise wait for each other for ever (KS-DRN-2)."""
        key = message.key
        slot = self.selector.position(key)
        for other, offsets in self.queues.items():
            if other == key or self.selector.position(other) != slot:
                continue
            if other in self.blocked or any(holder is not target for holder in self.key_holders.get(other, ())):
                return True
            for offset in offsets:
                mate = self.messages[offset]
                if offset < message.offset and (mate.state is MessageState.RETRYING or mate.awaiting_redelivery):
                    return True
        return False

    def hold(self, message: Message, reason: str, target: str | None) -> None:
        """Hold a message in place; report it when it becomes held and when the reason changes (KS-OBS-3)."""
        self.holds[message.key] = message.offset
        if message.held == (reason, target):
            return
        if message.held is None:
            message.held_since = self.now
        message.held = (reason, target)
        # req: KS-OBS-3
        self.emit("held", offset=message.offset, key=message.key, reason=reason, consumer=target)
