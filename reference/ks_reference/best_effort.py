"""The best-effort variant (spec section 18): routing only, each message's outcome decided at publish."""

from __future__ import annotations

from ks_reference.buckets import Placement
from ks_reference.core import Core, Member


class BestEffort(Core):
    """Publish and ack (\"received\") for the best-effort profile: no window, retries or cursor."""

    def best_effort_publish(self, offset: int, key: str, placement: Placement | None) -> None:
        """Deliver the new message to its target at once, or drop or filter it, once (KS-BEF-1)."""
        if not self.members:
            # req: KS-BEF-1, KS-BEF-2
            self.best_effort_drop(offset, key, "no-consumer")
            return
        if self.eligible(key) == ():
            # req: KS-FLT-3
            self.resolved_total["filtered"] += 1
            self.emit("filter", offset=offset, key=key)
            return
        target_name = self.target_name(key, placement)  # with buckets: the owner of the message's bucket
        if target_name is None:
            self.best_effort_drop(offset, key, "no-consumer")
            return
        target = self.members[target_name]
        if not target.connected:
            self.best_effort_drop(offset, key, "inactive")
            return
        if len(target.outstanding) >= target.capacity:
            # req: KS-FLW-1 (the channel holds at most `capacity` unreceived messages)
            self.best_effort_drop(offset, key, "saturated")
            return
        target.outstanding.add(offset)
        self.best_effort_holder[offset] = target
        self.delivered_total += 1
        self.emit("deliver", offset=offset, key=key, consumer=target.name, attempt=1)

    def best_effort_drop(self, offset: int, key: str, reason: str) -> None:
        """Record a drop with its reason and count it (KS-BEF-2)."""
        # req: KS-BEF-2
        self.resolved_total["dropped"] += 1
        self.dropped_total[reason] += 1
        self.emit("drop", offset=offset, key=key, reason=reason)

    def best_effort_ack(self, member: Member, offset: int, event: str) -> None:
        """An ack means "received": it frees one place in the member's channel; anything else is ignored."""
        if offset >= len(self.log):
            reason, key = "unknown-offset", None
        else:
            key = self.log[offset].key
            if event == "ack" and offset in member.outstanding:
                member.outstanding.discard(offset)
                del self.best_effort_holder[offset]
                self.resolved_total["acked"] += 1
                self.emit("ack", offset=offset, key=key, consumer=member.name)
                return
            # A nack changes nothing in best-effort: the message had its outcome when it was published.
            # A delivered message awaiting receipt elsewhere is not this member's to ack.
            holder = self.best_effort_holder.get(offset)
            reason = "not-holder" if holder is not None and holder is not member else "resolved"
        self.ack_ignored_total[reason] += 1
        self.emit(f"{event}_ignored", offset=offset, key=key, consumer=member.name, reason=reason)
