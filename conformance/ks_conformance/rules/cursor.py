"""The rules of spec section 14 The cursor.

Long because the section has many rules (skips, regressions, early and late writes, restarts, seeks and their
stale answers) and each brings its explanation and its check; splitting it would part a rule from its section.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ks_conformance import explain
from ks_conformance.explain import Explained, message_clause, ranges_text, ticks
from ks_conformance.rules import acks, retries
from ks_conformance.rules.registry import NO_CURSOR, NO_SEEK, Scope, Stage, define, need

if TYPE_CHECKING:
    from pyroaring import BitMap

    from ks_conformance.checks.records import Message, OpState
    from ks_conformance.checks.state import CheckerState, Event

RESURRECTED = define(
    "resurrected",
    "KS-CUR-4",
    Stage.EVENT,
    Scope.KEY,
    "after a restart, a delivery of an offset below the persisted cursor or in the persisted holes",
    witness="the `cursor_persisted`, the `restart`, the delivery",
    exercised="a delivery after a restart",
    needs=lambda a: need("restart" in a.ops, "op restart"),
)


def resurrected(
    key: str, offset: int, pub: int, cursor: int, persist_seq: int | None, restart_seq: int, seq: int
) -> Explained:
    """KS-CUR-4: an offset below the persisted cursor, or else in its holes, delivered after a restart."""
    where = f"below the persisted cursor {cursor}" if offset < cursor else "a persisted ack hole"
    return (
        [message_clause(offset, key, pub), f"the store recorded cursor {cursor} at seq {persist_seq}"],
        f"after the restart [seq {restart_seq}] m{offset}, {where}, was delivered [seq {seq}], but "
        "what the store recorded is not delivered again (KS-CUR-4)",
        {"offset": offset},
    )


SEEK_RESURRECTED = define(
    "seek-resurrected",
    "KS-CUR-9",
    Stage.EVENT,
    Scope.KEY,
    (
        "after a `seek` (and before the next restart), a delivery of an offset below its target (reported "
        "instead of `duplicate` for it)"
    ),
    witness="the `seek`, the delivery",
    exercised="a delivery after a seek",
    needs=lambda a: need(a.seeking, NO_SEEK),
)


def seek_resurrected(
    key: str, offset: int, pub: int, target: int, seek_seq: int, resolution: str | None, seq: int
) -> Explained:
    """KS-CUR-9: an offset below a seek's target delivered after the seek."""
    given_up = "given up by it" if resolution == "seeked" else "resolved"
    return (
        [message_clause(offset, key, pub), f"the seek at seq {seek_seq} moved the cursor to {target}"],
        f"m{offset} lies below the target ({given_up}), yet it was delivered [seq {seq}] after the seek, but a seek "
        "gives up everything below its target (KS-CUR-9)",
        {"offset": offset},
    )


SEEK_STALE_ACK = define(
    "seek-stale-ack",
    "KS-CUR-11",
    Stage.EVENT,
    Scope.KEY,
    (
        "an `ack` or `nack` accepted from a member whose delivery of the message the last `seek` ended, while"
        " it holds no delivery of it made since (reported instead of `stale-ack-accepted` or "
        "`stale-nack-accepted`)"
    ),
    witness="the `seek`, the ack or nack",
    exercised="an ack or nack ignored from a member whose delivery the last seek ended",
    needs=lambda a: need(a.seeking, NO_SEEK) or need("ack" in a.ops, "op ack"),
)


def seek_stale_ack(key: str, offset: int, pub: int, consumer: str, seek_seq: int, what: str, seq: int) -> Explained:
    """KS-CUR-11: a result for a delivery the seek cut was accepted."""
    return (
        [
            message_clause(offset, key, pub),
            f"{consumer} held a delivery of m{offset} that the seek at seq {seek_seq} ended, and holds none since",
        ],
        f"the {what} at seq {seq} from {consumer} was accepted, but a result for a delivery made before a seek "
        "changes nothing: the replayed message waits for its new delivery's result (KS-CUR-11)",
        {"offset": offset, "consumer": consumer},
    )


