"""The rules of spec section 14 The cursor."""

from __future__ import annotations

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
    needs=lambda a: (
        need("tick" in a.ops, "op tick")
        or need(a.cursor, NO_CURSOR)
        or need(a.positive("persist_interval"), a.supported("persist_interval"))
    ),
)

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
