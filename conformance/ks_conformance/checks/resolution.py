"""spec/checking.md section 2.1, answers and resolutions: acks, nacks, timeouts, poison, drops, dead
letters, filters, outcomes, evictions, the persisted cursor and checkpoints.

Long because every way a delivery ends or a message is resolved (late results included) updates the same
per-message state; issue 29 makes each anomaly kind a rule of its own.
"""

from __future__ import annotations

from pyroaring import BitMap

from ks_conformance import explain, rules
from ks_conformance.checks.records import Delivery, Message
from ks_conformance.checks.state import BEST_EFFORT_DROPS, OUTCOME_EVENTS, CheckerState, Event
from ks_conformance.glob import accepts

ZOMBIE_OPS = frozenset({"zombie_ack", "zombie_nack"})
"""The ops that report a result for a delivery that already ended (KS-ACK-3)."""


def on_zombie_ack(st: CheckerState, event: Event) -> None:
    rules.acks.zombie_op(st, event)


def on_zombie_nack(st: CheckerState, event: Event) -> None:
    rules.acks.zombie_op(st, event)


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
    current = message.outstanding
    if delivery is None or current is not delivery:
        holder, holder_seq = (current.holder.name, current.seq) if current is not None else (None, None)
        # req: KS-RTY-9
        st._report(
            "zombie-extension",
            seq,
            [op.seq, seq],
            rules.retries.zombie_extension(*message.facts, name, op.seq, holder, holder_seq, seq),
        )
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
    if rules.acks.zombie_answered(st, message, event, accepted=True):
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
    if holds:
        st._exercise("holder-ack-ignored")
    elif name in st.seek_holders.get(message.offset, ()):
        rules.cursor.seek_stale_answer(st, message, name, "ack", seq)
    else:
        # req: KS-ACK-2, KS-GEN-3
        st._exercise("stale-ack-accepted")
        holder, holder_seq = (delivery.holder.name, delivery.seq) if delivery is not None else (None, None)
        st._report(
            "stale-ack-accepted",
            seq,
            [message.last_delivery_seq, seq],
            rules.acks.stale_ack_accepted(*message.facts, message.last_delivery_seq, holder, holder_seq, name, seq),
        )
    rules.resolutions.resolve(st, message, "acked", seq)


def on_ack_ignored(st: CheckerState, event: Event) -> None:
    rules.cursor.ignored(st, event, "ack")


def on_nack_ignored(st: CheckerState, event: Event) -> None:
    rules.cursor.ignored(st, event, "nack")


