"""spec/checking.md section 2.1, op events: the configuration, publishes, membership, ticks, restarts,
operator actions and layout changes, each judged as it arrives.
"""

from __future__ import annotations

import heapq
import json
from bisect import insort

from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.slots import slot_of
from pyroaring import BitMap

from ks_conformance import rules
from ks_conformance.checks.changes import DELAYED, PUBLISHED, REOPENED, SEEKED
from ks_conformance.checks.records import Incarnation, Message, Segment
from ks_conformance.checks.state import CheckerState, Event


def on_config(st: CheckerState, event: Event) -> None:
    try:
        detail = json.loads(event["detail"])
        config = detail["config"]
    except (ValueError, KeyError, TypeError):
        st._problem(int(event["seq"]), "the config event's detail is not {'config': {...}}")
        return
    if not isinstance(config, dict):
        st._problem(int(event["seq"]), "the config event's 'config' is not an object")
        return
    st.config = {**CONFIG_DEFAULTS, **config}
    declared = detail.get("declared", {})
    if not isinstance(declared, dict) or not isinstance(declared.get("terminal_outcomes", {}), dict):
        st._problem(
            int(event["seq"]), "the config event's 'declared' is not {'cursor': ..., 'terminal_outcomes': {...}}"
        )
        declared = {}
    st.declared = declared
    if st.config["profile"] not in ("strict", "owner", "best-effort"):
        st._problem(int(event["seq"]), f"unknown profile {st.config['profile']!r}")
    st._configure()