CURSOR_SKIP = define(
    "cursor-skip",
    "KS-CUR-1",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    "a `cursor_persisted` above an unresolved offset, or whose holes include an unresolved offset",
    witness="the publish of the smallest such offset, the `cursor_persisted`",
    exercised="a persist while some offset is unresolved",
    needs=lambda a: need(a.cursor, NO_CURSOR),
)


def cursor_skip(key: str, offset: int, pub: int, cursor: int, passes: bool, seq: int) -> Explained:
    """KS-CUR-1 (`passes`: the cursor passes the offset; else the persisted holes include it)."""
    where = f"cursor {cursor} passes it" if passes else "the persisted holes include it"
    return (
        [message_clause(offset, key, pub) + ", unresolved"],
        f"the persisted cursor [seq {seq}]: {where}, but a persisted cursor never passes an unresolved "
        "offset (KS-CUR-1)",
        {"offset": offset, "cursor": cursor},
    )


CURSOR_REGRESS = define(
    "cursor-regress",
    "KS-CUR-2",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    "a `cursor_persisted` below the previous one",
    witness="both",
    exercised="a second persist",
    needs=lambda a: need(a.cursor, NO_CURSOR),
)


def cursor_regress(cursor: int, previous: int, previous_seq: int, seq: int) -> Explained:
    """KS-CUR-2."""
    return (
        [f"the cursor was persisted as {previous} at seq {previous_seq}"],
        f"it was persisted as {cursor} [seq {seq}], lower, but a persisted cursor never moves backwards (KS-CUR-2)",
        {"cursor": cursor, "previous": previous},
    )


PERSIST_LATE = define(
    "persist-late",
    "KS-CUR-5",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "at the end of an op, the cursor (or, with holes enabled, the set of resolved offsets above it) "
        "differs from the persisted one, which claims no unresolved offset resolved (a persist ahead, whose "
        "cursor passes an unresolved offset or whose holes include one, is `cursor-skip` only, not late), "
        "although persistence was due (`persist_interval` 0: any op; otherwise: the end of a tick at least "
        "`persist_interval` ticks after the last persistence; with `timer_slack = s` above 0: the end of a "
        "tick at least s ticks after the tick at which it first became due since the last `cursor_persisted`,"
        ' KS-GEN-9; with `persist_trigger = "advance"`: the end of an op that moved the cursor at least '
        "`persist_interval` ticks after the last persistence, or, with `persist_flush = f`, the end of a tick"
        " that is a multiple of f, or up to s ticks after it, KS-CUR-12)"
    ),
    witness="the last resolution, the op",
    exercised="an op that advanced the cursor",
    needs=lambda a: need(a.cursor, NO_CURSOR),
)


def persist_late(
    cursor: int,
    holes: Iterable[int] | None,
    persisted: int,
    persisted_holes: Iterable[int],
    interval: int,
    last_resolution_seq: int | None,
    seq: int,
    slack: int = 0,
    flush: int | None = None,
) -> Explained:
    """KS-CUR-5, or KS-CUR-12 when `flush` is given (persist_trigger = advance; `flush` is persist_flush) (`holes`: the
    resolved offsets above the cursor, None when ack holes are not persisted; `slack`: timer_slack, KS-GEN-9)."""
    what = f"the cursor is {cursor}" + (f" with holes {ranges_text(holes)}" if holes is not None else "")
    stored = f"{persisted}" + (f" with holes {ranges_text(persisted_holes)}" if holes is not None else "")
    requirement = "KS-CUR-5"
    if flush is not None:
        requirement = "KS-CUR-5, KS-CUR-12"
        rule = (
            f"with persist_trigger = advance and persist_interval = {interval} it is persisted at the end of an op "
            f"that moved it once {ticks(interval)} have passed since the last persistence"
        )
        if flush:
            rule += f", and in phase 6 of every tick that is a multiple of persist_flush = {flush}"
            if slack:
                rule += f" (or with timer_slack = {slack} at most {ticks(slack)} later, KS-GEN-9)"
    else:
        rule = (
            "with persist_interval = 0 it is persisted after every op that changed it"
            if interval == 0
            else f"with persist_interval = {interval} it is persisted in phase 6 of the first tick at which it is due"
        )
        if slack:
            rule += f", or with timer_slack = {slack} at most {ticks(slack)} later (KS-GEN-9)"
    return (
        [f"the op at seq {seq}", f"the last resolution at seq {last_resolution_seq}"],
        f"at the end of the op {what}, but the persisted cursor is {stored}; {rule} ({requirement})",
        {"cursor": cursor, "persisted": persisted},
    )


