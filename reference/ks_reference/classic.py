"""Classic Pulsar Key_Shared (before PIP-379), with PIP-282's "recently joined consumers", reproduced on purpose.

Classic Key_Shared has no per-key draining. A consumer that joins while messages are unacked is recorded with
the last sent position (every offset below it was sent at least once); until the mark-delete position (the
contiguous resolved prefix) reaches it, the joiner receives only messages below it, redeliveries only below the
earliest joiner's position, and later messages routed to it wait. While they wait the dispatcher reads no further.
PIP-379 replaced this because it blocks keys that need not wait and can still break key order.
"""

from __future__ import annotations

from ks_reference.core import Member, Message, MessageState
from ks_reference.dispatch import Decision
from ks_reference.dispatcher import Dispatcher


class RecentlyJoinedConsumers(Dispatcher):
    """Key_Shared with PIP-282's recently joined consumers in place of draining (spec section 7 does not hold)."""

    def load_from_store(self) -> None:
        """A restart forgets the recently joined consumers with the members (they are broker memory in Pulsar)."""
        super().load_from_store()
        self.joined_positions: dict[Member, int] = {}
        """Per recently joined member: the first offset not sent when it joined (it may receive offsets below)."""
        self.waiting_for_joiners: set[int] = set()
        """Offsets the last dispatch step held back for a recently joined target."""

    def on_seek(self, target: int) -> None:
        """A seek forgets the recently joined consumers: Pulsar disconnects every consumer of the subscription."""
        super().on_seek(target)
        self.joined_positions.clear()

    def last_sent_bound(self) -> int:
        """The first offset at or after the cursor that is unresolved and was never sent: PIP-282's last sent
        position plus one."""
        offset = self.cursor.position
        while offset < self.read_position:
            message = self.messages.get(offset)
            if not self.cursor.is_resolved(offset) and (message is None or message.attempts == 0):
                break
            offset += 1
        return offset

    def on_join(self, member: Member) -> None:
        """Record the joiner's position when other members exist and unacked messages lie below it (as Pulsar)."""
        super().on_join(member)
        bound = self.last_sent_bound()
        if len(self.members) > 1 and bound > self.cursor.position:
            self.joined_positions[member] = bound

    def on_leave(self, member: Member) -> None:
        """A leaving member leaves the recently joined set; with one member left the set is cleared (as Pulsar)."""
        super().on_leave(member)
        self.joined_positions.pop(member, None)
        if len(self.members) <= 1:
            self.joined_positions.clear()

    def forget_caught_up_joiners(self) -> None:
        """A joiner is an ordinary member once the mark-delete position has reached its recorded position."""
        for member, bound in list(self.joined_positions.items()):
            if bound <= self.cursor.position:
                del self.joined_positions[member]

    def joiner_limit(self, target: Member, message: Message) -> int | None:
        """The offset from which `message` may not go to `target`, or None when `target` is not a recent joiner:
        its own position for a first delivery, the earliest joiner's position for a redelivery."""
        self.forget_caught_up_joiners()
        bound = self.joined_positions.get(target)
        if bound is None:
            return None
        if message.attempts > 0:
            return min(self.joined_positions.values())
        return bound

    def decide(self, message: Message) -> Decision:
        """The selector's target, unless the recently joined rule holds the message; no per-key draining."""
        if not self.members:
            return Decision("hold", reason="no-consumer")
        if self.eligible(message.key) == ():
            return Decision("filter")
        target_name = self.target_name(message.key, message.placement)
        if target_name is None:
            return Decision("hold", reason="no-consumer")
        target = self.members[target_name]
        limit = self.joiner_limit(target, message)
        if limit is not None and message.offset >= limit:
            self.waiting_for_joiners.add(message.offset)
            return Decision("hold", reason="draining", target=target_name)
        if not target.connected:
            return Decision("hold", reason="inactive", target=target_name)
        if not self.has_room(target):
            return Decision("hold", reason="capacity", target=target_name)
        return Decision("deliver", member=target)

    def deliver_step(self) -> None:
        """A dispatch step, remembering which messages it held back for a recent joiner."""
        self.waiting_for_joiners = set()
        super().deliver_step()

    def joiner_waits(self) -> bool:
        """True while a read, pending message still waits for a recent joiner's position."""
        for offset in self.waiting_for_joiners:
            message = self.messages.get(offset)
            if message is None or message.state is not MessageState.PENDING:
                continue
            target_name = self.target_name(message.key, message.placement)
            limit = None if target_name is None else self.joiner_limit(self.members[target_name], message)
            if limit is not None and offset >= limit:
                return True
        return False

    def read_budget(self) -> int:
        """Nothing more is read while a message waits for a recent joiner: classic Pulsar replays the waiting
        messages instead of reading ahead, which blocks every other key (PIP-379's "unnecessary blocking")."""
        if self.joiner_waits():
            return 0
        return super().read_budget()
