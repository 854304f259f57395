"""Fault injection: turn a correct trace into one that shows a given anomaly, keeping it well formed.

Each injector takes a trace (a list of events, as the reference wrote it) and returns a mutated copy
whose events are renumbered (dense `seq`, `tick` advanced only by `tick` events), or None when the
trace offers no place for that fault. The injectors aim at one anomaly kind; a mutation may cause
others as well, which is fine: the differential tests require that both checkers report the same.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
Injector = Callable[[list[Event]], list[Event] | None]


def renumber(events: list[Event]) -> list[Event]:
    """Dense seqs from 0; each event's tick is the number of tick events up to it."""
    tick = 0
    fixed = []
    for seq, event in enumerate(events):
        event = dict(event)
        if event["event"] == "tick":
            tick += 1
        event["seq"] = seq
        event["tick"] = tick
        fixed.append(event)
    return fixed


def _keys(events: list[Event]) -> dict[int, str]:
    return {e["offset"]: e["key"] for e in events if e["event"] == "publish"}


def _first_delivery(events: list[Event]) -> dict[int, int]:
    """Offset -> index of its first deliver event."""
    found: dict[int, int] = {}
    for index, event in enumerate(events):
        if event["event"] == "deliver":
            found.setdefault(event["offset"], index)
    return found


def _move(events: list[Event], source: int, target: int) -> list[Event]:
    """Move the event at `source` to just before the event now at `target` (target < source)."""
    moved = list(events)
    event = moved.pop(source)
    moved.insert(target, event)
    return renumber(moved)


def _publish_index(events: list[Event]) -> dict[int, int]:
    return {e["offset"]: i for i, e in enumerate(events) if e["event"] == "publish"}


def deliver_before_earlier(events: list[Event]) -> list[Event] | None:
    """key-reorder (and overtaken-hold when the earlier one was held): a first delivery moved before an
    earlier message of its key was ever delivered."""
    keys, first, published = _keys(events), _first_delivery(events), _publish_index(events)
    previous: dict[str, int] = {}
    for offset in sorted(keys):
        key = keys[offset]
        earlier = previous.get(key)
        previous[key] = offset
        if earlier is None or offset not in first or earlier not in first:
            continue
        if first[earlier] > published[offset] and first[offset] > first[earlier]:
            return _move(events, first[offset], published[offset] + 1)
    return None


def deliver_before_held(events: list[Event]) -> list[Event] | None:
    """overtaken-hold: as deliver_before_earlier, choosing an earlier message that was held."""
    keys, first, published = _keys(events), _first_delivery(events), _publish_index(events)
    held = {e["offset"]: i for i, e in enumerate(events) if e["event"] == "held"}
    by_key: dict[str, list[int]] = {}
    for offset in sorted(keys):
        by_key.setdefault(keys[offset], []).append(offset)
    for offsets in by_key.values():
        for earlier, later in itertools.pairwise(offsets):
            if earlier in held and later in first and earlier in first:
                start = max(held[earlier], published[later]) + 1
                if first[earlier] > start and first[later] > start:
                    return _move(events, first[later], start)
    return None


def deliver_while_earlier_unresolved(events: list[Event]) -> list[Event] | None:
    """strict-overlap: a delivery moved before the resolution of the previous message of its key."""
    keys, first, published = _keys(events), _first_delivery(events), _publish_index(events)
    resolved = {}
    for index, event in enumerate(events):
        if event["event"] in ("ack", "drop", "dead_letter", "filter"):
            resolved.setdefault(event["offset"], index)
    previous: dict[str, int] = {}
    for offset in sorted(keys):
        key = keys[offset]
        earlier = previous.get(key)
        previous[key] = offset
        if earlier is None or offset not in first or earlier not in resolved or earlier not in first:
            continue
        spot = resolved[earlier]
        if published[offset] < spot and first[earlier] < spot < first[offset]:
            return _move(events, first[offset], spot)
    return None


def deliver_before_retry(events: list[Event]) -> list[Event] | None:
    """retry-overtaken: a later message's delivery moved between an earlier message's failure and its retry."""
    keys, first, published = _keys(events), _first_delivery(events), _publish_index(events)
    for index, event in enumerate(events):
        if event["event"] not in ("nack", "timeout"):
            continue
        failed = event["offset"]
        retry = next(
            (
                i
                for i in range(index + 1, len(events))
                if events[i]["event"] == "deliver" and events[i]["offset"] == failed
            ),
            None,
        )
        if retry is None:
            continue
        for offset in sorted(keys):
            if offset > failed and keys[offset] == keys[failed] and offset in first and first[offset] > retry:
                if published[offset] < index:
                    return _move(events, first[offset], index + 1)
    return None


def reroute_delivery(events: list[Event]) -> list[Event] | None:
    """key-moved, split-owner and stale-ack-accepted: one delivery sent to another member."""
    members: set[str] = set()
    for index, event in enumerate(events):
        kind = event["event"]
        if kind == "consumer_added":
            members.add(event["consumer"])
        elif kind in ("consumer_removed", "consumer_evicted"):
            members.discard(event["consumer"])
        elif kind == "restart":
            members.clear()
        elif kind == "deliver" and index > len(events) // 3:
            others = sorted(members - {event["consumer"]})
            if others:
                mutated = copy.deepcopy(events)
                mutated[index]["consumer"] = others[0]
                return renumber(mutated)
    return None


