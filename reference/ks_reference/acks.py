"""Acknowledgements (spec section 9): an ack from the holder resolves; every other ack is ignored and recorded."""

from __future__ import annotations

from ks_reference.core import Core, Member, MessageState


class Acks(Core):
    """The `ack` operation for the strict and owner profiles."""

    def on_ack(self, member: Member, offset: int) -> None:
        """Resolve the message as acked if `member` holds its outstanding delivery; otherwise record why not."""
        if offset >= len(self.log):
            # req: KS-ACK-2
            self.ignore_ack("ack_ignored", member, offset, "unknown-offset", key=None)
            return
        key = self.log[offset].key
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is member:
            # req: KS-ACK-1
            self.resolve(message, "acked", "ack", consumer=member.name)
            return
        reason = "resolved" if self.cursor.is_resolved(offset) else "not-holder"
        # req: KS-ACK-2, KS-GEN-3 (a reused name's predecessor's deliveries are not held by the new member)
        self.ignore_ack("ack_ignored", member, offset, reason, key=key)

    def on_zombie(self, op: str, consumer: str, offset: int) -> None:
        """A result for a delivery that already ended (`zombie_ack`, `zombie_nack`): ignored and recorded, unless
        `ack_by_id` lets a zombie ack resolve an unresolved message by its id."""
        message = self.messages.get(offset)
        key = self.log[offset].key
        if op == "zombie_ack" and self.config.ack_by_id and message is not None:
            # req: KS-ACK-3 (ack_by_id: the ack names the message; its outstanding delivery ends with it)
            self.resolve(message, "acked", "ack", consumer=consumer)
            return
        reason = "resolved" if self.cursor.is_resolved(offset) else "ended"
        self.ack_ignored_total[reason] += 1
        # req: KS-ACK-3 (the delivery it answers ended: fenced, whoever holds the message now)
        self.emit("ack_ignored" if op == "zombie_ack" else "nack_ignored", offset=offset, key=key, consumer=consumer,
                  reason=reason)  # fmt: skip

    def ignore_ack(self, event: str, member: Member, offset: int, reason: str, key: str | None) -> None:
        """Record an ack or nack that changed nothing, with its reason."""
        self.ack_ignored_total[reason] += 1
        self.emit(event, offset=offset, key=key, consumer=member.name, reason=reason)
