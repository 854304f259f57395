"""spec/checking.md section 2.3: the checks at a quiescent point (liveness: KS-LIV-1, KS-LIV-2, KS-DRN-2,
KS-MEM-1 and KS-CUR-3 for what is still unresolved).
"""

from __future__ import annotations

from pyroaring import BitMap

from ks_conformance import rules
from ks_conformance.checks.end_of_op import EndOfOpChecks
from ks_conformance.checks.records import Message
from ks_conformance.checks.state import SLOTS, Event
from ks_conformance.glob import accepts


class QuiescenceChecks(EndOfOpChecks):
    """The checks at a quiescent point (section 2.3)."""

    def _on_quiescent(self, event: Event) -> None:
        seq = int(event["seq"])
        self._exercise("cursor-stall")
        if self.messages:
            self._exercise("stuck-key")
        if self.best_effort:
            return
        if self.unresolved and self._someone_accepts_everything():
            for offset in self.unresolved:
                self._judge_unresolved_at_quiescence(self.messages[offset], seq)
        if not self.unresolved and self.persisted_cursor != len(self.messages):
            self._report(
                "cursor-stall",
                seq,
                [self.persist_seq, seq],
                rules.liveness.cursor_stall(len(self.messages), self.persisted_cursor, self.persist_seq, seq),
            )

    def _judge_unresolved_at_quiescence(self, message: Message, seq: int) -> None:
        if message.restored_seq is not None:
            self._report_restart_skip(message, seq)
        elif message.returned and not self._wait_explained(message):
            self._report(
                "lost",
                seq,
                [message.returned_delivery_seq, message.awaiting_seq, seq],
                rules.leaving.lost(*message.facts, message.awaiting_seq, seq),
            )
        elif message.last_hold_reason == "draining":
            self._report(
                "drain-stuck",
                seq,
                [message.last_hold_seq, seq],
                rules.draining.drain_stuck(*message.facts, message.last_hold_seq, seq),
            )
        else:
            self._report(
                "stuck-key",
                seq,
                [message.publish_seq, message.last_event_seq, seq],
                rules.liveness.stuck_key(*message.facts, message.last_event_seq, seq),
            )

    def _wait_explained(self, message: Message) -> bool:
        """Whether something other than a lost return explains why a returned message was not delivered again: a
        message of its key outstanding at a holder that never finished, or blocked (KS-POI-3: it waits for an
        operator), or an eligible member (possibly its target) disconnected or without room (selector `any`: every
        eligible member). It is pending then, and stuck (KS-LIV-1) rather than lost (KS-MEM-1)."""
        state = self.keys.get(message.key)
        if state is not None and (state.outstanding or state.blocked):
            return True  # req: KS-POI-3 (a blocked key's later messages wait for the operator)
        eligible = [m for m in self.members.values() if accepts(m.filters, message.key)]
        able = [m for m in eligible if self._has_room(m)]
        return not able if self.any_selector else len(able) < len(eligible)

    def _someone_accepts_everything(self) -> bool:
        if self.config["selector"] == "pulsar-sticky":
            covered = BitMap()
            for incarnation in self.members.values():
                for lo, hi in incarnation.ranges:
                    covered.add_range(lo, hi + 1)
            return int(covered.range_cardinality(0, SLOTS)) == SLOTS
        return any(not incarnation.filters for incarnation in self.members.values())
