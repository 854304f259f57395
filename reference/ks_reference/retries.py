"""Negative acks, ack timeouts and retries (spec section 10)."""

from __future__ import annotations

from ks_reference.acks import Acks
from ks_reference.core import Member, Message, MessageState


def backoff(failures: int, base: int, maximum: int) -> int:
    """Ticks to wait after the f-th failure: `min(base * 2^(f-1), maximum)` (KS-RTY-4).

    pre: failures >= 1
    pre: 0 <= base <= maximum
    post: 0 <= __return__ <= maximum
    post: __return__ == min(base * 2 ** (failures - 1), maximum)
    """
    if base == 0:
        return 0
    if failures - 1 >= maximum.bit_length():  # 2^(f-1) alone already exceeds the cap
        return maximum
    return min(base << (failures - 1), maximum)


class Retries(Acks):
    """The `nack` operation and the tick phases for timeouts (1) and retry readiness (3)."""

    def on_nack(self, member: Member, offset: int) -> None:
        """A nack from the holder ends the delivery and makes the message retrying; any other is ignored."""
        if offset >= len(self.log):
            self.ignore_ack("nack_ignored", member, offset, "unknown-offset", key=None)
            return
        message = self.messages.get(offset)
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is member:
            # req: KS-RTY-1
            self.emit("nack", offset=offset, key=message.key, consumer=member.name, attempt=message.attempts)
            self.end_delivery(message)
            self.fail(message, "nack")
            return
        reason = "resolved" if self.cursor.is_resolved(offset) else "not-holder"
        # req: KS-RTY-1
        self.ignore_ack("nack_ignored", member, offset, reason, key=self.log[offset].key)

    def fail(self, message: Message, how: str) -> None:
        """Count a failure and start the back-off (the message is retrying until phase 3 finds it ready)."""
        message.failures += 1
        message.last_failure = how
        message.retry_at = self.now + backoff(message.failures, self.config.backoff_base, self.config.backoff_max)
        self.set_state(message, MessageState.RETRYING)

    def phase_timeouts(self) -> None:
        """Phase 1: every delivery outstanding for `ack_timeout` ticks times out (KS-RTY-2, KS-RTY-3)."""
        timeout = self.config.ack_timeout
        if timeout == 0:
            return  # req: KS-RTY-2 (0 disables timeouts)
        due = sorted(
            offset
            for member in self.members.values()
            for offset in member.outstanding
            if self.timeout_at(self.messages[offset], timeout) <= self.now
        )
        for offset in due:
            message = self.messages[offset]
            holder = message.holder
            # req: KS-RTY-3
            self.emit(
                "timeout",
                offset=offset,
                key=message.key,
                consumer=holder.name if holder else None,
                attempt=message.attempts,
            )
            self.end_delivery(message)
            self.fail(message, "timeout")

    @staticmethod
    def timeout_at(message: Message, timeout: int) -> int:
        """The tick the message's outstanding delivery times out at: its extended deadline, else delivery + timeout."""
        # req: KS-RTY-8 (an extension replaces the deadline)
        return message.deadline if message.deadline is not None else message.delivered_at + timeout

    def on_extend(self, member: Member, offset: int, ticks: int) -> None:
        """An extension: the holder's delivery times out at now + ticks; any other changes nothing, recorded."""
        message = self.messages.get(offset)
        key = self.log[offset].key
        if message is not None and message.state is MessageState.OUTSTANDING and message.holder is member:
            # req: KS-RTY-8 (from now, replacing the earlier deadline, as SQS and Pub/Sub do)
            message.deadline = self.now + ticks
            self.emit("extended", offset=offset, key=key, consumer=member.name, attempt=message.attempts)
            return
        if self.cursor.is_resolved(offset):
            reason = "resolved"
        elif member.name in self.delivery_holders.get(offset, []):
            reason = "ended"  # a delivery of it to this name ended (timed out, returned, a predecessor's): fenced
        else:
            reason = "not-holder"
        # req: KS-RTY-9 (nobody's deadline moves)
        self.emit("extend_ignored", offset=offset, key=key, consumer=member.name, reason=reason)

    def phase_retry_ready(self) -> None:
        """Phase 3: retrying messages whose back-off has elapsed become pending (KS-RTY-4)."""
        for offset in sorted(self.retrying):
            message = self.messages[offset]
            if message.retry_at <= self.now and message.failures <= self.config.max_redeliveries:
                # req: KS-RTY-4
                self.set_state(message, MessageState.PENDING)
                message.awaiting_redelivery = True
