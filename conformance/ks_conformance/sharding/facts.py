"""The facts that span keys, for judging a trace in shards of keys: the subscription's ledger.

A shard judges its keys' events only, but some rules read what every key contributes to: how many deliveries a
consumer holds (KS-FLW-1), which offsets are unresolved (the window, KS-FLW-2, and the cursor, KS-CUR-1), how many
messages were published, with `park_after` set which are parked (left out of the window, KS-ISO-4: the ledger keeps
parking with the checker's own code, checks/parking.py). A quick pass over a few columns of each shard's rows
(`ledger_changes`, in the shard's worker) predicts, event by event, that shard's changes to those facts; each shard
applies the other shards' predicted changes as it goes (shard.py). The pass is a prediction, not a second checker:
every shard logs the changes its own checker really made (`delta_log` of checks/state.py) and the judgment stands
only if each shard's log equals its prediction. As every change belongs to one key, the shards together prove every
change, so each shard read exactly the facts the whole-trace checker reads; when a prediction fails, the caller
judges the trace in one process.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS
from pyroaring import BitMap

from ks_conformance.checks.changes import (
    DELAYED,
    DELIVERED,
    DELIVERY_ENDED,
    PHANTOM,
    PUBLISHED,
    REOPENED,
    RESOLVED,
    SEEKED,
    SHOWN,
)
from ks_conformance.checks.parking import Parking
from ks_conformance.checks.state import DANUBE_PHASE_3

Change = tuple[int, int, int, str | None]
"""(seq, what, offset, consumer): `what` is one of the changes of checks/changes.py (PUBLISHED, DELIVERED, ...) or
NOTHING."""
NOTHING = -1
"""A change that changes nothing: a chunk of changes streamed from other tasks begins with one at its first seq, so a
shard that looks for the next change never reads further than the next chunk (validate-replay's windows)."""

RESOLVING = frozenset({"ack", "drop", "dead_letter", "filter", "outcome"})
"""Effects that resolve their message (and end its delivery), as `resolve` in rules/resolutions.py does (an
implementation-defined outcome too, declared or not: checks/resolution.py `on_outcome`)."""
UNSHARDED = "selector buckets"
"""How a reason a well-formed trace is judged in one process begins (what the shards do not cover yet)."""
UNPUBLISHED_ANSWER = "an ignored ack or nack names an offset not published yet"
"""The other such reason: `ack_ignored` or `nack_ignored` of an unknown offset (legal) names no key and no message to
route it by."""


def unsharded_config(config: Mapping[str, Any]) -> str | None:
    """Why a configuration is not yet judged in shards (its rules read facts the ledger does not keep), or None."""
    full = {**CONFIG_DEFAULTS, **config}
    if full["selector"] == "buckets" and full["checkpoint_resume"]:
        return f"{UNSHARDED} with checkpoint_resume (a restart resumes each bucket from its checkpoint)"
    return None


Row = tuple[str, int, int | None, str | None, bool, "Persisted | None", str | None]
"""(event kind, seq, offset, consumer, whether a publish is delayed, what a `cursor_persisted` persisted, key) of one
trace row: what the ledger pass reads."""
Persisted = tuple[int, list[list[int]] | None]
"""A `cursor_persisted`'s cursor and hole ranges."""


def rows_of(events: Iterable[Mapping[str, Any]]) -> Iterator[Row]:
    """The ledger pass's columns of event dicts."""
    for event in events:
        offset, consumer = event.get("offset"), event.get("consumer")
        delayed = event.get("deliver_at") is not None
        cursor = event.get("cursor")
        persisted = None if cursor is None else (int(cursor), event.get("ranges"))
        yield (
            str(event["event"]),
            int(event["seq"]),
            None if offset is None else int(offset),
            consumer,
            delayed,
            persisted,
            event.get("key"),
        )


@dataclass
class Prediction:
    """The ledger pass's result: every change, in order, or why the trace is not judged in shards."""

    changes: list[Change]
    reason: str | None = None


FLUSH = "ks:flush"
"""The kind of a row that is no event: at it, `ledger_stream` pauses, so its caller can send on the changes so far."""
FLUSH_ROW: Row = (FLUSH, -1, None, None, False, None, None)


def ledger_changes(rows: Iterable[Row], config_detail: str | None) -> Prediction:
    """Predict, row by row, the changes a whole-trace checker makes to the facts that span keys (`ledger_stream`,
    run to its end)."""
    outcome: list[Prediction] = []
    for _ in pauses(ledger_stream(rows, config_detail, []), outcome):
        pass
    return outcome[0]


def pauses(stream: Generator[None, None, Prediction], outcome: list[Prediction]) -> Iterator[None]:
    """Each pause of a `ledger_stream` (its FLUSH rows), for the caller to act at; its prediction appended to
    `outcome` at the end."""
    outcome.append((yield from stream))


def ledger_stream(
    rows: Iterable[Row], config_detail: str | None, changes: list[Change]
) -> Generator[None, None, Prediction]:
    """Predict, row by row, the changes a whole-trace checker makes to the facts that span keys, appending them to
    `changes`; pause at each FLUSH row (the caller may take the changes so far out of the list); return them all.

    The prediction follows the checker's transitions for a well-formed trace of a configuration `unsharded_config`
    accepts; where it is wrong (a malformed or unusual trace) the shards' proof fails and the trace is judged whole.
    """
    try:
        detail = json.loads(config_detail or "")
        config = detail["config"]
    except (ValueError, KeyError, TypeError):
        return Prediction([], "the config event cannot be read")
    why = unsharded_config(config) if isinstance(config, dict) else "the config event cannot be read"
    if why:
        return Prediction([], why)
    heartbeat = {**CONFIG_DEFAULTS, **config}["read_trigger"] == "heartbeat"
    best_effort = {**CONFIG_DEFAULTS, **config}["profile"] == "best-effort"
    delivered: set[int] = set()
    """Best effort: the offsets a delivery resolved (a later outcome neither ends nor resolves anything, KS-BEF-1)."""
    declared = detail.get("declared", {}) if isinstance(detail, dict) else {}
    without_cursor = isinstance(declared, dict) and declared.get("cursor", True) is False
    published = BitMap()
    """This shard's offsets (a few bits each: the ledger's memory stays flat in the trace's length)."""
    last_published = -1
    cursor, holes = 0, BitMap()
    """The persisted cursor and holes (a restart resumes from them)."""
    # Written for speed (one pass over a shard's rows): the ledger's state in local names, the common kinds first.
    holder_of: dict[int, str] = {}
    held: dict[str, dict[int, int]] = {}
    unresolved: set[int] = set()
    add = changes.append
    members: dict[str, None] = {}
    """The members, in the order they joined (the order a restart or seek ends their deliveries in)."""
    park_after = int({**CONFIG_DEFAULTS, **config}.get("park_after") or 0)
    parking = Parking(park_after, changes) if park_after > 0 else None
    """With `park_after` set, the parked offsets of this shard's keys, kept as the checker keeps them (KS-ISO-4)."""
    key_ids = array("I")
    """With `park_after` set, the key of each of this shard's offsets, in the order published: its index in
    `key_names` (four bytes a message)."""
    key_names: list[str] = []
    key_index: dict[str, int] = {}

    def key_of(offset: int) -> str | None:
        """The key of one of this shard's offsets (with `park_after` set), or None."""
        return key_names[key_ids[published.rank(offset) - 1]] if offset in published else None

    def ended(seq: int, offset: int) -> None:
        """A delivery ended: its message may be parked again (with `park_after` set)."""
        if parking is not None:
            key = key_of(offset)
            if key is not None:
                parking.ended(key, offset, seq)

    for kind, seq, offset, consumer, delayed, persisted, key in rows:
        if offset is None:
            if kind == "consumer_added":
                members[str(consumer)] = None
            elif kind == "consumer_removed" or kind == "consumer_evicted":
                members.pop(str(consumer), None)
                for offset_ended in list(held.pop(str(consumer), {})):
                    add((seq, DELIVERY_ENDED, offset_ended, str(consumer)))
                    del holder_of[offset_ended]
                    ended(seq, offset_ended)
            elif kind == "cursor_persisted" and persisted is not None:
                cursor, holes = persisted[0], BitMap()
                for low, high in persisted[1] or ():
                    holes.add_range(int(low), int(high) + 1)
            elif kind == "restart":
                end_every_delivery(seq, members, held, holder_of, add, ended)
                holder_of.clear()  # (a non-member's deliveries: the checker forgets them, logging nothing)
                members.clear()  # (a restart ends every member: a delivery to one of them before it rejoins is a
                # non-member's, kept apart as the checker keeps it)
                for reopened in () if without_cursor or best_effort else published:  # req: KS-CUR-3 (after the last
                    # persistence; best-effort outcomes are final, KS-BEF-1)
                    if reopened >= cursor and reopened not in unresolved and reopened not in holes:
                        add((seq, REOPENED, reopened, None))
                        unresolved.add(reopened)
                if parking is not None:
                    parking.rebuild(by_key(unresolved, key_of), seq)
            elif kind == FLUSH:
                yield
            continue
        if kind == "publish":
            if offset <= last_published:  # (the checker finds a problem there: the trace is judged whole)
                return Prediction([], f"seq {seq}: publish of offset {offset} after offset {last_published}")
            add((seq, PUBLISHED, offset, None))
            unresolved.add(offset)
            published.add(offset)
            last_published = offset
            if delayed:
                add((seq, DELAYED, offset, None))
            if parking is not None:
                name = str(key)
                if name not in key_index:
                    key_index[name] = len(key_names)
                    key_names.append(name)
                key_ids.append(key_index[name])
                parking.published(name, offset, seq)
            continue
        if kind == "seek":
            end_every_delivery(seq, members, held, holder_of, add, ended)
            holder_of.clear()  # (a non-member's deliveries: the checker forgets them, logging nothing)
            for moved in published:  # req: KS-CUR-8, KS-CUR-9
                if moved >= offset and moved not in unresolved:
                    add((seq, REOPENED, moved, None))
                    unresolved.add(moved)
                elif moved < offset and moved in unresolved:
                    add((seq, SEEKED, moved, None))
                    unresolved.discard(moved)
            if parking is not None:
                parking.rebuild(by_key(unresolved, key_of), seq)
            continue
        if kind == "deliver":
            holder = holder_of.get(offset)
            if holder is not None:
                add((seq, DELIVERY_ENDED, offset, holder))
                del held[holder][offset]
                if parking is not None:
                    ended(seq, offset)
            if consumer not in members:  # (kept apart from a member's of the same name, as the checker does)
                consumer = PHANTOM + str(consumer)
            add((seq, DELIVERED, offset, consumer))
            holder_of[offset] = consumer
            mine = held.get(consumer)
            if mine is None:
                mine = held[consumer] = {}
            mine[offset] = seq
            if parking is not None:
                parking.delivered(offset, seq)
            if best_effort and offset in unresolved:  # req: KS-BEF-1 (delivered is its outcome)
                add((seq, RESOLVED, offset, None))
                unresolved.discard(offset)
                delivered.add(offset)
            continue
        if heartbeat and kind in DANUBE_PHASE_3:
            add((seq, SHOWN, offset, None))  # (before its resolution: the checker reads it first, KS-GEN-8)
        resolving = kind in RESOLVING
        if best_effort and ((offset in delivered and resolving) or kind == "ack"):
            holder = holder_of.get(offset)
            if kind == "ack" and holder is not None and holder in (consumer, PHANTOM + str(consumer)):
                add((seq, DELIVERY_ENDED, offset, holder))
                del holder_of[offset]
                del held[holder][offset]
            continue
        if resolving or kind == "nack" or kind == "timeout":
            holder = holder_of.get(offset)
            if holder is not None and (kind != "timeout" or holder in (consumer, PHANTOM + str(consumer))):
                add((seq, DELIVERY_ENDED, offset, holder))
                del holder_of[offset]
                del held[holder][offset]
                if parking is not None:
                    ended(seq, offset)
            if resolving and offset in unresolved:
                add((seq, RESOLVED, offset, None))
                unresolved.discard(offset)
                if parking is not None:
                    resolved_key = key_of(offset)
                    if resolved_key is not None:
                        parking.resolved(resolved_key, offset, seq)
    return Prediction(changes)


def end_every_delivery(
    seq: int,
    members: Mapping[str, None],
    held: dict[str, dict[int, int]],
    holder_of: dict[int, str],
    add: Callable[[Change], None],
    ended: Callable[[int, int], None],
) -> None:
    """A restart's or seek's end of every outstanding delivery, member by member in the order they joined (`ended`
    told of each)."""
    for name in members:
        for offset in list(held.pop(name, {})):
            add((seq, DELIVERY_ENDED, offset, name))
            del holder_of[offset]
            ended(seq, offset)


def by_key(offsets: Iterable[int], key_of: Callable[[int], str | None]) -> dict[str, list[int]]:
    """The offsets grouped by key, each key's ascending."""
    grouped: dict[str, list[int]] = {}
    for offset in sorted(offsets):
        grouped.setdefault(str(key_of(offset)), []).append(offset)
    return grouped