PERSIST_EARLY = define(
    "persist-early",
    "KS-CUR-7",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "with `persist_interval > 0`, a `cursor_persisted` outside a tick's phase 6, or fewer than "
        '`persist_interval` ticks after the previous one; with `persist_trigger = "advance"`, a '
        "`cursor_persisted` in an op that did not move the cursor, or fewer than `persist_interval` ticks "
        "after the previous one, unless in a tick that is a multiple of `persist_flush` or one owing its "
        "flush"
    ),
    witness="both persists",
    exercised="a persist",
    needs=lambda a: need("tick" in a.ops, "op tick") or need(a.cursor, NO_CURSOR) or a.above_zero("persist_interval"),
)


def persist_early(cursor: int, now: int, why: str, seq: int) -> Explained:
    """KS-CUR-7 (`why`: `persist_outside_tick` or `persist_too_soon`)."""
    return ([f"the cursor was persisted at tick {now} [seq {seq}]"], f"{why} (KS-CUR-7)", {"cursor": cursor})


SEEK_SKIP = define(
    "seek-skip",
    "KS-CUR-8",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "strict and owner: a message that was resolved before a `seek`, at or after its target (so unresolved"
        " again after it), and not delivered or resolved since, is left undelivered at the end of an op where"
        " `idle-while-ready` would report it, or is unresolved at a quiescent point (reported instead of "
        "`idle-while-ready`, `stuck-key` or `lost` for such a message, as `restart-skip`)"
    ),
    witness="the publish of m, the `seek`, the op",
    exercised="a seek finds a message resolved at or after its target",
    needs=lambda a: need(a.seeking, NO_SEEK),
)


def seek_skip(key: str, offset: int, pub: int, target: int, seek_seq: int, seq: int) -> Explained:
    """KS-CUR-8: a message the seek made unresolved again is not dispatched again."""
    return (
        [
            message_clause(offset, key, pub) + f", resolved before the seek, at or after its target {target}",
            f"the seek at seq {seek_seq} moved the cursor back to {target}",
        ],
        f"m{offset} was not dispatched again [seq {seq}] although nothing holds it back, but a seek replays every "
        "message at or after its target, even one already acknowledged (KS-CUR-8)",
        {"offset": offset, "key": key},
    )


SEEK_UNPERSISTED = define(
    "seek-unpersisted",
    "KS-CUR-10",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "at the end of a `seek` op, no `cursor_persisted` since the `seek` event, or the last one's cursor is"
        " below the seek's target"
    ),
    witness="the `seek`",
    exercised="a seek",
    needs=lambda a: need(a.seeking, NO_SEEK) or need(a.cursor, NO_CURSOR),
)


def seek_unpersisted(target: int, persisted: int, persist_seq: int | None, seq: int) -> Explained:
    """KS-CUR-10: at the end of a seek op the store does not hold the seek's cursor."""
    return (
        [
            f"the seek at seq {seq} moved the cursor to {target}",
            f"when the op ends the store holds cursor {persisted} (persisted at seq {persist_seq})",
        ],
        "the seek was not persisted before the op returned, but a seek is durable once it returns: a crash right "
        "after it must resume from its target (KS-CUR-10)",
        {"cursor": target},
    )