def on_nack(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None or rules.acks.zombie_answered(st, message, event, accepted=True):
        return
    seq = int(event["seq"])
    name = str(event["consumer"])
    incarnation = st.members.get(name)
    delivery = message.outstanding
    if delivery is not None and incarnation is not None and delivery.holder is incarnation:
        st._exercise("holder-nack-ignored")
    elif name in st.seek_holders.get(message.offset, ()):
        rules.cursor.seek_stale_answer(st, message, name, "nack", seq)
    else:
        # req: KS-RTY-1
        st._exercise("stale-nack-accepted")
        st._report(
            "stale-nack-accepted",
            seq,
            [message.last_delivery_seq, seq],
            rules.retries.stale_nack_accepted(*message.facts, message.last_delivery_seq, name, seq),
        )
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
    timeout = int(st.config["ack_timeout"])
    delivery = message.outstanding
    at_consumer = delivery is not None and delivery.holder.name == name
    if at_consumer and delivery is not None and delivery.deadline is not None and timeout > 0:
        # req: KS-RTY-8 (an extended delivery times out at its new deadline, not before)
        if delivery.deadline != delivery.tick + timeout:
            st._exercise("extended-timeout-early")  # the extension really moved it
        if st.now < delivery.deadline:
            st._report(
                "extended-timeout-early",
                seq,
                [delivery.seq, delivery.extended_seq or delivery.seq, seq],
                rules.retries.extended_timeout_early(
                    *message.facts, name, delivery.seq, delivery.extended_seq, delivery.deadline, st.now, seq
                ),
            )
        if not message.resolved:
            st._fail(message, "timeout", seq)
        else:
            st._end_delivery(message)
        return
    # req: KS-RTY-2
    st._exercise("premature-timeout")
    why = ""
    if timeout == 0:
        why = explain.TIMEOUTS_DISABLED
    elif not at_consumer:
        why = explain.not_outstanding_at(message.offset, name)
    elif delivery is not None and st.now < delivery.tick + timeout:
        why = explain.timeout_not_due(delivery.tick, timeout)
    if why:
        holder, holder_seq = (delivery.holder.name, delivery.seq) if delivery is not None else (None, None)
        st._report(
            "premature-timeout",
            seq,
            [holder_seq, seq],
            rules.retries.premature_timeout(*message.facts, holder, holder_seq, name, st.now, why, seq),
        )
    if at_consumer and not message.resolved:
        st._fail(message, "timeout", seq)
    elif at_consumer:
        st._end_delivery(message)  # the timeout of a resurrected delivery (KS-CUR-4) still ends it


def on_drop(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    reason = str(event["reason"])
    # req: KS-RES-1
    st._exercise("unjustified-resolution")
    why = ""
    if reason == "poison":
        why = poison_why(st, message, "drop")
    elif reason == "operator":
        op = st.op
        if op is None or op.kind != "key_skipped" or op.key != message.key:
            why = explain.NO_OPERATOR_SKIP
    elif reason in BEST_EFFORT_DROPS and not st.best_effort:
        why = explain.best_effort_reason(reason)
    if not why and message.outstanding is not None and not st.best_effort:
        why = explain.delivery_outstanding(message.outstanding.holder.name, message.outstanding.seq)
    if reason == "poison":
        st._exercise("return-counted")
    if why and reason == "poison" and rules.retries.returns_counted(st, message, seq, "drop"):
        why = ""
    if why:
        st._report(
            "unjustified-resolution",
            seq,
            [seq],
            rules.resolutions.unjustified_resolution_drop(*message.facts, reason, why, seq),
        )
    if st.best_effort:
        rules.best_effort.check_best_effort_outcome(st, message, seq)
    rules.resolutions.resolve(st, message, "dropped", seq)


def on_dead_letter(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    maximum = int(st.config["max_redeliveries"])
    st._exercise("unjustified-resolution")
    st._exercise("dead-letter-mismatch")
    why = poison_why(st, message, "dead-letter")
    if not why and message.outstanding is not None:
        why = explain.delivery_outstanding(message.outstanding.holder.name, message.outstanding.seq)
    st._exercise("return-counted")
    if why and message.failures <= maximum and rules.retries.returns_counted(st, message, seq, "dead_letter"):
        why = ""
    if why:
        st._report(
            "unjustified-resolution",
            seq,
            [seq],
            rules.resolutions.unjustified_resolution_dead_letter(*message.facts, why, seq),
        )
    attempt, reason = int(event["attempt"]), str(event["reason"])
    # `left`: a system that counts returns names the leave that ended the last delivery (judged return-counted)
    left = reason == "left" and message.returns > 0 and message.returned_delivery_seq == message.last_delivery_seq
    if attempt != message.deliveries or (reason != message.last_failure and not left):
        # req: KS-POI-2
        last_failure = message.failure_seqs[-1] if message.failure_seqs else None
        st._report(
            "dead-letter-mismatch",
            seq,
            [last_failure, seq],
            rules.poison.dead_letter_mismatch(
                *message.facts, message.deliveries, message.last_failure, last_failure, attempt, reason, seq
            ),
        )
    rules.resolutions.resolve(st, message, "dead_lettered", seq)


def poison_why(st: CheckerState, message: Message, policy: str) -> str:
    """Why resolving a message as poison the `policy` way is unjustified (KS-RES-1), or "" if it is not."""
    maximum = int(st.config["max_redeliveries"])
    if st.config["poison_policy"] != policy:
        return explain.wrong_poison_policy(st.config["poison_policy"], policy)
    if message.failures <= maximum:
        return explain.not_over_budget(message.failures, maximum)
    return ""


def on_filter(st: CheckerState, event: Event) -> None:
    message = st._message_of(event)
    if message is None:
        return
    seq = int(event["seq"])
    st._exercise("unjustified-filter")
    st._exercise("filtered-without-members")
    if not st.members:
        # req: KS-FLT-4
        st._report("filtered-without-members", seq, [seq], rules.filters.filtered_without_members(*message.facts, seq))
    else:
        # req: KS-FLT-3
        taker = next((m for m in st.members.values() if accepts(m.filters, message.key)), None)
        if taker is not None:
            st._report(
                "unjustified-filter",
                seq,
                [taker.added_seq, seq],
                rules.filters.unjustified_filter(*message.facts, taker.name, taker.filters, taker.added_seq, seq),
            )
    if st.best_effort:
        rules.best_effort.check_best_effort_outcome(st, message, seq)
    rules.resolutions.resolve(st, message, "filtered", seq)


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
    st._report(
        "unjustified-outcome",
        seq,
        [message.publish_seq, seq],
        rules.resolutions.unjustified_outcome(*message.facts, name, name in outcomes, seq),
    )
    rules.resolutions.resolve(st, message, f"outcome:{name}", seq)


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
    if message.failures <= maximum and not rules.retries.returns_counted(st, message, seq, "key_blocked"):
        rules.poison.report_early_block(st, message, seq, maximum)
    last = max(state.unresolved) if len(state.unresolved) else message.offset
    if last > message.offset:
        st._exercise("blocked-key-leak")
    st._refresh_head(message.key)


def on_consumer_evicted(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    name = str(event["consumer"])
    incarnation = st.members.get(name)
    evict_after = int(st.config["evict_after"])
    # req: KS-MEM-2
    st._exercise("premature-eviction")
    why = ""
    if incarnation is not None and incarnation.reconnected_seq is not None:
        rules.leaving.report_reconnect_ignored(st, incarnation, seq, explain.evicted_at(name, st.now, seq))
    elif incarnation is None:
        why = explain.not_a_member(name)
    elif incarnation.connected:
        why = explain.still_connected(name)
    elif evict_after == 0:
        why = explain.EVICTION_DISABLED
    elif st.now < incarnation.disconnected_at + evict_after:
        why = explain.eviction_not_due(incarnation.disconnected_at, evict_after, st.now)
    if why:
        st._report(
            "premature-eviction",
            seq,
            [incarnation.disconnected_seq if incarnation else None, seq],
            rules.leaving.premature_eviction(name, st.now, why, seq),
        )
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
    if st.unresolved:
        # req: KS-CUR-1
        st._exercise("cursor-skip")
        smallest = st.unresolved.min()
        bad = holes & st.unresolved
        if cursor > smallest or bad:
            offset = smallest if cursor > smallest else bad.min()
            skipped = st.messages[offset]
            st._report(
                "cursor-skip",
                seq,
                [skipped.publish_seq, seq],
                rules.cursor.cursor_skip(*skipped.facts, cursor, cursor > smallest, seq),
            )
    op = st.op
    seeking = op is not None and op.kind == "seek" and st.seek is not None
    if st.persist_seq is not None:
        # req: KS-CUR-2
        st._exercise("cursor-regress")
        if cursor < st.persisted_cursor and not (seeking and st.seek is not None and cursor >= st.seek[0]):
            st._report(
                "cursor-regress",
                seq,
                [st.persist_seq, seq],
                rules.cursor.cursor_regress(cursor, st.persisted_cursor, st.persist_seq, seq),
            )
    interval = int(st.config["persist_interval"])
    if st.persist_on_advance and not seeking:  # req: KS-CUR-10 (a seek's persistence is not debounced)
        # req: KS-CUR-7 (with persist_trigger = advance: only when KS-CUR-12 makes it due)
        st._exercise("persist-early")
        op = st.op
        moved = op is not None and st.cursor() > op.cursor_at_start
        elapsed = st.persist_tick is None or st.now - st.persist_tick >= interval
        flush = st.persist_flush
        flushing = bool(flush) and op is not None and op.kind == "tick" and (st.flush_owed or st.now % flush == 0)
        if not (moved and elapsed) and not flushing:
            st._report(
                "persist-early",
                seq,
                [st.persist_seq, seq],
                rules.cursor.persist_early(cursor, st.now, explain.persist_off_schedule(interval, flush), seq),
            )
    elif interval > 0 and not seeking:
        # req: KS-CUR-7
        st._exercise("persist-early")
        why = ""
        if op is None or op.kind != "tick":
            why = explain.persist_outside_tick(interval)
        elif st.persist_tick is not None and st.now - st.persist_tick < interval:
            why = explain.persist_too_soon(st.persist_tick, interval)
        if why:
            st._report(
                "persist-early",
                seq,
                [st.persist_seq, seq],
                rules.cursor.persist_early(cursor, st.now, why, seq),
            )
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
    # req: KS-BKT-6
    st._exercise("checkpoint-skip")
    pending = st.bucket_unresolved.get(bucket)
    first = pending.first() if pending is not None else None
    if first is not None and first < cursor:
        skipped = st.messages[first]
        st._report(
            "checkpoint-skip",
            seq,
            [skipped.publish_seq, seq],
            rules.buckets.checkpoint_skip_passes(*skipped.facts, bucket, cursor, seq),
        )
    previous = st.checkpoints.get(bucket)
    if previous is not None and cursor < previous[0]:
        st._report(
            "checkpoint-skip",
            seq,
            [previous[1], seq],
            rules.buckets.checkpoint_skip_regress(bucket, previous[0], previous[1], cursor, seq),
        )
    st.checkpoints[bucket] = (cursor, seq)
