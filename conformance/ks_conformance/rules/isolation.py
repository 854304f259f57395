"""The rules of spec section 15 Isolation and the look-ahead bound."""

from __future__ import annotations

from collections.abc import Sequence

from ks_conformance.explain import Explained, message_clause
from ks_conformance.rules.registry import Scope, Stage, define, need

IDLE_WHILE_READY = define(
    "idle-while-ready",
    "KS-ISO-1",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "strict and owner, selectors other than `pulsar-sticky`: at the end of an op, a message m among the "
        '`window` smallest unresolved offsets (with `read_bound = "lookahead"`: a message that fewer than *L*'
        " earlier waiting messages precede, KS-ISO-3; with `park_after` set, parked messages are left out of "
        'either count, KS-ISO-4; with `read_trigger = "heartbeat"`, at the end of an op other than a `tick`, '
        "only a message below the *read mark*: the first offset the read bound did not admit when the last "
        "tick ended, raised past every offset a `deliver`, `held` or `filter` names and reset to 0 by a "
        "`restart`, KS-GEN-8) is undelivered although it is the earliest unresolved message of its key, no "
        "message of its key is outstanding, retrying-and-not-ready (with `timer_slack = s`: or made ready by "
        "a phase 3 fewer than s ticks ago, KS-GEN-9) or blocked, no slot-mate explains it (with "
        '`drain_granularity = "hash"`: another key of its slot awaits redelivery, is blocked, or holds an '
        "outstanding delivery from an earlier epoch, or any outstanding delivery while members have filters, "
        "KS-DRN-3; with selector `buckets`: its bucket is withheld or has an outstanding delivery from an "
        "earlier epoch, KS-BKT-4, an ancestor of its segment has an unresolved message of the segment's "
        "range, KS-BKT-5, or it belongs to a batch and is not the batch's first message undelivered since "
        "publication or restart, or a later undelivered message of the batch is not the earliest unresolved "
        "of its key or its key is outstanding, awaiting or blocked, KS-BKT-10: a batch's later messages go "
        "with its first, exempt from capacity and window), and every member that accepts its key (at least "
        'one) is connected and below capacity (with `flow_control = "permits"`: holds a permit; selector '
        "`any`: at least one member that accepts its key is connected and below capacity)"
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