RESTART_SKIP = define(
    "restart-skip",
    "KS-CUR-3",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "strict and owner: a message that was resolved before a `restart`, at or above the persisted cursor "
        "and not a persisted hole (so unresolved again after it), and not delivered or resolved since, is "
        "left undelivered at the end of an op where `idle-while-ready` would report it, or is unresolved at a"
        " quiescent point (reported instead of `idle-while-ready`, `stuck-key` or `lost` for such a message)"
    ),
    witness="the publish of m, the last `cursor_persisted`, the `restart`, the op",
    exercised="a restart finds a message resolved at or above the persisted cursor that is not a persisted hole",
    needs=lambda a: (
        need("restart" in a.ops, "op restart")
        or need(a.cursor, "a persisted cursor (capability cursor): without one nothing is volatile")
    ),
)


def restart_skip(key: str, offset: int, pub: int, restart_seq: int | None, loaded: int, seq: int) -> Explained:
    """KS-CUR-3 (`loaded`: the cursor the restart at `restart_seq` loaded)."""
    return (
        [
            message_clause(offset, key, pub) + ", resolved before the restart, at or above the persisted cursor and "
            "not a persisted ack hole",
            f"the restart at seq {restart_seq} loaded cursor {loaded}",
        ],
        f"m{offset} was not dispatched again [seq {seq}] although nothing holds it back, but a restart "
        "resumes from the store: every offset it did not record is dispatched again (KS-CUR-3)",
        {"offset": offset, "key": key},
    )


# The checks of this section's rules: functions of the checker's state (ks_conformance.checks).


def persisted_and_unmoved(st: CheckerState, cursor_at_start: int, cursor: int) -> bool:
    """True if an op ends with the cursor where it began and where it is persisted (holes not persisted, no seek in
    play): all `check_persistence` does at such an op is to note the state in sync, which this does. A shard of keys
    judges runs of other shards' ops with it (sharding/shard.py)."""
    if st.best_effort or st.persist_holes or st.seek is not None:
        return False
    if cursor != cursor_at_start or cursor != st.persisted_cursor:
        return False
    if st.state_version != st.synced_version:
        st.synced_version = st.state_version
        st.persist_due_since = None
    return True


def check_persistence(st: CheckerState, op: OpState) -> None:
    """KS-CUR-5, KS-CUR-10, KS-CUR-12 at the end of an op: a cursor (and holes) that moved is persisted when its
    trigger says, and a seek's target at once."""
    if st.best_effort:
        return
    cursor = st.cursor()
    if persisted_and_unmoved(st, op.cursor_at_start, cursor):
        return
    if op.kind == "seek" and st.has_cursor and st.seek is not None:
        # req: KS-CUR-10
        st._exercise_shared("seek-unpersisted")
        target, seek_seq = st.seek
        if st.persist_seq is None or st.persist_seq < seek_seq or st.persisted_cursor < target:
            st.late_version = st.state_version
            st._report(
                "seek-unpersisted",
                op.seq,
                [op.seq],
                seek_unpersisted(target, st.persisted_cursor, st.persist_seq, op.seq),
            )
            return
    if cursor > op.cursor_at_start or (op.resolved and st.persist_holes):
        st._exercise_shared("persist-late")
    if st.state_version == st.synced_version:
        return
    holes = st.resolved_above_cursor() if st.persist_holes else None
    if cursor == st.persisted_cursor and (holes is None or holes == st.persisted_holes):
        st.synced_version = st.state_version
        st.persist_due_since = None
        return
    if st.persisted_cursor > cursor or st.persisted_holes.intersect(st.all_unresolved()):
        return  # ahead (a cursor or a hole past an unresolved offset), not late: cursor-skip reported it
    interval = st.persist_interval
    if st.persist_on_advance:
        due = advance_persistence_due(st, op, cursor)
    elif interval == 0:
        due = True
    else:
        due = op.kind == "tick" and (st.persist_tick is None or st.now - st.persist_tick >= interval)
    if due and st.timer_slack and not st.persist_on_advance:
        # req: KS-GEN-9 (with timer_slack = s, a persistence due at tick t may wait until phase 6 of tick t + s)
        if st.persist_due_since is None:
            st.persist_due_since = st.now
        due = op.kind == "tick" and st.now >= st.persist_due_since + st.timer_slack
    if not due or st.late_version == st.state_version:
        return
    st.late_version = st.state_version
    # req: KS-CUR-5, KS-RES-3
    st._report(
        "persist-late",
        op.seq,
        [st.last_resolution_seq, op.seq],
        persist_late(
            cursor,
            holes,
            st.persisted_cursor,
            st.persisted_holes,
            interval,
            st.last_resolution_seq,
            op.seq,
            st.timer_slack,
            st.persist_flush if st.persist_on_advance else None,
        ),
    )