def on_publish(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    offset = int(event["offset"])
    messages = st.messages
    if offset != messages.published:
        st._problem(seq, f"publish of offset {offset}, expected {messages.published}")
        return
    op = st.op
    assert op is not None
    key = str(event["key"])
    message = Message(offset, key, seq, op.index, last_event_seq=seq)
    messages.append(message)
    st.unresolved.add(offset)
    st.state_version += 1
    if st.delta_log is not None:
        st.delta_log.append((seq, PUBLISHED, offset, None))
    state = st.keys.get(key)
    if state is None and key in st._resting:
        state = st._key(key)
    elif state is None:
        state = st.keys[key] = st._new_key_state(None)
        if st.slots_by_hash:
            slot = slot_of(str(st.config["selector"]), key)
            st._keys_of_slot.setdefault(slot, []).append(key)
    state.unresolved.add(offset)
    state.undelivered.add(offset)
    if st.park_after:
        st.parking.published(key, offset, seq)
    st._refresh_head(key)
    op.published = offset
    if st.best_effort:
        st._exercise("best-effort-redelivery")
        st._exercise("missing-outcome")
    if state.blocked:
        st._exercise("blocked-key-leak")
    if st.buckets:
        rules.buckets.publish_placement(st, message, event)
    entry = event.get("entry")
    if entry is not None:
        message.entry = int(entry)
        st.batches.setdefault(message.entry, []).append(offset)
    if st.delays_seen and any(messages[o].key == key and st.not_due(messages[o]) for o in st._delayed):
        st._exercise("blocked-behind-delayed")  # a dispatcher could hold it behind that one (KS-ORD-6)
    deliver_at = event.get("deliver_at")
    if deliver_at is not None:
        # req: KS-ORD-5, KS-ORD-6, KS-ORD-7 (a delayed message: judged from here on by its due tick)
        message.deliver_at = int(deliver_at)
        st.delays_seen = True
        if st.delta_log is not None:
            st.delta_log.append((seq, DELAYED, offset, None))
        st._delayed.add(offset)
        if message.deliver_at > st.now:
            st._exercise("delivered-before-due")


def on_consumer_added(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    name = str(event["consumer"])
    if name in st.members:
        st._problem(seq, f"consumer {name!r} joined while already a member")
        return
    st._incarnations += 1
    ranges = tuple((int(r[0]), int(r[1])) for r in event.get("ranges") or ())
    incarnation = Incarnation(
        st._incarnations, name, int(event["capacity"]), tuple(event.get("filters") or ()), ranges, seq
    )
    if st.permits:
        incarnation.permits = incarnation.capacity  # req: KS-FLW-4 (the capacity is the first grant)
    if event.get("hash_name") is not None:
        incarnation.hash_name = str(event["hash_name"])
    st.members[name] = incarnation
    st._phantoms.pop(name, None)
    st._new_epoch("join", incarnation, seq)


def on_consumer_removed(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    incarnation = st.members.get(str(event["consumer"]))
    if incarnation is None:
        st._problem(seq, f"consumer {event['consumer']!r} left but is not a member")
        return
    st._end_incarnation(incarnation, seq, returned=True)
    st._new_epoch("leave", incarnation, seq)


def on_consumer_disconnected(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    incarnation = st.members.get(str(event["consumer"]))
    if incarnation is None:
        st._problem(seq, f"consumer {event['consumer']!r} disconnected but is not a member")
        return
    if not incarnation.connected:
        return
    incarnation.connected = False
    st._offline.add(incarnation.number)
    incarnation.disconnected_at = st.now
    incarnation.disconnected_seq = seq
    incarnation.reconnected_seq = None
    if int(st.config["evict_after"]) > 0:
        st._disconnected[incarnation.number] = incarnation


def on_consumer_reconnected(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    incarnation = st.members.get(str(event["consumer"]))
    if incarnation is None:
        st._problem(seq, f"consumer {event['consumer']!r} reconnected but is not a member")
        return
    if incarnation.connected:
        return
    # req: KS-MEM-4 (connected again with all it holds; its eviction clock is off)
    st._exercise_shared("reconnect-ignored")
    incarnation.connected = True
    st._offline.discard(incarnation.number)
    incarnation.reconnected_seq = seq
    st._disconnected.pop(incarnation.number, None)
    st.state_version += 1


def on_permits_granted(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    incarnation = st.members.get(str(event["consumer"]))
    if incarnation is None:
        st._problem(seq, f"consumer {event['consumer']!r} granted permits but is not a member")
        return
    if incarnation.permits is None:
        st._problem(seq, "permits_granted in a trace whose flow_control is capacity (the flow op is refused)")
        return
    incarnation.permits += int(event["capacity"])
    incarnation.grants.append(seq)
    st.state_version += 1


def on_tick(st: CheckerState, event: Event) -> None:
    op = st.op
    assert op is not None
    timeout = int(st.config["ack_timeout"])
    while st._timeouts and st._timeouts[0][0] <= st.now:
        due, _, _, delivery = heapq.heappop(st._timeouts)
        message = st.messages.peek(delivery.offset)  # an archived message is not outstanding
        if message is not None and message.outstanding is delivery:
            if due == st.timeout_due(delivery) + st.timer_slack and delivery not in op.due_timeouts:
                op.due_timeouts.append(delivery)  # an entry an extension replaced is stale (KS-RTY-8)
    if timeout > 0:
        extended = sum(1 for delivery in op.due_timeouts if delivery.deadline is not None)
        st._exercise("missed-timeout", len(op.due_timeouts) - extended)
        st._exercise("extended-timeout-missed", extended)
    evict_after = int(st.config["evict_after"])
    for incarnation in list(st._disconnected.values()):
        if incarnation.disconnected_at + evict_after + st.timer_slack <= st.now:  # req: KS-GEN-9
            op.due_evictions.append(incarnation)
            del st._disconnected[incarnation.number]
    st._exercise_shared("missed-eviction", len(op.due_evictions))


def on_restart(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    for incarnation in list(st.members.values()):
        if st.returns_as_failures and st.durable_attempts:
            # req: KS-RTY-7 (counts kept across the restart: a delivery it ended is a return that counts)
            for delivery in incarnation.outstanding.values():
                message = st.messages[delivery.offset]
                message.returns += 1
                message.return_seq = seq
                message.returned_delivery_seq = delivery.seq
        st._end_incarnation(incarnation, seq, returned=False)
    st.restarts += 1
    if not st.has_cursor:
        # Without a cursor the implementation keeps each message's resolution (KS-CUR-4 judged against them).
        st.persisted_cursor = st.cursor()
        st.persisted_holes = st.resolved_above_cursor()
        st.persist_seq = st.last_resolution_seq
    st.loaded = (st.persisted_cursor, BitMap(st.persisted_holes), st.persist_seq, seq)
    st.seek = None  # the restart loads a cursor at or past the last seek's target (KS-CUR-10)
    st.seek_holders = {}
    st.read_below = 0  # req: KS-GEN-8 (a restart reads again from the persisted cursor, at the next tick)
    st.flush_owed = False  # a flush owed before the crash was volatile; the reloaded cursor is the stored one
    if st.config.get("checkpoint_resume"):
        st.loaded_checkpoints = dict(st.checkpoints)
    holes = st.persisted_holes
    st.messages.restarted(len(st.messages) if st.best_effort else st.persisted_cursor)
    for message in st.messages.live_messages():
        st._reset_volatile(message)
        if message.entry is not None:  # a mate the restart may restore waits for its batch again (KS-BKT-10)
            mates = st.batches.setdefault(message.entry, [])
            if message.offset not in mates:
                insort(mates, message.offset)
        if st.best_effort:
            continue  # best-effort outcomes are final (KS-BEF-1): there is no cursor to resume from
        if message.resolved and message.offset >= st.persisted_cursor and message.offset not in holes:
            if rules.buckets.checkpointed(st, message) is not None:
                continue  # req: KS-BKT-9 (below its bucket's checkpoint: durable, like a hole)
            # req: KS-CUR-3 (resolved after the last persistence: volatile, so it must be dispatched again)
            st._exercise("restart-skip")
            message.resolved = False
            message.resolution = None
            message.resolution_seq = None
            message.restored_seq = seq
            st.unresolved.add(message.offset)
            if st.delta_log is not None:
                st.delta_log.append((seq, REOPENED, message.offset, None))
    st.state_version += 1
    st._rebuild_indexes()
    st._new_epoch("restart", None, seq)


def on_seek(st: CheckerState, event: Event) -> None:
    """A seek: every delivery ends, the members stay, the cursor becomes the target (section 14, KS-CUR-8..11)."""
    seq = int(event["seq"])
    target = int(event["offset"])
    if not 0 <= target <= len(st.messages):
        st._problem(seq, f"seek names offset {target}, past the end of the log ({len(st.messages)})")
        return
    holders: dict[int, set[str]] = {}
    for incarnation in st.members.values():
        for offset in list(incarnation.outstanding):
            holders.setdefault(offset, set()).add(incarnation.name)
            message = st.messages[offset]
            st._end_delivery(message)
            st._refresh_head(message.key)
        incarnation.outstanding.clear()
        incarnation.unacked_blocked_seq = None
    st.seek_holders = holders
    st.restarts += 1  # a zombie op names a delivery made since the last restart or seek (KS-ACK-3)
    st.seek = (target, seq)
    st.loaded = None  # what a restart loaded is superseded: the seek's target is the store's cursor now
    st.loaded_checkpoints = {}
    st.read_below = 0  # req: KS-GEN-8 (reading starts again at the target, at the next read)
    st.messages.restarted(target)
    for message in st.messages.live_messages():
        st._reset_volatile(message)
        if message.offset >= target and message.resolved:
            # req: KS-CUR-8 (resolved before the seek, at or after its target: it must be dispatched again)
            st._exercise("seek-skip")
            message.resolved = False
            message.resolution = None
            message.resolution_seq = None
            message.restored_seq = seq
            st.unresolved.add(message.offset)
            if st.delta_log is not None:
                st.delta_log.append((seq, REOPENED, message.offset, None))
        elif message.offset < target and not message.resolved:
            # req: KS-CUR-9, KS-RES-1 (given up by the seek: resolved as `seeked`, recorded by the seek event)
            message.resolved = True
            message.resolution = "seeked"
            message.resolution_seq = seq
            message.restored_seq = None
            st.unresolved.discard(message.offset)
            st.last_resolution_seq = seq
            if st.delta_log is not None:
                st.delta_log.append((seq, SEEKED, message.offset, None))
    st.state_version += 1
    disconnected = dict(st._disconnected)
    st._rebuild_indexes()
    st._disconnected = disconnected  # the members stay, and so do their eviction clocks (KS-MEM-2)
    st._new_epoch("seek", None, seq)


def on_key_released(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    state = st.keys.get(str(event["key"]))
    if state is None or not state.blocked:
        st._problem(seq, f"key {event['key']!r} was released but is not blocked")
        return
    # req: KS-POI-4 (every blocked message of the key: see the module doc)
    for offset in sorted(state.blocked):
        message = st.messages[offset]
        message.blocked = False
        message.failures = 0
        message.failure_seqs = []
        message.released_seq = seq
        message.awaiting_seq = seq
        message.last_event_seq = seq
        state.awaiting.add(offset)
    state.blocked = set()
    st._awaiting_keys.add(str(event["key"]))
    st._refresh_head(str(event["key"]))


def on_key_skipped(st: CheckerState, event: Event) -> None:
    seq = int(event["seq"])
    op = st.op
    assert op is not None
    state = st.keys.get(str(event["key"]))
    op.key = str(event["key"])
    st._exercise("skip-ignored")
    if state is None or not state.blocked:
        st._problem(seq, f"key {event['key']!r} was skipped but is not blocked")
        return
    op.skip_targets = sorted(state.blocked)


def on_segment_created(st: CheckerState, event: Event) -> None:
    number = int(event["segment"])
    predecessors = tuple(
        int(event[column]) for column in ("predecessor", "second_predecessor") if event.get(column) is not None
    )
    if predecessors:
        # A layout change re-routes keys (new N, new buckets) although membership is unchanged: for
        # KS-ASN-1 it starts a new routing epoch, as a membership change does (see the module doc).
        st._new_epoch("layout", None, int(event["seq"]))
    if st.layout_reported:
        st.created_in_op.append(number)
    st.segments[number] = Segment(
        number,
        int(event["buckets"]),
        int(event["range_lo"]),
        int(event["range_hi"]),
        predecessors,
        int(event["seq"]),
    )


def on_segment_sealed(st: CheckerState, event: Event) -> None:
    segment = st.segments.get(int(event["segment"]))
    if segment is None:
        st._problem(int(event["seq"]), f"segment {event['segment']} was sealed but never created")
        return
    segment.sealed = True
