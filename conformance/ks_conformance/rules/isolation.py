"""The rules of spec section 15 Isolation and the look-ahead bound.

Its check, `check_idle`, is one pass over the keys whose head waits, at the end of every op: the exemptions it
grants come from other sections (slots, buckets, batches, parking, heartbeat reads, counted returns), and a head it
finds waiting may be another section's finding (`unfiltered-wait`, `restart-skip`, a delayed head), so it names them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ks_spec.config import lookahead_limit
from ks_spec.slots import SLOT_SELECTORS, slot_of

from ks_conformance.checks.selectors import bucket_owner
from ks_conformance.explain import Explained, message_clause
from ks_conformance.glob import accepts
from ks_conformance.rules import cursor, filters, ordering
from ks_conformance.rules.registry import Scope, Stage, define, need

if TYPE_CHECKING:
    from ks_conformance.checks.records import Incarnation, Message, OpState, Segment
    from ks_conformance.checks.state import CheckerState

IDLE_WHILE_READY = define(
    "idle-while-ready",
    "KS-ISO-1",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "strict and owner, selectors other than `pulsar-sticky`: at the end of an op, a message m among the "
        '`window` smallest unresolved offsets (with `read_bound = "lookahead"`: a message that fewer than *L* '
        "earlier waiting messages precede, KS-ISO-3; with `park_after` set, parked messages are left out of "
        'either count, KS-ISO-4; with `read_trigger = "heartbeat"`, at the end of an op other than a `tick`, '
        "only a message below the *read mark*: the first offset the read bound did not admit when the last "
        "tick ended, raised past every offset a `deliver`, `held` or `filter` names and reset to 0 by a "
        "`restart`, KS-GEN-8) is undelivered although it is the earliest unresolved message of its key, no "
        "message of its key is outstanding, retrying-and-not-ready (with `timer_slack = s`: or made ready by "
        "a phase 3 fewer than s ticks ago, KS-GEN-9) or blocked, no slot-mate explains it (with "
        '`drain_granularity = "hash"`: another key of its slot awaits redelivery, is blocked, or holds an '
        "outstanding delivery from an earlier epoch, or any outstanding delivery while members have filters, "
        "KS-DRN-3; with selector `buckets`: its bucket is withheld or has an outstanding delivery from an "
        "earlier epoch held by another consumer than the bucket's target now (by any consumer under a policy "
        "other than `sorted` or with `controller_moves`: the bucket may be moving), KS-BKT-4, an ancestor of "
        "its segment has an unresolved message of the segment's range, KS-BKT-5, or it belongs to a batch and "
        "is not the batch's first message undelivered since publication or restart, or a later undelivered "
        "message of the batch is not the earliest unresolved of its key or its key is outstanding, awaiting "
        "or blocked, KS-BKT-10: a batch's later messages go with its first, exempt from capacity and window), "
        "and every member that accepts its key (at least one) is connected and below capacity (with "
        '`flow_control = "permits"`: holds a permit; selector `any`: at least one member that accepts its key '
        "is connected and below capacity)"
    ),
    witness="the publish of m, the op",
    exercised="an op ends with an undelivered message in the window",
    needs=lambda a: need(bool(a.selectors - {"pulsar-sticky"}), "a selector other than pulsar-sticky"),
)


def idle_while_ready(
    key: str,
    offset: int,
    pub: int,
    window: int,
    able: Sequence[tuple[str, int, int]],
    some: bool,
    seq: int,
    lookahead: tuple[int, int] | None = None,
    permits: bool = False,
    parked: int | None = None,
    heartbeat: str | None = None,
) -> Explained:
    """KS-ISO-1 (`able`: (name, outstanding, capacity or permits) of the members shown; `some`: selector `any`, one
    is enough; `lookahead`: (waiting earlier messages, L) under read_bound lookahead, KS-ISO-3; `parked`: with
    park_after set, the earlier parked messages the read bound leaves out, KS-ISO-4; `heartbeat`: with read_trigger
    heartbeat, "tick" when a tick's pass had to read it, "read" when it was read before the op, KS-GEN-8)."""
    if permits:
        names = ", ".join(f"{name} ({left} permits)" for name, _, left in able)
    else:
        names = ", ".join(f"{name} ({held}/{capacity})" for name, held, capacity in able)
    who = "some members that accept it are" if some else "the members that accept it are"
    if lookahead is None:
        within = f"within the window of {window}"
    else:
        waiting, limit = lookahead
        within = f"with {waiting} earlier messages waiting, fewer than the look-ahead limit of {limit}"
    if parked is not None:
        within += f" ({parked} earlier parked messages left out, KS-ISO-4)"
    if heartbeat == "tick":
        within += ", which a tick's dispatch pass reads under read_trigger heartbeat (KS-GEN-8)"
    elif heartbeat == "read":
        within += ", read before this op (read_trigger heartbeat, KS-GEN-8)"
    room = "holding a permit" if permits else "below capacity"
    return (
        [
            message_clause(offset, key, pub) + f", the earliest unresolved message of its key, {within}",
            f"no message of {key!r} is outstanding, retrying or blocked",
            f"{who} connected and {room}: {names}",
        ],
        f"the op at seq {seq} ended with m{offset} undelivered, but no rule allows holding it: a stuck key "
        "blocks only itself (KS-ISO-1)",
        {"offset": offset, "key": key},
    )


def check_idle(st: CheckerState, op: OpState) -> None:
    if st.idle_unjudged or not st._idle_heads:
        return
    window = st.window
    within = read_bound(st)
    in_window = (key for key in st._idle_heads if within(st._key(key).unresolved.first() or 0) is not None)
    if next(in_window, None) is None:
        return
    # req: KS-ISO-2 (the window's messages are the `window` smallest unresolved offsets), KS-ISO-3
    st._exercise_shared("idle-while-ready")
    if any(m.filters for m in st.members.values()):
        st._exercise_shared("unfiltered-wait")
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
                filters.report_unfiltered(st, message, op)
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
            cursor.report_restart_skip(st, message, op.seq)
            continue
        if delayed_before is not None or message.deliver_at is not None:
            ordering.report_delay_wait(st, message, delayed_before, op.seq)
            continue
        # req: KS-ISO-1, KS-GEN-6, KS-ISO-2
        shown = [(m.name, st.holding(m), m.capacity if m.permits is None else m.permits) for m in able or eligible]
        lookahead = (waiting, lookahead_of(st)) if st.lookahead else None
        parked = st._parked_below(head) if st.park_after else None
        heartbeat = ("tick" if op.kind == "tick" else "read") if st.heartbeat_reads else None
        st._report(
            "idle-while-ready",
            op.seq,
            [message.publish_seq, op.seq],
            idle_while_ready(
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


def has_room(st: CheckerState, member: Incarnation) -> bool:
    """Connected, and below capacity or (`flow_control = "permits"`) holding a permit (KS-FLW-1, KS-FLW-4)."""
    if not member.connected or member.unacked_blocked_seq is not None:
        return False  # req: KS-FLW-1 (with max_unacked, blocked until half of the limit is acked)
    return st.holding(member) < member.capacity if member.permits is None else member.permits > 0


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
            below = st.unresolved_rank(offset) - st._parked_below(offset)  # req: KS-ISO-4
            return below if below <= window else None

        return in_window
    limit = lookahead_of(st)
    outstanding = st.outstanding_offsets()

    def in_lookahead(offset: int) -> int | None:
        unresolved_before = st.unresolved_rank(offset) - (1 if st.is_unresolved(offset) else 0)
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
    segment = st.segments.get(message.segment)
    if segment is None:
        return True
    holders = [d.holder.name for d in st.bucket_outstanding.get(bucket, {}).values() if d.epoch < st.epoch]
    if holders and moving(st, message.bucket, segment, holders):
        return True
    for _, earlier in st.ancestors_unresolved(segment):
        if earlier.hash is None or segment.lo <= earlier.hash >> 16 <= segment.hi:
            return True
    return batch_explains(st, message)


def moving(st: CheckerState, bucket: int, segment: Segment, holders: list[str]) -> bool:
    """Whether a bucket whose earlier epoch's deliveries these consumers still hold may be moving to another target
    (KS-BKT-4 withholds only a moving bucket): under `sorted`, when one of them is not its owner now; under a policy
    the checker cannot predict (or with `controller_moves`), whenever they hold any."""
    if st.config["bucket_assignment"] != "sorted" or st.controller_moves or not st.members:
        return True
    owner = bucket_owner(bucket, segment.buckets, sorted(st.members), segment.number)
    return any(holder != owner for holder in holders)


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