def advance_persistence_due(st: CheckerState, op: OpState, cursor: int) -> bool:
    """KS-CUR-12 (persist_trigger = advance): due in an op that moved the cursor once persist_interval ticks have
    passed since the last persistence, or, with persist_flush, from a flush tick on (a timer: KS-GEN-9's slack)."""
    flush = st.persist_flush
    if flush and op.kind == "tick" and st.now % flush == 0:
        st.flush_owed = True  # req: KS-CUR-12 (the periodic flush writes what the debounce held back)
    if st.flush_owed:
        if st.persist_due_since is None:
            st.persist_due_since = st.now
        if op.kind == "tick" and st.now >= st.persist_due_since + st.timer_slack:
            return True
    moved = cursor > op.cursor_at_start
    return moved and (st.persist_tick is None or st.now - st.persist_tick >= st.persist_interval)


def report_restart_skip(st: CheckerState, message: Message, seq: int) -> None:
    """KS-CUR-3 and KS-CUR-8: a message a restart (or seek) made unresolved again was passed over."""
    if st.seek is not None and message.restored_seq == st.seek[1]:
        # req: KS-CUR-8
        st._report(
            "seek-skip",
            seq,
            [message.publish_seq, st.seek[1], seq],
            seek_skip(*message.facts, st.seek[0], st.seek[1], seq),
        )
        return
    # req: KS-CUR-3
    restart = message.restored_seq
    persisted_before = st.loaded[2] if st.loaded is not None else None
    st._report(
        "restart-skip",
        seq,
        [message.publish_seq, persisted_before, restart, seq],
        restart_skip(*message.facts, restart, st.loaded[0] if st.loaded else 0, seq),
    )


def seek_stale_answer(st: CheckerState, message: Message, name: str, what: str, seq: int) -> None:
    """KS-CUR-11: an accepted ack or nack from a member whose delivery of the message the last seek ended."""
    seek_seq = st.seek[1] if st.seek is not None else None
    # req: KS-CUR-11
    st._exercise("seek-stale-ack")
    st._report(
        "seek-stale-ack",
        seq,
        [seek_seq, seq],
        seek_stale_ack(*message.facts, name, seek_seq if seek_seq is not None else 0, what, seq),
    )


def ignored(st: CheckerState, event: Event, what: str) -> None:
    """An `ack_ignored` or `nack_ignored` (`what` = ack or nack): a current holder's answer must not be ignored
    (KS-ACK-2, KS-RTY-2); a stale one may be."""
    offset = int(event["offset"])
    seq = int(event["seq"])
    if not 0 <= offset < len(st.messages):
        st._exercise(f"stale-{what}-accepted")
        return
    message = st._message_of(event)
    if message is None or acks.zombie_answered(st, message, event, accepted=False):
        return
    incarnation = st.members.get(str(event["consumer"]))
    delivery = message.outstanding
    if delivery is not None and incarnation is not None and delivery.holder is incarnation:
        st._exercise(f"holder-{what}-ignored")
        explain_it = acks.holder_ack_ignored if what == "ack" else retries.holder_nack_ignored
        st._report(
            f"holder-{what}-ignored",
            seq,
            [delivery.seq, seq],
            explain_it(*message.facts, incarnation.name, delivery.seq, seq),
        )
    else:
        st._exercise(f"stale-{what}-accepted")
        if str(event["consumer"]) in st.seek_holders.get(message.offset, ()):
            st._exercise("seek-stale-ack")


