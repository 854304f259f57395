"""spec/checking.md section 2.2: the op boundaries themselves, the phase boundaries of a tick, and the order in
which the checks at an op's end run (timeouts and evictions due, persistence, isolation; each in its rule's module).
"""

from __future__ import annotations

import heapq

from ks_conformance.checks.hooks import END_OF_OP_CHECKS
from ks_conformance.checks.records import OpState
from ks_conformance.checks.state import CheckerState, Event
from ks_conformance.rules.best_effort import check_outcome
from ks_conformance.rules.buckets import entry_split_unfinished
from ks_conformance.rules.cursor import check_persistence
from ks_conformance.rules.isolation import check_idle, has_room, read_bound
from ks_conformance.rules.leaving import after_phase_4
from ks_conformance.rules.operations import phase_order
from ks_conformance.rules.poison import check_skip
from ks_conformance.rules.retries import after_phase_1, after_phase_2, check_extension_answered


def open_op(st: CheckerState, kind: str, seq: int) -> None:
    """Open the next op, remembering the cursor at its start (the persistence checks compare it at its end)."""
    index = st.op_count = st.op_count + 1
    st.op = OpState(kind, seq, index, st.cursor())


def close_op(st: CheckerState) -> None:
    """Close the open op: the checks of its end, in their order, then (every `settle_every` ops) the settling.

    Runs at every op (0.65 per event of a steady trace), so each check that has nothing to look at is skipped
    behind one test of the state it would read."""
    op = st.op
    if op is None:
        return
    st.closing = op.index
    st._expect_ack_class = False
    if st.batch_run is not None:
        run, st.batch_run = st.batch_run, None
        # req: KS-BKT-10
        unfinished = entry_split_unfinished(run.entry, run.first_offset, run.consumer, run.first_seq, run.expected)
        st._batch_findings.append(([run.first_seq, st.last_seq], unfinished))
    if st._batch_findings:
        for witness, explained in st._batch_findings:
            st._report("entry-split", st.last_seq, witness, explained)  # judged over the whole op (KS-BKT-10)
        st._batch_findings = []
    kind = op.kind
    if kind == "tick":
        advance_phase(st, 7)
    elif kind == "key_skipped":
        check_skip(st, op)
    elif kind == "extend" and op.extension is not None and op.extension[2] is not None:
        check_extension_answered(st, op)
    if op.published is not None and st.best_effort:
        check_outcome(st, op)
    if kind != "config" and kind != "quiescent":
        if st.judges_subscription:
            check_persistence(st, op)
        check_idle(st, op)
        if st._delayed:
            st._note_delays_due()
        count_temptations(st)
        if kind == "tick" and st.heartbeat_reads:
            note_heartbeat_read(st)
    for check in END_OF_OP_CHECKS:
        check(st, op)
    st.op = None
    st.closing = None
    if op.index % st.settle_every == 0:
        st._settle()


def count_temptations(st: CheckerState) -> None:
    """Count the ordering checks as exercised when an op ends where a dispatcher could have broken them.

    For a correct implementation the situations in checking.md's "exercised when" column of
    key-reorder (strict profile) and retry-overtaken never occur: they are the violation itself. An op
    that ends with a later message of a key undelivered behind an undelivered, held or awaiting
    earlier one is where these checks could fail, so it counts too (see the module doc). Each scan is
    skipped when the set it scans is empty (the common case: this runs at every op's end).
    """
    if st._idle_heads:
        reorder = held = False
        for key in st._idle_heads:
            state = st._key(key)
            if len(state.undelivered) >= 2 and not state.blocked:
                reorder = True
                head = state.undelivered.first()
                held = held or (head is not None and st.messages[head].held)
            if reorder and held:
                break
        if reorder:
            st._exercise_shared("key-reorder")
        if held:
            st._exercise_shared("overtaken-hold")
    if st._awaiting_keys:
        for key in list(st._awaiting_keys):
            state = st._key(key)
            if not state.awaiting:
                st._awaiting_keys.discard(key)
                continue
            earliest = min(state.awaiting)
            if any(o > earliest and st.messages[o].outstanding is None for o in state.unresolved):
                st._exercise_shared("retry-overtaken")
                break
    if st.best_effort:
        return
    if st._blocked_keys:
        for key in list(st._blocked_keys):
            state = st._key(key)
            if not state.blocked:
                st._blocked_keys.discard(key)
            elif any(st.messages[o].outstanding is None and o not in state.blocked for o in state.unresolved):
                st._exercise_shared("blocked-key-leak")
                break
    epochs = st._outstanding_epochs
    if not epochs or min(epochs) >= st.epoch:
        return  # no delivery outstanding from an earlier epoch: no key can be split between owners
    moved = False
    for key in list(st._holding_keys):
        state = st._key(key)
        if not state.outstanding:
            st._holding_keys.discard(key)
        elif len(state.unresolved) > len(state.outstanding):
            if any(d.epoch < st.epoch for d in state.outstanding.values()):
                moved = True
                break
    if moved:
        st._exercise_shared("split-owner")
        if st.buckets:
            st._exercise_shared("bucket-split-owner")


def tick_phase(st: CheckerState, event: Event, phase: int) -> None:
    op = st.op
    assert op is not None
    if op.phase_event_seq is not None and phase != op.phase and not op.phases_counted:
        st._exercise_shared("phase-order")
        op.phases_counted = True
    if phase < op.phase:
        seq = int(event["seq"])
        st._report(
            "phase-order",
            seq,
            [op.phase_event_seq, seq],
            phase_order(op.seq, phase, str(event["event"]), seq, op.phase, op.phase_event_seq),
        )
        return
    advance_phase(st, phase)
    op.phase = phase
    op.phase_event_seq = int(event["seq"])


def advance_phase(st: CheckerState, phase: int) -> None:
    """Run the checks due at the phase boundaries crossed on the way to `phase` within a tick."""
    op = st.op
    assert op is not None
    current = op.phase
    if current < 2 <= phase:
        after_phase_1(st, op)
    if current < 3 <= phase:
        after_phase_2(st, op)
        phase_3_point(st)
    if current < 5 <= phase:
        after_phase_4(st, op)
    op.phase = max(op.phase, min(phase, 6))


def phase_3_point(st: CheckerState) -> None:
    while st._readiness and st._readiness[0][0] <= st.now:
        _, offset, serial = heapq.heappop(st._readiness)
        message = st.messages.peek(offset)  # an archived message is resolved, so not retrying
        if message is not None and message.retrying and message.failure_serial == serial:
            # req: KS-RTY-4
            message.ready = True
            message.ready_tick = st.now


def note_heartbeat_read(st: CheckerState) -> None:
    """After a tick under `read_trigger = "heartbeat"`: its dispatch pass read every offset the read bound
    admits (KS-GEN-8), so from now on a message below the first offset it does not admit counts as read."""
    if st.lookahead and not any(has_room(st, m) for m in st.members.values()):
        return  # req: KS-ISO-3 (under the look-ahead, reading waits for a member that can take a delivery)
    within = read_bound(st, heartbeat=True)
    low, high = st.read_below, len(st.messages)
    while low < high:  # the bound admits a prefix of the offsets: find where it ends
        middle = (low + high) // 2
        if within(middle) is None:
            high = middle
        else:
            low = middle + 1
    st.read_below = max(st.read_below, low)
