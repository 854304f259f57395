"""spec/checking.md section 2.1, deliveries: `on_deliver` and `on_held` call each rule's check (in
`ks_conformance.rules`, in the order they judge), then record the delivery or hold in the state.
"""

from __future__ import annotations

from ks_conformance import explain
from ks_conformance.checks.changes import DELIVERED
from ks_conformance.checks.hooks import DELIVERY_CHECKS
from ks_conformance.checks.records import Delivery, Incarnation, KeyState, Message
from ks_conformance.checks.state import CheckerState, Event, logged_name
from ks_conformance.rules.assignment import check_assignment
from ks_conformance.rules.best_effort import check_best_effort_outcome
from ks_conformance.rules.buckets import check_bucket_delivery, check_checkpoint_resurrected
from ks_conformance.rules.cursor import check_resurrected, check_seek_resurrected
from ks_conformance.rules.draining import check_draining_hold, check_split_owner
from ks_conformance.rules.filters import check_filter_violation
from ks_conformance.rules.flow import check_capacity, check_flow, check_overtaken_hold, check_unacked_limit
from ks_conformance.rules.leaving import check_inactive_delivery, report_reconnect_ignored
from ks_conformance.rules.ordering import check_due, check_key_reorder, check_retry_overtaken, check_strict_overlap
from ks_conformance.rules.poison import check_blocked_key_leak
from ks_conformance.rules.resolutions import check_duplicate
from ks_conformance.rules.retries import check_attempt, check_retry


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
    st._continuing_batch = run is not None and bool(
        anew and run.consumer == name and run.expected and run.expected[0] == message.offset
    )
    if message.deliver_at is not None:
        check_due(st, message, seq)
    check_key_reorder(st, message, state, seq, first)
    check_overtaken_hold(st, message, state, seq, first)
    check_strict_overlap(st, message, state, seq)
    check_retry_overtaken(st, message, state, seq)
    check_split_owner(st, message, state, seq, incarnation or st._phantoms.get(name), name)
    check_blocked_key_leak(st, message, state, seq)
    if not check_seek_resurrected(st, message, seq):
        check_duplicate(st, message, seq)
        check_resurrected(st, message, seq)
        check_checkpoint_resurrected(st, message, seq)
    check_filter_violation(st, message, seq, incarnation)
    check_inactive_delivery(st, message, seq, incarnation, name)
    check_unacked_limit(st, message, seq, incarnation)
    check_capacity(st, message, seq, incarnation)
    check_flow(st, message, seq, first)
    check_attempt(st, message, seq, attempt)
    check_assignment(st, message, state, seq, incarnation, name)
    check_retry(st, message, seq)
    if st.buckets and message.segment is not None:
        check_bucket_delivery(st, message, seq, incarnation, name)
    if st.best_effort:
        check_best_effort_outcome(st, message, seq)
    for check in DELIVERY_CHECKS:
        check(st, message, event)
    if incarnation is None:
        incarnation = st._phantoms.get(name)
    if incarnation is None:
        st._incarnations += 1
        incarnation = Incarnation(st._incarnations, name, 0, (), (), seq, member=False, connected=False)
        st._phantoms[name] = incarnation
    record_delivery(st, message, state, incarnation, attempt, seq)


def record_delivery(
    st: CheckerState, message: Message, state: KeyState, holder: Incarnation, attempt: int, seq: int
) -> None:
    if message.outstanding is not None:
        st._end_delivery(message)
    offset, epoch, now = message.offset, st.epoch, st.now
    serial = st._serial = st._serial + 1
    delivery = Delivery(serial, offset, holder, attempt, now, seq, epoch)
    message.deliveries += 1
    message.delivered_ever = True
    message.delivered_since_restart = True
    message.last_delivery_seq = seq
    message.restored_seq = None
    message.outstanding = delivery
    st._outstanding_epochs[epoch] += 1
    if st.park_after:
        st.parking.delivered(offset, seq)  # an outstanding message is never parked (KS-ISO-4)
    holder.outstanding[offset] = delivery
    if st.delta_log is not None:
        st.delta_log.append((seq, DELIVERED, offset, logged_name(holder)))
    if st.max_unacked and st.holding(holder) >= st.max_unacked and holder.unacked_blocked_seq is None:
        holder.unacked_blocked_seq = seq  # req: KS-FLW-1 (blocked at the limit)
    state.outstanding[offset] = delivery
    st._holding_keys.add(message.key)
    state.undelivered.discard(offset)
    state.last_delivery = (epoch, holder, seq, message.segment)
    if message.segment is not None and message.bucket is not None:
        st.bucket_outstanding.setdefault((message.segment, message.bucket), {})[offset] = delivery
    st._clear_awaiting(message, state)
    if st.ack_timeout > 0 and not st.best_effort:
        st._push_timeout(now + st.ack_timeout + st.timer_slack, delivery)
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
            report_reconnect_ignored(st, target, seq, explain.held_inactive(message.offset, target.name, seq))
    if event["reason"] == "draining":
        st._exercise("drain-stuck")
        if st.slots_by_hash:
            consumer = event.get("consumer")
            check_draining_hold(st, message, None if consumer is None else str(consumer), seq)
