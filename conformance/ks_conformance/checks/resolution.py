"""spec/checking.md section 2.1, answers and resolutions: acks, nacks, timeouts, extensions, poison, drops,
dead letters, filters, outcomes, evictions, the persisted cursor and checkpoints. Each handler calls its rules'
checks (in `ks_conformance.rules`), then updates the state.
"""

from __future__ import annotations

from pyroaring import BitMap

from ks_conformance.checks.records import Delivery, Message
from ks_conformance.checks.state import OUTCOME_EVENTS, CheckerState, Event
from ks_conformance.rules.acks import check_ack_by_holder, zombie_answered, zombie_op
from ks_conformance.rules.best_effort import check_best_effort_outcome
from ks_conformance.rules.buckets import check_checkpoint
from ks_conformance.rules.cursor import (
    check_cursor_regress,
    check_cursor_skip,
    check_persist_early,
    ignored,
    seek_stale_answer,
)
from ks_conformance.rules.filters import check_filtered
from ks_conformance.rules.leaving import check_eviction
from ks_conformance.rules.poison import check_dead_letter_record, report_early_block
from ks_conformance.rules.resolutions import check_dead_letter, check_drop, report_undeclared_outcome, resolve
from ks_conformance.rules.retries import check_nack_by_holder, check_timeout, check_zombie_extension, returns_counted

ZOMBIE_OPS = frozenset({"zombie_ack", "zombie_nack"})
"""The ops that report a result for a delivery that already ended (KS-ACK-3)."""


def on_zombie_ack(st: CheckerState, event: Event) -> None:
    zombie_op(st, event)


def on_zombie_nack(st: CheckerState, event: Event) -> None:
    zombie_op(st, event)


def on_extend(st: CheckerState, event: Event) -> None:
    """An `extend` op: note whether its consumer holds the offset's outstanding delivery (KS-RTY-8, KS-RTY-9)."""
    op = st.op
    assert op is not None
    message = st._message_of(event)
    if message is None or st.best_effort:
        return
    delivery = message.outstanding
    incarnation = st.members.get(str(event["consumer"]))
    holds = delivery is not None and incarnation is not None and delivery.holder is incarnation
    op.extension = (str(event["consumer"]), int(event["capacity"]), delivery if holds else None)
    # req: KS-RTY-8, KS-RTY-9
    st._exercise("extension-lost" if holds else "zombie-extension")


def extension_of(st: CheckerState, event: Event) -> tuple[Message, str, int, Delivery | None] | None:
    """The message and the `extend` op an `extended` or `extend_ignored` event answers, or None (a problem)."""
    op = st.op
    seq = int(event["seq"])
    if op is None or op.kind != "extend" or op.extension_answered:
        st._problem(seq, f"{event['event']} outside an extend op, or a second answer to one")
        return None
    op.extension_answered = True
    message = st._message_of(event)
    if message is None or op.extension is None:
        return None
    name, ticks, delivery = op.extension
    if str(event["consumer"]) != name or int(event["offset"]) != message.offset:
        st._problem(seq, f"{event['event']} names another consumer or offset than its extend op")
        return None
    return message, name, ticks, delivery


def on_extended(st: CheckerState, event: Event) -> None:
    answered = extension_of(st, event)
    op = st.op
    if answered is None or op is None:
        return
    message, name, ticks, delivery = answered
    seq = int(event["seq"])
    if check_zombie_extension(st, message, name, delivery, op, seq) or delivery is None:
        return
    # req: KS-RTY-8 (the deadline becomes now + ticks, replacing the earlier one)
    delivery.deadline = st.now + ticks
    delivery.extended_seq = seq
    st._push_timeout(delivery.deadline + st.timer_slack, delivery)


def on_extend_ignored(st: CheckerState, event: Event) -> None:
    answered = extension_of(st, event)
    op = st.op
    if answered is None or op is None:
        return
    message, _, _, delivery = answered
    if delivery is not None and message.outstanding is delivery:
        op.extension_ignored_seq = int(event["seq"])  # judged at the end of the op (KS-RTY-8)


