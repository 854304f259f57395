"""spec/checking.md section 2.1, deliveries: order, exclusivity, routing, flow control, attempts, retries
and buckets, judged at each `deliver` (and `held`).

Long because every rule judged at a delivery reads the same moment (capacity, Pulsar's unacked limit and permits,
the window, attempts, back-off, routing, buckets and batches); issue 29 makes each anomaly kind a rule of its own.
"""

from __future__ import annotations

from itertools import takewhile

from ks_conformance import explain, rules
from ks_conformance.checks import membership
from ks_conformance.checks.hooks import DELIVERY_CHECKS
from ks_conformance.checks.records import Delivery, Incarnation, KeyState, Message, OrderedOffsets
from ks_conformance.checks.state import CheckerState, Event
from ks_conformance.glob import accepts


def on_deliver(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    name = str(event["consumer"])
    attempt = int(event["attempt"])
    incarnation = st.members.get(name)
    state = st._key(message.key)
    first = message.deliveries == 0
    run = st.batch_run
    anew = not message.delivered_since_restart
    st._continuing_batch = bool(
        anew and run is not None and run.consumer == name and run.expected and run.expected[0] == message.offset
    )
    if message.deliver_at is not None:
        rules.ordering.check_due(st, message, seq)
    check_order(st, message, state, seq, first)
    check_exclusive(st, message, state, seq, incarnation or st._phantoms.get(name), name)
    check_reason(st, message, seq)
    check_consumer(st, message, seq, incarnation, name)
    rules.flow.check_flow(st, message, seq, first)
    rules.retries.check_attempt(st, message, seq, attempt)
    rules.assignment.check_assignment(st, message, state, seq, incarnation, name)
    rules.retries.check_retry(st, message, seq)
    if st.buckets and message.segment is not None:
        rules.buckets.check_bucket_delivery(st, message, seq, incarnation, name)
    if st.best_effort:
        rules.best_effort.check_best_effort_outcome(st, message, seq)
    for check in DELIVERY_CHECKS:
        check(st, message, event)
    if incarnation is None:
        incarnation = st._phantoms.get(name)
    if incarnation is None:
        st._incarnations += 1
        incarnation = Incarnation(st._incarnations, name, 0, (), (), seq, member=False, connected=False)
        st._phantoms[name] = incarnation
    record_delivery(st, message, state, incarnation, attempt, seq)


def first_in_order(st: CheckerState, offsets: OrderedOffsets, before: int) -> int | None:
    """The first of `offsets` below `before` that holds its place in its key's order (KS-ORD-6): a delayed
    message not yet due is left out (an ordinary one always counts, so without delays this is `first()`)."""
    if not st.delays_seen:
        return offsets.first()
    return next((o for o in takewhile(lambda o: o < before, offsets) if st.counts_for_order(o)), None)


def check_order(st: CheckerState, message: Message, state: KeyState, seq: int, first: bool) -> None:
    offset = message.offset
    # req: KS-ORD-6 (a delayed message not yet due is neither waited for nor overtaken by its key's later ones)
    earliest_unresolved = first_in_order(st, state.unresolved, offset)
    has_earlier_unresolved = earliest_unresolved is not None and earliest_unresolved < offset
    if first and has_earlier_unresolved:
        # req: KS-ORD-1
        st._exercise("key-reorder")
        held_earlier = next(
            (
                o
                for o in takewhile(lambda o: o < offset, state.unresolved)
                if st.messages[o].held and st.counts_for_order(o)
            ),
            None,
        )
        if held_earlier is not None:
            st._exercise("overtaken-hold")
        earlier = first_in_order(st, state.undelivered, offset)
        if earlier is not None and earlier < offset:
            previous = st.messages[earlier]
            st._report(
                "key-reorder",
                seq,
                [previous.publish_seq, message.publish_seq, seq],
                rules.ordering.key_reorder(*message.facts, earlier, previous.publish_seq, seq),
            )
            # req: KS-FLW-3
            held = next(
                (
                    o
                    for o in takewhile(lambda o: o < offset, state.undelivered)
                    if st.messages[o].held and st.counts_for_order(o)
                ),
                None,
            )
            if held is not None:
                overtaken = st.messages[held]
                st._report(
                    "overtaken-hold",
                    seq,
                    [overtaken.held_seq, message.publish_seq, seq],
                    rules.flow.overtaken_hold(*message.facts, held, overtaken.publish_seq, overtaken.held_seq, seq),
                )
    if st.profile == "strict":
        # req: KS-ORD-2
        others = len(state.unresolved) - (1 if offset in state.unresolved else 0)
        if others > 0:
            st._exercise("strict-overlap")
        if has_earlier_unresolved:
            assert earliest_unresolved is not None
            previous = st.messages[earliest_unresolved]
            st._report(
                "strict-overlap",
                seq,
                [previous.publish_seq, seq],
                rules.ordering.strict_overlap(*message.facts, earliest_unresolved, previous.publish_seq, seq),
            )
    if not st.best_effort:
        # req: KS-ORD-3
        awaiting = [o for o in state.awaiting if o < offset]
        if awaiting:
            st._exercise("retry-overtaken")
            waiting = st.messages[min(awaiting)]
            st._report(
                "retry-overtaken",
                seq,
                [waiting.awaiting_seq, seq],
                rules.ordering.retry_overtaken(
                    *message.facts, waiting.offset, waiting.publish_seq, waiting.awaiting_seq, seq
                ),
            )


def check_exclusive(
    st: CheckerState, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
) -> None:
    if st.best_effort:
        return
    # req: KS-DRN-1
    if any(d.epoch < st.epoch for d in state.outstanding.values()):
        st._exercise("split-owner")
    other = next((d for d in state.outstanding.values() if d.holder is not incarnation), None)
    if other is not None:
        st._report(
            "split-owner",
            seq,
            [other.seq, seq],
            rules.draining.split_owner(*message.facts, other.offset, other.holder.name, other.seq, name, seq),
        )
    if state.blocked:
        # req: KS-POI-3
        blocked = st.messages[min(state.blocked)]
        st._report(
            "blocked-key-leak",
            seq,
            [blocked.blocked_seq, seq],
            rules.poison.blocked_key_leak(
                *message.facts, blocked.offset, blocked.publish_seq, blocked.blocked_seq, seq
            ),
        )


def check_reason(st: CheckerState, message: Message, seq: int) -> None:
    if st.seek is not None:
        # req: KS-CUR-9
        st._exercise("seek-resurrected")
        target, seek_seq = st.seek
        if message.offset < target:
            st._report(
                "seek-resurrected",
                seq,
                [seek_seq, seq],
                rules.cursor.seek_resurrected(*message.facts, target, seek_seq, message.resolution, seq),
            )
            return
    # req: KS-RES-2
    if message.delivered_ever:
        st._exercise("duplicate")
    if message.resolved:
        st._report(
            "duplicate",
            seq,
            [message.resolution_seq, seq],
            rules.resolutions.duplicate_resolved(*message.facts, message.resolution, message.resolution_seq, seq),
        )
    elif message.outstanding is not None:
        d = message.outstanding
        st._report(
            "duplicate",
            seq,
            [d.seq, seq],
            rules.resolutions.duplicate_outstanding(*message.facts, d.holder.name, d.seq, seq),
        )
    if st.loaded is not None:
        # req: KS-CUR-4
        st._exercise("resurrected")
        cursor, holes, persist_seq, restart_seq = st.loaded
        if message.offset < cursor or message.offset in holes:
            st._report(
                "resurrected",
                seq,
                [persist_seq, restart_seq, seq],
                rules.cursor.resurrected(*message.facts, cursor, persist_seq, restart_seq, seq),
            )
        elif st.loaded_checkpoints:
            # req: KS-BKT-9
            st._exercise("checkpoint-resurrected")
            checkpoint = membership.checkpointed(st, message)
            if checkpoint is not None:
                st._report(
                    "checkpoint-resurrected",
                    seq,
                    [checkpoint[1], restart_seq, seq],
                    rules.buckets.checkpoint_resurrected(
                        *message.facts, (message.segment, message.bucket), *checkpoint, restart_seq, seq
                    ),
                )


def check_consumer(st: CheckerState, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
    if incarnation is not None and incarnation.filters:
        # req: KS-FLT-2
        st._exercise("filter-violation")
        if not accepts(incarnation.filters, message.key):
            st._report(
                "filter-violation",
                seq,
                [incarnation.added_seq, seq],
                rules.filters.filter_violation(*message.facts, name, incarnation.filters, incarnation.added_seq, seq),
            )
    # req: KS-MEM-3
    if incarnation is None or st._offline:  # a member is disconnected
        st._exercise("inactive-delivery")
    if incarnation is None:
        ended = st.left.get(name)
        st._report(
            "inactive-delivery",
            seq,
            [ended, seq],
            rules.leaving.inactive_delivery_to_non_member(*message.facts, name, ended, seq),
        )
    elif not incarnation.connected:
        st._report(
            "inactive-delivery",
            seq,
            [incarnation.disconnected_seq, seq],
            rules.leaving.inactive_delivery_to_disconnected(*message.facts, name, incarnation.disconnected_seq, seq),
        )
    if incarnation is not None and st.max_unacked:
        # req: KS-FLW-1 (max_unacked: a consumer that reached the limit gets nothing until half of it is acked)
        if len(incarnation.outstanding) >= st.max_unacked - 1 or incarnation.unacked_blocked_seq is not None:
            st._exercise("capacity-overrun")
        if incarnation.unacked_blocked_seq is not None and not st._continuing_batch:
            st._report(
                "capacity-overrun",
                seq,
                [incarnation.unacked_blocked_seq, seq],
                explain.unacked_overrun(
                    message.offset,
                    name,
                    st.max_unacked,
                    incarnation.unacked_blocked_seq,
                    len(incarnation.outstanding),
                    seq,
                ),
            )
    if incarnation is not None and incarnation.permits is not None:
        # req: KS-FLW-4 (a batch's first message needs a permit; the rest follow it and are charged too)
        if incarnation.permits == 1:
            st._exercise("permit-overrun")
        if incarnation.permits < 1 and not st._continuing_batch:
            st._report(
                "permit-overrun",
                seq,
                [incarnation.added_seq, *incarnation.grants, seq],
                rules.flow.permit_overrun(
                    message.offset, name, incarnation.capacity, incarnation.added_seq, incarnation.grants, seq
                ),
            )
        incarnation.permits -= 1
    elif incarnation is not None:
        # req: KS-FLW-1
        held = len(incarnation.outstanding)
        if held >= incarnation.capacity - 1:
            st._exercise("capacity-overrun")
        if held + 1 > incarnation.capacity and not st._continuing_batch:  # KS-BKT-10: the batch follows
            seqs = sorted(d.seq for d in incarnation.outstanding.values())
            st._report(
                "capacity-overrun",
                seq,
                [incarnation.added_seq, *seqs, seq],
                rules.flow.capacity_overrun(
                    message.offset, name, incarnation.capacity, incarnation.added_seq, seqs, seq
                ),
            )


def record_delivery(
    st: CheckerState, message: Message, state: KeyState, holder: Incarnation, attempt: int, seq: int
) -> None:
    if message.outstanding is not None:
        st._end_delivery(message)
    st._serial += 1
    delivery = Delivery(st._serial, message.offset, holder, attempt, st.now, seq, st.epoch)
    message.deliveries += 1
    message.delivered_ever = True
    message.delivered_since_restart = True
    message.last_delivery_seq = seq
    message.restored_seq = None
    message.outstanding = delivery
    st._outstanding_epochs[st.epoch] += 1
    st.parked.discard(message.offset)  # an outstanding message is never parked (KS-ISO-4)
    holder.outstanding[message.offset] = delivery
    if st.max_unacked and len(holder.outstanding) >= st.max_unacked and holder.unacked_blocked_seq is None:
        holder.unacked_blocked_seq = seq  # req: KS-FLW-1 (blocked at the limit)
    state.outstanding[message.offset] = delivery
    st._holding_keys.add(message.key)
    state.undelivered.discard(message.offset)
    state.last_delivery = (st.epoch, holder, seq, message.segment)
    if message.segment is not None and message.bucket is not None:
        st.bucket_outstanding.setdefault((message.segment, message.bucket), {})[message.offset] = delivery
    st._clear_awaiting(message, state)
    if st.ack_timeout > 0 and not st.best_effort:
        st._push_timeout(st.now + st.ack_timeout + st.timer_slack, delivery)
    if st.best_effort and not message.resolved:
        st._resolve_silently(message, "delivered", seq)
    st._refresh_head(message.key)


def on_held(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    message.held = True
    message.held_seq = seq
    message.last_hold_reason = str(event["reason"])
    message.last_hold_seq = seq
    if event["reason"] == "inactive" and event.get("consumer") is not None:
        target = st.members.get(str(event["consumer"]))
        if target is not None and target.connected and target.reconnected_seq is not None:
            rules.leaving.report_reconnect_ignored(
                st, target, seq, explain.held_inactive(message.offset, target.name, seq)
            )
    if event["reason"] == "draining":
        st._exercise("drain-stuck")
        if st.slots_by_hash:
            consumer = event.get("consumer")
            rules.draining.check_draining_hold(st, message, None if consumer is None else str(consumer), seq)
