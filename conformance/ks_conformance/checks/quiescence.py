"""spec/checking.md section 2.3: the checks at a quiescent point (liveness: KS-LIV-1, KS-LIV-2, KS-DRN-2,
KS-MEM-1 and KS-CUR-3 for what is still unresolved).
"""

from __future__ import annotations

from pyroaring import BitMap

from ks_conformance import rules
from ks_conformance.checks.hooks import QUIESCENCE_CHECKS
from ks_conformance.checks.records import Message
from ks_conformance.checks.selectors import SLOTS
from ks_conformance.checks.state import CheckerState, Event
from ks_conformance.glob import accepts


def on_quiescent(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    st._exercise_shared("cursor-stall")
    if st.messages:
        st._exercise_shared("stuck-key")
    if not st.best_effort:
        if st.unresolved and someone_accepts_everything(st):
            for offset in st.unresolved:
                judge_unresolved_at_quiescence(st, st.messages[offset], seq)
        if not st.any_unresolved() and st.persisted_cursor != len(st.messages):
            st._report(
                "cursor-stall",
                seq,
                [st.persist_seq, seq],
                rules.liveness.cursor_stall(len(st.messages), st.persisted_cursor, st.persist_seq, seq),
            )
    for check in QUIESCENCE_CHECKS:
        check(st, event)


def judge_unresolved_at_quiescence(st: CheckerState, message: Message, seq: int) -> None:
    if message.restored_seq is not None:
        rules.cursor.report_restart_skip(st, message, seq)
    elif message.returned and not wait_explained(st, message):
        st._report(
            "lost",
            seq,
            [message.returned_delivery_seq, message.awaiting_seq, seq],
            rules.leaving.lost(*message.facts, message.awaiting_seq, seq),
        )
    elif message.last_hold_reason == "draining":
        st._report(
            "drain-stuck",
            seq,
            [message.last_hold_seq, seq],
            rules.draining.drain_stuck(*message.facts, message.last_hold_seq, seq),
        )
    else:
        st._report(
            "stuck-key",
            seq,
            [message.publish_seq, message.last_event_seq, seq],
            rules.liveness.stuck_key(*message.facts, message.last_event_seq, seq),
        )


def wait_explained(st: CheckerState, message: Message) -> bool:
    """Whether something other than a lost return explains why a returned message was not delivered again: a
    message of its key outstanding at a holder that never finished, or blocked (KS-POI-3: it waits for an
    operator), or an eligible member (possibly its target) disconnected or without room (selector `any`: every
    eligible member). It is pending then, and stuck (KS-LIV-1) rather than lost (KS-MEM-1)."""
    state = st.keys.get(message.key)
    if state is not None and (state.outstanding or state.blocked):
        return True  # req: KS-POI-3 (a blocked key's later messages wait for the operator)
    eligible = [m for m in st.members.values() if accepts(m.filters, message.key)]
    able = [m for m in eligible if rules.isolation.has_room(st, m)]
    return not able if st.any_selector else len(able) < len(eligible)


def someone_accepts_everything(st: CheckerState) -> bool:
    if st.config["selector"] == "pulsar-sticky":
        covered = BitMap()
        for incarnation in st.members.values():
            for lo, hi in incarnation.ranges:
                covered.add_range(lo, hi + 1)
        return int(covered.range_cardinality(0, SLOTS)) == SLOTS
    return any(not incarnation.filters for incarnation in st.members.values())
