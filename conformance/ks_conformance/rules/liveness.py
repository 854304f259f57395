"""The rules of spec section 19 Liveness at quiescence."""

from __future__ import annotations

from ks_conformance.rules.registry import NO_CURSOR, Abilities, Scope, Stage, define, need

STUCK_KEY = define(
    "stuck-key",
    "KS-LIV-1",
    Stage.QUIESCENT,
    Scope.KEY,
    "any other unresolved message",
    witness="the publish, its last event, the `quiescent`",
    exercised="a quiescent point with messages published",
)

CURSOR_STALL = define(
    "cursor-stall",
    "KS-LIV-2",
    Stage.QUIESCENT,
    Scope.SUBSCRIPTION,
    "every message is resolved but the persisted cursor is not the number of published messages",
    witness="the last `cursor_persisted`, the `quiescent`",
    exercised="a quiescent point",
    needs=lambda a: unwritten(a) or need(a.cursor, NO_CURSOR),
)


def unwritten(a: Abilities) -> str | None:
    """With only `persist_trigger = "advance"` and no flush, an idle cursor may stay unwritten (section 21.1)."""
    if "tick" not in a.forms("persist_trigger") and not any(a.forms("persist_flush")):
        return (
            "a cursor written by a timer or a flush (the implementation declares only persist_trigger: advance without "
            "persist_flush, a departure of spec section 21.1: an idle cursor may stay unwritten)"
        )
    return None