def reroute_while_held(events: list[Event]) -> list[Event] | None:
    """split-owner: the last delivery of a key whose holder still holds an earlier message of it goes elsewhere."""
    members: set[str] = set()
    held: dict[int, tuple[str, str]] = {}  # offset -> (key, holder), outstanding since the last membership change
    chosen: tuple[int, str] | None = None
    for index, event in enumerate(events):
        kind = event["event"]
        if kind in ("consumer_added", "consumer_removed", "consumer_evicted", "consumer_disconnected", "restart"):
            held.clear()  # keep clear of returns and draining: only plain holds count
            if kind == "consumer_added":
                members.add(event["consumer"])
            elif kind == "restart":
                members.clear()
            else:
                members.discard(event["consumer"])
        elif kind == "deliver":
            holder, key = event["consumer"], event["key"]
            others = sorted(members - {holder})
            if others and any(k == key and c == holder for o, (k, c) in held.items() if o != event["offset"]):
                chosen = (index, others[0])
            held[event["offset"]] = (key, holder)
        elif event.get("offset") is not None and kind != "publish":
            held.pop(event["offset"], None)
    if chosen is None:
        return None
    mutated = copy.deepcopy(events)
    mutated[chosen[0]]["consumer"] = chosen[1]
    return renumber(mutated)


def duplicate_delivery(events: list[Event]) -> list[Event] | None:
    """duplicate: a delivery sent twice."""
    for index, event in enumerate(events):
        if event["event"] == "deliver" and index > len(events) // 2:
            return renumber([*events[: index + 1], dict(event), *events[index + 1 :]])
    return None


def shrink_capacity(events: list[Event]) -> list[Event] | None:
    """capacity-overrun: every consumer joins with capacity 1."""
    if not any(e["event"] == "consumer_added" for e in events):
        return None
    mutated = copy.deepcopy(events)
    for event in mutated:
        if event["event"] == "consumer_added":
            event["capacity"] = 1
    return mutated


def shrink_window(events: list[Event]) -> list[Event] | None:
    """window-overrun: the configuration claims a window of 2."""
    mutated = copy.deepcopy(events)
    detail = json.loads(mutated[0]["detail"])
    detail["config"]["window"] = 2
    mutated[0]["detail"] = json.dumps(detail)
    return mutated


