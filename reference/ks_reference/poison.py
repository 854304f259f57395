"""Poison policies and operator actions (spec section 11)."""

from __future__ import annotations

import bisect

from ks_reference.core import Message, MessageState, Refusal
from ks_reference.retries import Retries


class Poison(Retries):
    """Tick phase 2 (poison handling) and the operator's `release` and `skip`."""

    def phase_poison(self) -> None:
        """Phase 2: a message that failed more than `max_redeliveries` times gets the poison policy (KS-RTY-6)."""
        limit = self.config.max_redeliveries
        for offset in sorted(self.retrying):
            message = self.messages[offset]
            if message.failures > limit:
                # req: KS-RTY-6
                self.apply_poison_policy(message)

    def apply_poison_policy(self, message: Message) -> None:
        """Drop, dead-letter or block a poisoned message, as configured."""
        policy = self.config.poison_policy
        if policy == "drop":
            # req: KS-POI-1
            self.resolve(message, "dropped", "drop", reason="poison")
        elif policy == "dead-letter":
            # req: KS-POI-2
            self.resolve(message, "dead_lettered", "dead_letter", attempt=message.attempts, reason=message.last_failure)
        else:
            # req: KS-POI-3
            self.set_state(message, MessageState.BLOCKED)
            message.blocked_at = self.now
            bisect.insort(self.blocked.setdefault(message.key, []), message.offset)
            self.emit("key_blocked", offset=message.offset, key=message.key, attempt=message.attempts)

    def blocked_messages(self, key: object) -> list[Message]:
        """The key's blocked messages, or a refusal with `not_blocked` (KS-GEN-4)."""
        if not isinstance(key, str) or key not in self.blocked:
            # req: KS-GEN-4
            raise Refusal("not_blocked", f"key {key!r} is not blocked")
        return [self.messages[offset] for offset in self.blocked[key]]

    def on_release(self, key: str) -> None:
        """The blocked messages are pending again with a fresh failure budget; attempts continue (KS-POI-4).

        In the owner profile several messages of a key can be poisoned at the same tick; a release
        covers all of them, so that the key is unblocked afterwards.
        """
        for offset in self.blocked.pop(key):
            message = self.messages[offset]
            # req: KS-POI-4
            message.failures = 0
            self.set_state(message, MessageState.PENDING)
            message.awaiting_redelivery = True

    def on_skip(self, key: str) -> None:
        """The blocked messages are resolved as dropped by the operator and the key unblocked (KS-POI-5)."""
        for offset in list(self.blocked[key]):
            # req: KS-POI-5
            self.resolve(self.messages[offset], "dropped", "drop", reason="operator")
