"""The rules of spec section 14 The cursor."""

from __future__ import annotations

from collections.abc import Iterable

from ks_conformance.explain import Explained, message_clause, ranges_text, ticks
from ks_conformance.rules.registry import NO_CURSOR, NO_SEEK, Scope, Stage, define, need

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
