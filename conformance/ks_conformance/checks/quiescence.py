"""spec/checking.md section 2.3: the checks at a quiescent point (liveness: KS-LIV-1, KS-LIV-2, KS-DRN-2,
KS-MEM-1 and KS-CUR-3 for what is still unresolved).
"""

from __future__ import annotations

from pyroaring import BitMap

from ks_conformance import explain
from ks_conformance.checks.end_of_op import EndOfOpChecks
from ks_conformance.checks.records import Message
from ks_conformance.checks.state import SLOTS, Event


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
                explain.cursor_stall(len(self.messages), self.persisted_cursor, self.persist_seq, seq),
            )

    def _judge_unresolved_at_quiescence(self, message: Message, seq: int) -> None:
        if message.restored_seq is not None:
            self._report_restart_skip(message, seq)
        elif message.returned:
            self._report(
                "lost",
                seq,
                [message.returned_delivery_seq, message.awaiting_seq, seq],
                explain.lost(*message.facts, message.awaiting_seq, seq),
            )
        elif message.last_hold_reason == "draining":
            self._report(
                "drain-stuck",
                seq,
                [message.last_hold_seq, seq],
                explain.drain_stuck(*message.facts, message.last_hold_seq, seq),
            )
        else:
            self._report(
                "stuck-key",
                seq,
                [message.publish_seq, message.last_event_seq, seq],
                explain.stuck_key(*message.facts, message.last_event_seq, seq),
            )

    def _someone_accepts_everything(self) -> bool:
        if self.config["selector"] == "pulsar-sticky":
            covered = BitMap()
            for incarnation in self.members.values():
                for lo, hi in incarnation.ranges:
                    covered.add_range(lo, hi + 1)
            return int(covered.range_cardinality(0, SLOTS)) == SLOTS
        return any(not incarnation.filters for incarnation in self.members.values())
