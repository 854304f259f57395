"""spec/checking.md section 2.2: the checks at the end of an op and at the phase boundaries of a tick
(timeouts due, evictions due, persistence, isolation), and the op boundaries themselves.

Long because the isolation check's one pass over idle keys holds every exemption the declared options allow (slots,
buckets, parking, heartbeat reads, unacked limits, counted returns); issue 29 makes each kind a rule of its own.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterable

from ks_spec.config import lookahead_limit
from ks_spec.slots import SLOT_SELECTORS, slot_of

from ks_conformance import rules
from ks_conformance.checks.hooks import END_OF_OP_CHECKS
from ks_conformance.checks.records import Incarnation, Message, OpState
from ks_conformance.checks.state import CheckerState, Event
from ks_conformance.glob import accepts


def open_op(st: CheckerState, kind: str, seq: int) -> None:
    st.op_count += 1
    st.op = OpState(kind=kind, seq=seq, index=st.op_count, cursor_at_start=st.cursor())


def close_op(st: CheckerState) -> None:
    op = st.op
    if op is None:
        return
    st._expect_ack_class = False
    if st.batch_run is not None:
        run, st.batch_run = st.batch_run, None
        # req: KS-BKT-10
        unfinished = rules.buckets.entry_split_unfinished(
            run.entry, run.first_offset, run.consumer, run.first_seq, run.expected
        )
        st._batch_findings.append(([run.first_seq, st.last_seq], unfinished))
    for witness, explained in st._batch_findings:
        st._report("entry-split", st.last_seq, witness, explained)  # judged over the whole op (KS-BKT-10)
    st._batch_findings = []
    if op.kind == "tick":
        advance_phase(st, 7)
    if op.kind == "key_skipped":
        rules.poison.check_skip(st, op)
    if op.kind == "extend" and op.extension is not None and op.extension[2] is not None:
        rules.retries.check_extension_answered(st, op)
    if op.published is not None and st.best_effort:
        rules.best_effort.check_outcome(st, op)
    if op.kind not in ("config", "quiescent"):
        rules.cursor.check_persistence(st, op)
        check_idle(st, op)
        if st._delayed:
            st._note_delays_due()
        count_temptations(st)
        if op.kind == "tick" and st.heartbeat_reads:
            note_heartbeat_read(st)
    for check in END_OF_OP_CHECKS:
        check(st, op)
    st.op = None
    st._settle()


def count_temptations(st: CheckerState) -> None:
    """Count the ordering checks as exercised when an op ends where a dispatcher could have broken them.

    For a correct implementation the situations in checking.md's "exercised when" column of
    key-reorder (strict profile) and retry-overtaken never occur: they are the violation itself. An op
    that ends with a later message of a key undelivered behind an undelivered, held or awaiting
    earlier one is where these checks could fail, so it counts too (see the module doc).
    """
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
        st._exercise("key-reorder")
    if held:
        st._exercise("overtaken-hold")
    for key in list(st._awaiting_keys):
        state = st._key(key)
        if not state.awaiting:
            st._awaiting_keys.discard(key)
            continue
        earliest = min(state.awaiting)
        if any(o > earliest and st.messages[o].outstanding is None for o in state.unresolved):
            st._exercise("retry-overtaken")
            break
    if st.best_effort:
        return
    for key in list(st._blocked_keys):
        state = st._key(key)
        if not state.blocked:
            st._blocked_keys.discard(key)
        elif any(st.messages[o].outstanding is None and o not in state.blocked for o in state.unresolved):
            st._exercise("blocked-key-leak")
            break
    moved = False
    earlier = min(st._outstanding_epochs, default=st.epoch) < st.epoch
    for key in list(st._holding_keys) if earlier else ():
        state = st._key(key)
        if not state.outstanding:
            st._holding_keys.discard(key)
        elif len(state.unresolved) > len(state.outstanding):
            if any(d.epoch < st.epoch for d in state.outstanding.values()):
                moved = True
                break
    if moved:
        st._exercise("split-owner")
        if st.buckets:
            st._exercise("bucket-split-owner")


def tick_phase(st: CheckerState, event: Event, phase: int) -> None:
    op = st.op
    assert op is not None
    if op.phase_event_seq is not None and phase != op.phase and not op.phases_counted:
        st._exercise("phase-order")
        op.phases_counted = True
    if phase < op.phase:
        seq = int(event["seq"])
        st._report(
            "phase-order",
            seq,
            [op.phase_event_seq, seq],
            rules.operations.phase_order(op.seq, phase, str(event["event"]), seq, op.phase, op.phase_event_seq),
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
        rules.retries.after_phase_1(st, op)
    if current < 3 <= phase:
        rules.retries.after_phase_2(st, op)
        phase_3_point(st)
    if current < 5 <= phase:
        rules.leaving.after_phase_4(st, op)
    op.phase = max(op.phase, min(phase, 6))


def phase_3_point(st: CheckerState) -> None:
    while st._readiness and st._readiness[0][0] <= st.now:
        _, offset, serial = heapq.heappop(st._readiness)
        message = st.messages.peek(offset)  # an archived message is resolved, so not retrying
        if message is not None and message.retrying and message.failure_serial == serial:
            # req: KS-RTY-4
            message.ready = True
            message.ready_tick = st.now


def check_idle(st: CheckerState, op: OpState) -> None:
    if st.idle_unjudged or not st._idle_heads:
        return
    window = st.window
    within = read_bound(st)
    in_window = (key for key in st._idle_heads if within(st._key(key).unresolved.first() or 0) is not None)
    if next(in_window, None) is None:
        return
    # req: KS-ISO-2 (the window's messages are the `window` smallest unresolved offsets), KS-ISO-3
    st._exercise("idle-while-ready")
    if any(m.filters for m in st.members.values()):
        st._exercise("unfiltered-wait")
    ready = [m for m in st.members.values() if has_room(st, m)]
    # A fixed-target selector's target is not known here: judge only when every member could take the key.
    # With selector `any` (no key affinity) one eligible member with room is enough.
    fixed_target = not st.any_selector
    if fixed_target and len(ready) < len(st.members) and not any(m.filters for m in st.members.values()):
        return
    for key in sorted(st._idle_heads, key=lambda k: st._key(k).unresolved.first() or 0):
        state = st._key(key)
        head = state.unresolved.first()
        delayed_before = None
        if st.delays_seen and head is not None:
            # req: KS-ORD-6 (the key's head is its first message that is due), KS-ORD-7
            head, delayed_before = due_head(st, state.unresolved)
        waiting = None if head is None else within(head)
        if head is None or waiting is None:
            continue
        message = st.messages[head]
        if message.deliver_at is not None:
            st._exercise("due-left-waiting")
        elif delayed_before is not None:
            st._exercise("blocked-behind-delayed")
        if message.outstanding is not None or state.outstanding or state.blocked:
            continue
        if any(may_still_retry(st, st.messages[o]) for o in state.awaiting):
            continue
        if head in st._over_budget:
            continue  # req: KS-RTY-6 (over its budget it awaits its poison policy, judged as poison-ignored)
        if st.ended_by_return(message) and st.counted_failures(message) > int(st.config["max_redeliveries"]):
            continue  # req: KS-RTY-6 (returns_as_failures: its returns used up its budget, it may await poisoning)
        if slot_mate_explains(st, key):
            continue
        if st.buckets and bucket_explains(st, message):
            continue
        if not st.buckets and message.entry is not None and batch_explains(st, message):
            continue  # req: KS-BKT-10 (a key-based batch goes whole)
        eligible = [m for m in st.members.values() if accepts(m.filters, key)]
        marker = (head, st.state_version)
        if not eligible and st.members:
            if st.lookahead and not ready:
                continue  # req: KS-ISO-3 (under the look-ahead, reading waits for a member that can take one)
            if marker not in st._idle_reported:
                st._idle_reported.add(marker)
                rules.filters.report_unfiltered(st, message, op)
            continue
        able = [m for m in eligible if has_room(st, m)]
        if fixed_target and (not eligible or len(able) < len(eligible)):
            continue
        if not fixed_target and not able:
            continue
        if marker in st._idle_reported:
            continue
        st._idle_reported.add(marker)
        if message.restored_seq is not None:
            rules.cursor.report_restart_skip(st, message, op.seq)
            continue
        if delayed_before is not None or message.deliver_at is not None:
            rules.ordering.report_delay_wait(st, message, delayed_before, op.seq)
            continue
        # req: KS-ISO-1, KS-GEN-6, KS-ISO-2
        shown = [(m.name, len(m.outstanding), m.capacity if m.permits is None else m.permits) for m in able or eligible]
        lookahead = (waiting, lookahead_of(st)) if st.lookahead else None
        parked = st._parked_below(head) if st.park_after else None
        heartbeat = ("tick" if op.kind == "tick" else "read") if st.heartbeat_reads else None
        st._report(
            "idle-while-ready",
            op.seq,
            [message.publish_seq, op.seq],
            rules.isolation.idle_while_ready(
                *message.facts,
                window,
                shown,
                not fixed_target,
                op.seq,
                lookahead,
                permits=st.permits,
                parked=parked,
                heartbeat=heartbeat,
            ),
        )


def due_head(st: CheckerState, unresolved: Iterable[int]) -> tuple[int | None, int | None]:
    """(the key's first unresolved message that holds its place in its order, the first delayed one not yet due
    before it) (KS-ORD-6). No head when a delayed message is past its due tick but within the slack: the
    dispatcher may see it due or not yet, and either way it could be right to wait (KS-GEN-9)."""
    skipped = None
    for offset in unresolved:
        message = st.messages[offset]
        if message.outstanding is not None or not st.not_due(message):
            return offset, skipped
        if message.deliver_at is not None and st.now >= message.deliver_at:
            return None, skipped  # due, perhaps not seen as due yet (timer_slack)
        if skipped is None:
            skipped = offset
    return None, skipped


def may_still_retry(st: CheckerState, message: Message) -> bool:
    """True while a retrying message may still be waiting for its back-off: not ready yet, or (with
    `timer_slack = s`) ready for fewer than s ticks (KS-RTY-4, KS-GEN-9)."""
    if not message.retrying:
        return False
    if not message.ready:
        return True
    return st.now < message.ready_tick + st.timer_slack


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


def has_room(st: CheckerState, member: Incarnation) -> bool:
    """Connected, and below capacity or (`flow_control = "permits"`) holding a permit (KS-FLW-1, KS-FLW-4)."""
    if not member.connected or member.unacked_blocked_seq is not None:
        return False  # req: KS-FLW-1 (with max_unacked, blocked until half of the limit is acked)
    return len(member.outstanding) < member.capacity if member.permits is None else member.permits > 0


def lookahead_of(st: CheckerState) -> int:
    return lookahead_limit(st.config, len(st.members))


def read_bound(st: CheckerState, heartbeat: bool = False) -> Callable[[int], int | None]:
    """A test of whether an offset must have been read by now: None if not, else what bounds it (the unresolved
    or, under the look-ahead, the waiting messages before it).

    Window: the `window` smallest unresolved offsets (KS-ISO-2). Look-ahead: an offset that fewer than L earlier
    messages wait before (unresolved, not outstanding): a dispatcher that stopped reading before it stopped
    with fewer than L waiting, against KS-ISO-3. With `read_trigger = "heartbeat"`, outside a tick (and unless
    `heartbeat`) only offsets below `read_below` must have been read (KS-GEN-8).
    """
    bound = read_bound_alone(st)
    op = st.op
    if not st.heartbeat_reads or heartbeat or (op is not None and op.kind == "tick"):
        return bound
    read_below = st.read_below

    def read_by_a_heartbeat(offset: int) -> int | None:
        return bound(offset) if offset < read_below else None  # req: KS-GEN-8

    return read_by_a_heartbeat


def read_bound_alone(st: CheckerState) -> Callable[[int], int | None]:
    """`_read_bound` as if every op ended with a read (`read_trigger = "every-op"`)."""
    if not st.lookahead:
        window = int(st.config["window"])

        def in_window(offset: int) -> int | None:
            below = st.unresolved.rank(offset) - st._parked_below(offset)  # req: KS-ISO-4
            return below if below <= window else None

        return in_window
    limit = lookahead_of(st)
    outstanding = sorted(
        {d.offset for m in (*st.members.values(), *st._phantoms.values()) for d in m.outstanding.values()}
    )

    def in_lookahead(offset: int) -> int | None:
        unresolved_before = st.unresolved.rank(offset) - (1 if offset in st.unresolved else 0)
        waiting = unresolved_before - bisect_left(outstanding, offset) - st._parked_below(offset)  # KS-ISO-4
        return waiting if waiting < limit else None

    return in_lookahead


def slot_mate_explains(st: CheckerState, key: str) -> bool:
    """With hash-granularity draining (KS-DRN-3): another key of the same slot may hold this one back.

    A slot-mate explains a hold when it awaits redelivery, is blocked, or holds an outstanding delivery that may
    sit at another consumer than the slot's target: one from an earlier epoch (the target may have moved since), or
    any one while members have filters (keys of one slot may then have different targets). A slot-mate delivered
    in this epoch without filters is at the slot's target (KS-ASN-1), so it explains nothing.
    """
    if st.config["drain_granularity"] != "hash" or st.config["selector"] not in SLOT_SELECTORS:
        return False
    selector = str(st.config["selector"])
    slot = slot_of(selector, key)
    filtered = any(m.filters for m in st.members.values())
    for other in st._keys_of_slot.get(slot, ()):
        if other == key:
            continue
        mate = st.keys.get(other)
        if mate is None:
            continue  # at rest: nothing blocked, awaiting or outstanding
        if mate.blocked or mate.awaiting:
            return True  # req: KS-DRN-3
        if any(filtered or delivery.epoch < st.epoch for delivery in mate.outstanding.values()):
            return True  # req: KS-DRN-3
    return False


def bucket_explains(st: CheckerState, message: Message) -> bool:
    """Selector `buckets`: what may hold a message that nothing else holds (KS-ISO-1): its bucket withheld, or
    still held by an owner of an earlier epoch (KS-BKT-4); an ancestor segment with an unresolved message of its
    segment's range (KS-BKT-5); or its batch, which goes whole from its first undelivered message (KS-BKT-10): a
    later message of it waits for that one, and the batch waits while a message of it cannot go."""
    if message.segment is None or message.bucket is None:
        return True
    bucket = (message.segment, message.bucket)
    if bucket in st.withheld_buckets:
        return True
    if any(d.epoch < st.epoch for d in st.bucket_outstanding.get(bucket, {}).values()):
        return True
    segment = st.segments.get(message.segment)
    if segment is None:
        return True
    for _, earlier in st.ancestors_unresolved(segment):
        if earlier.hash is None or segment.lo <= earlier.hash >> 16 <= segment.hi:
            return True
    return batch_explains(st, message)


def batch_explains(st: CheckerState, message: Message) -> bool:
    """KS-BKT-10: a message of a batch goes with its batch's first undelivered message, and the batch waits while
    a message of it cannot go (an earlier message of its key unresolved, outstanding, awaiting or blocked)."""
    if message.entry is None:
        return False
    op = st.op
    if op is not None and op.published is not None and st.messages[op.published].entry == message.entry:
        return True  # a trace file gives each message of a batch its own publish op: the batch may go on
    if not st.buckets:
        return False  # a key-based batch: its other messages are of its key, whose state the caller judged
    mates = st.batches.get(message.entry, [])
    undelivered = [o for o in mates if o in st.unresolved and not st.messages[o].delivered_since_restart]
    if not undelivered or undelivered[0] != message.offset:
        return True  # a later message of the batch goes with its first (exempt from capacity and window)
    for offset in undelivered[1:]:
        state = st._key(st.messages[offset].key)
        if state.unresolved.first() != offset or state.outstanding or state.awaiting or state.blocked:
            return True
    return False