def persist_ahead(events: list[Event]) -> list[Event] | None:
    """cursor-skip: a persisted cursor two beyond where it should be."""
    persists = [i for i, e in enumerate(events) if e["event"] == "cursor_persisted"]
    if len(persists) < 3:
        return None
    mutated = copy.deepcopy(events)
    mutated[persists[len(persists) // 2]]["cursor"] += 2
    return mutated


def persist_unresolved_hole(events: list[Event]) -> list[Event] | None:
    """cursor-skip through the holes: a persisted hole that is still unresolved."""
    unresolved: set[int] = set()
    for index, event in enumerate(events):
        kind = event["event"]
        if kind == "publish":
            unresolved.add(event["offset"])
        elif kind in ("ack", "drop", "dead_letter", "filter"):
            unresolved.discard(event["offset"])
        elif kind == "cursor_persisted" and event.get("ranges") is not None and index > len(events) // 3:
            above = sorted(o for o in unresolved if o > event["cursor"])
            if above:
                mutated = copy.deepcopy(events)
                mutated[index]["ranges"] = sorted([*mutated[index]["ranges"], [above[0], above[0]]])
                return mutated
    return None


def persist_behind(events: list[Event]) -> list[Event] | None:
    """cursor-regress: a persisted cursor below the one before it."""
    persists = [i for i, e in enumerate(events) if e["event"] == "cursor_persisted" and e["cursor"] > 0]
    if len(persists) < 3:
        return None
    mutated = copy.deepcopy(events)
    mutated[persists[-2]]["cursor"] = 0
    return mutated


def _drop_message_after(events: list[Event], offset: int, after: int) -> list[Event]:
    """Remove every event naming `offset` after index `after` (and the persists, now out of date)."""
    kept = [
        e
        for i, e in enumerate(events)
        if i <= after or (e.get("offset") != offset and e["event"] != "cursor_persisted")
    ]
    return renumber(kept)


def lose_returned_message(events: list[Event]) -> list[Event] | None:
    """lost: a message returned by a leaving consumer is never delivered again."""
    holding: dict[str, set[int]] = {}
    for index, event in enumerate(events):
        kind = event["event"]
        if kind == "deliver":
            for held in holding.values():
                held.discard(event["offset"])
            holding.setdefault(event["consumer"], set()).add(event["offset"])
        elif kind in ("ack", "nack", "timeout", "drop", "dead_letter"):
            for held in holding.values():
                held.discard(event["offset"])
        elif kind in ("consumer_removed", "consumer_evicted"):
            returned = holding.pop(event["consumer"], set())
            if returned:
                return _drop_message_after(events, min(returned), index)
        elif kind == "restart":
            holding.clear()
    return None


def leave_drain_stuck(events: list[Event]) -> list[Event] | None:
    """drain-stuck: a message held for draining is never delivered."""
    for index, event in enumerate(events):
        if event["event"] == "held" and event.get("reason") == "draining":
            return _drop_message_after(events, event["offset"], index)
    return None


def leave_unacked(events: list[Event]) -> list[Event] | None:
    """stuck-key: a delivered message is never acked."""
    for index, event in enumerate(events):
        if event["event"] == "deliver" and index > len(events) // 2:
            return _drop_message_after(events, event["offset"], index)
    return None


def forget_last_persist(events: list[Event]) -> list[Event] | None:
    """cursor-stall: everything resolved, but the final cursor is never persisted."""
    persists = [i for i, e in enumerate(events) if e["event"] == "cursor_persisted"]
    if not persists or not any(e["event"] == "quiescent" for e in events):
        return None
    last = persists[-1]
    return renumber([e for i, e in enumerate(events) if i != last])


INJECTIONS: dict[str, tuple[str, Injector]] = {
    "key-reorder": ("steady", deliver_before_earlier),
    "overtaken-hold": ("hot-key-slow-consumer", deliver_before_held),
    "strict-overlap": ("steady", deliver_while_earlier_unresolved),
    "retry-overtaken": ("poison-drop", deliver_before_retry),
    "split-owner": ("churn", reroute_while_held),
    "key-moved": ("steady", reroute_delivery),
    "stale-ack-accepted": ("churn", reroute_delivery),
    "duplicate": ("steady", duplicate_delivery),
    "capacity-overrun": ("churn", shrink_capacity),
    "window-overrun": ("steady", shrink_window),
    "cursor-skip": ("steady", persist_ahead),
    "cursor-skip/holes": ("crash-restart", persist_unresolved_hole),
    "cursor-regress": ("crash-restart", persist_behind),
    "lost": ("churn", lose_returned_message),
    "drain-stuck": ("churn", leave_drain_stuck),
    "stuck-key": ("steady", leave_unacked),
    "cursor-stall": ("steady", forget_last_persist),
}
"""Per anomaly kind (a suffix after / names a variant): the reference workload to start from and the fault."""


COMBINED: dict[str, tuple[str, tuple[str, ...]]] = {
    "steady": (
        "steady",
        ("key-reorder", "strict-overlap", "key-moved", "duplicate", "cursor-skip", "cursor-stall"),
    ),
    "churn": ("churn", ("split-owner", "stale-ack-accepted", "lost", "drain-stuck", "capacity-overrun")),
    "hot-key": ("hot-key-slow-consumer", ("overtaken-hold", "window-overrun")),
    "poison": ("poison-drop", ("retry-overtaken", "stuck-key")),
    "crash": ("crash-restart", ("cursor-skip/holes", "cursor-regress")),
}
"""Several faults in one trace (fewer Spark jobs in the default suite): name -> (workload, injections in order)."""


def accept_no_key(events: list[Event]) -> list[Event] | None:
    """filter-violation: the first consumer sent a message joins with a filter that accepts no key of the trace."""
    keys = set(_keys(events).values())
    receiver = next((e["consumer"] for e in events if e["event"] == "deliver"), None)
    if receiver is None:
        return None
    pattern = next(f"no-such-key-{n}" for n in itertools.count() if f"no-such-key-{n}" not in keys)
    return [
        {**e, "filters": [pattern]} if e["event"] == "consumer_added" and e["consumer"] == receiver else e
        for e in events
    ]


def persist_before_delivery(events: list[Event]) -> list[Event] | None:
    """phase-order: in a tick op, a cursor_persisted (phase 6) moved before the op's first delivery (phase 5)."""
    from ks_conformance.checker import ACK_CLASS
    from ks_spec.trace import OP_EVENTS

    first_delivery: int | None = None
    in_tick = False
    for index, event in enumerate(events):
        kind = event["event"]
        if kind in OP_EVENTS or kind in ACK_CLASS:
            in_tick, first_delivery = kind == "tick", None
        elif in_tick and kind == "deliver" and first_delivery is None:
            first_delivery = index
        elif in_tick and kind == "cursor_persisted" and first_delivery is not None:
            return _move(events, index, first_delivery)
    return None


INJECTIONS["filter-violation"] = ("steady", accept_no_key)
INJECTIONS["phase-order"] = ("poison-drop", persist_before_delivery)
"""Two faults of kinds the retired parallel passes did not compute, injected like the others."""


def inject_all(events: list[Event], targets: tuple[str, ...]) -> list[Event]:
    """Apply the injections one after the other; raise if one finds no place in what the others left."""
    for target in targets:
        mutated = INJECTIONS[target][1](events)
        if mutated is None:
            raise AssertionError(f"no place to inject {target}")
        events = mutated
    return events
