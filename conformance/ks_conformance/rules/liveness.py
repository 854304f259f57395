"""The rules of spec section 19 Liveness at quiescence."""

from __future__ import annotations

from ks_conformance.explain import Explained, message_clause
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


def stuck_key(key: str, offset: int, pub: int, last_event: int, seq: int) -> Explained:
    """KS-LIV-1."""
    return (
        [message_clause(offset, key, pub), f"its last event is seq {last_event}"],
        f"m{offset} is unresolved at the quiescent point [seq {seq}], although a member accepts every "
        "key, everyone acks and time has passed (KS-LIV-1)",
        {"offset": offset, "key": key},
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


def cursor_stall(published: int, cursor: int, persist_seq: int | None, seq: int) -> Explained:
    """KS-LIV-2."""
    persisted = f" (persisted at seq {persist_seq})" if persist_seq is not None else " (never persisted)"
    return (
        [f"n = {published} messages published, all resolved"],
        f"at the quiescent point [seq {seq}] the persisted cursor is {cursor}{persisted}, not n (KS-LIV-2)",
        {"cursor": cursor, "published": published},
    )


def unwritten(a: Abilities) -> str | None:
    """With only `persist_trigger = "advance"` and no flush, an idle cursor may stay unwritten (section 21.1)."""
    if "tick" not in a.forms("persist_trigger") and not any(a.forms("persist_flush")):
        return (
            "a cursor written by a timer or a flush (the implementation declares only persist_trigger: advance without "
            "persist_flush, a departure of spec section 21.1: an idle cursor may stay unwritten)"
        )
    return None