def check_seek_resurrected(st: CheckerState, message: Message, seq: int) -> bool:
    """KS-CUR-9 at a delivery after a seek: nothing below its target is delivered again. True if it was (the
    delivery is then judged no further as a duplicate or a resurrection)."""
    if st.seek is None:
        return False
    st._exercise("seek-resurrected")
    target, seek_seq = st.seek
    if message.offset >= target:
        return False
    st._report(
        "seek-resurrected",
        seq,
        [seek_seq, seq],
        seek_resurrected(*message.facts, target, seek_seq, message.resolution, seq),
    )
    return True


def below_loaded_cursor(st: CheckerState, message: Message) -> bool:
    """After a restart: whether the message is below the persisted cursor it resumed from, or in its holes."""
    assert st.loaded is not None
    cursor, holes, _, _ = st.loaded
    return message.offset < cursor or message.offset in holes


def check_resurrected(st: CheckerState, message: Message, seq: int) -> None:
    """KS-CUR-4 at a delivery after a restart: nothing the persisted cursor (or its holes) resolved is delivered."""
    if st.loaded is None:
        return
    st._exercise("resurrected")
    cursor, _, persist_seq, restart_seq = st.loaded
    if below_loaded_cursor(st, message):
        st._report(
            "resurrected",
            seq,
            [persist_seq, restart_seq, seq],
            resurrected(*message.facts, cursor, persist_seq, restart_seq, seq),
        )


def check_cursor_skip(st: CheckerState, cursor: int, holes: BitMap, seq: int) -> None:
    """KS-CUR-1 at a `cursor_persisted`: neither the cursor nor a persisted hole passes an unresolved message."""
    if not st.any_unresolved():
        return
    st._exercise_shared("cursor-skip")
    unresolved = st.all_unresolved()
    smallest = unresolved.min()
    bad = holes & unresolved
    if cursor > smallest or bad:
        offset = smallest if cursor > smallest else bad.min()
        if not st.owns(offset):
            return  # the shard that holds the skipped message reports it
        skipped = st.messages[offset]
        st._report(
            "cursor-skip",
            seq,
            [skipped.publish_seq, seq],
            cursor_skip(*skipped.facts, cursor, cursor > smallest, seq),
        )


def check_cursor_regress(st: CheckerState, cursor: int, seeking: bool, seq: int) -> None:
    """KS-CUR-2 at a `cursor_persisted`: the persisted cursor never moves back (but to a seek's target)."""
    if st.persist_seq is None:
        return
    st._exercise_shared("cursor-regress")
    if cursor < st.persisted_cursor and not (seeking and st.seek is not None and cursor >= st.seek[0]):
        st._report(
            "cursor-regress",
            seq,
            [st.persist_seq, seq],
            cursor_regress(cursor, st.persisted_cursor, st.persist_seq, seq),
        )


def check_persist_early(st: CheckerState, cursor: int, seeking: bool, seq: int) -> None:
    """KS-CUR-7 at a `cursor_persisted`: a debounced cursor is written only when its trigger makes it due (a seek's
    own write is not debounced, KS-CUR-10)."""
    interval = int(st.config["persist_interval"])
    op = st.op
    if st.persist_on_advance and not seeking:
        # req: KS-CUR-7 (with persist_trigger = advance: only when KS-CUR-12 makes it due)
        st._exercise_shared("persist-early")
        moved = op is not None and st.cursor() > op.cursor_at_start
        elapsed = st.persist_tick is None or st.now - st.persist_tick >= interval
        flush = st.persist_flush
        flushing = bool(flush) and op is not None and op.kind == "tick" and (st.flush_owed or st.now % flush == 0)
        if not (moved and elapsed) and not flushing:
            st._report(
                "persist-early",
                seq,
                [st.persist_seq, seq],
                persist_early(cursor, st.now, explain.persist_off_schedule(interval, flush), seq),
            )
    elif interval > 0 and not seeking:
        st._exercise_shared("persist-early")
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
                persist_early(cursor, st.now, why, seq),
            )