def on_ack(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    if zombie_answered(st, message, event, accepted=True):
        return
    seq = int(event["seq"])
    name = str(event["consumer"])
    incarnation = st.members.get(name)
    delivery = message.outstanding
    holds = delivery is not None and incarnation is not None and delivery.holder is incarnation
    if st.best_effort:
        if holds:
            st._end_delivery(message)
        return
    if not holds and name in st.seek_holders.get(message.offset, ()):
        seek_stale_answer(st, message, name, "ack", seq)
    else:
        check_ack_by_holder(st, message, name, holds, seq)
    resolve(st, message, "acked", seq)


def on_ack_ignored(st: CheckerState, event: Event) -> None:
    ignored(st, event, "ack")


def on_nack_ignored(st: CheckerState, event: Event) -> None:
    ignored(st, event, "nack")


def on_nack(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None or zombie_answered(st, message, event, accepted=True):
        return
    seq = int(event["seq"])
    name = str(event["consumer"])
    incarnation = st.members.get(name)
    delivery = message.outstanding
    holds = delivery is not None and incarnation is not None and delivery.holder is incarnation
    if not holds and name in st.seek_holders.get(message.offset, ()):
        seek_stale_answer(st, message, name, "nack", seq)
    else:
        check_nack_by_holder(st, message, name, holds, seq)
    if not message.resolved:
        st._fail(message, "nack", seq)
    else:
        st._end_delivery(message)  # a nack of a resurrected delivery (KS-CUR-4) still ends it


def on_timeout(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    name = str(event["consumer"])
    delivery = message.outstanding
    at_consumer = delivery is not None and delivery.holder.name == name
    check_timeout(st, message, name, seq)
    if at_consumer and not message.resolved:
        st._fail(message, "timeout", seq)
    elif at_consumer:
        st._end_delivery(message)  # the timeout of a resurrected delivery (KS-CUR-4) still ends it


def on_drop(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    check_drop(st, message, str(event["reason"]), seq)
    if st.best_effort:
        check_best_effort_outcome(st, message, seq)
    resolve(st, message, "dropped", seq)


def on_dead_letter(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    check_dead_letter(st, message, seq)
    check_dead_letter_record(st, message, int(event["attempt"]), str(event["reason"]), seq)
    resolve(st, message, "dead_lettered", seq)


def on_filter(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    check_filtered(st, message, seq)
    if st.best_effort:
        check_best_effort_outcome(st, message, seq)
    resolve(st, message, "filtered", seq)


def on_outcome(st: CheckerState, event: Event) -> None:
    """An implementation-defined terminal outcome: judged as the resolution declared for it, else a loss."""
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    name = str(event["reason"])
    outcomes = st.declared.get("terminal_outcomes", {})
    resolution = outcomes.get(name)
    # req: KS-RES-1
    st._exercise("unjustified-outcome")
    if resolution in OUTCOME_EVENTS:
        judged: Event = {**event, "event": OUTCOME_EVENTS[resolution]}
        if resolution == "dropped":
            judged["reason"] = "poison"
        elif resolution == "dead_lettered":
            judged.update(attempt=message.deliveries, reason=message.last_failure)
        elif resolution == "acked" and event.get("consumer") is None:
            holder = message.outstanding.holder.name if message.outstanding is not None else "(nobody)"
            judged["consumer"] = holder
        judge = {"ack": on_ack, "drop": on_drop, "dead_letter": on_dead_letter, "filter": on_filter}
        judge[OUTCOME_EVENTS[resolution]](st, judged)
        return
    report_undeclared_outcome(st, message, name, name in outcomes, seq)
    resolve(st, message, f"outcome:{name}", seq)


def on_key_blocked(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    state = st._key(message.key)
    message.blocked = True
    message.blocked_seq = seq
    st._clear_awaiting(message, state)
    st._over_budget.discard(message.offset)
    state.blocked.add(message.offset)
    st._blocked_keys.add(message.key)
    st._exercise("return-counted")
    st._exercise("unjustified-block")
    if message.released_seq is not None:
        st._exercise("stale-budget")
    maximum = int(st.config["max_redeliveries"])
    if message.failures <= maximum and not returns_counted(st, message, seq, "key_blocked"):
        report_early_block(st, message, seq, maximum)
    last = max(state.unresolved) if len(state.unresolved) else message.offset
    if last > message.offset:
        st._exercise("blocked-key-leak")
    st._refresh_head(message.key)


def on_consumer_evicted(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    name = str(event["consumer"])
    incarnation = st.members.get(name)
    check_eviction(st, name, incarnation, seq)
    if incarnation is None:
        return
    st._disconnected.pop(incarnation.number, None)
    st._end_incarnation(incarnation, seq, returned=True)
    st._new_epoch("leave", incarnation, seq)


def on_cursor_persisted(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    st.persist_due_since = None  # req: KS-GEN-9 (a change after this persist starts its own slack)
    cursor = int(event["cursor"])
    holes = BitMap()
    for lo, hi in event.get("ranges") or ():
        holes.add_range(int(lo), int(hi) + 1)
    op = st.op
    seeking = op is not None and op.kind == "seek" and st.seek is not None
    check_cursor_skip(st, cursor, holes, seq)
    check_cursor_regress(st, cursor, seeking, seq)
    check_persist_early(st, cursor, seeking, seq)
    st.persisted_cursor = cursor
    st.persisted_holes = holes
    st.persist_seq = seq
    st.persist_tick = st.now
    st.flush_owed = False
    if cursor == st.cursor() and (not st.config["persist_ack_holes"] or holes == st.resolved_above_cursor()):
        st.synced_version = st.state_version
    else:
        st.synced_version = -1


def on_checkpoint(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    bucket = (int(event["segment"]), int(event["bucket"]))
    cursor = int(event["cursor"])
    check_checkpoint(st, bucket, cursor, seq)
    st.checkpoints[bucket] = (cursor, seq)
