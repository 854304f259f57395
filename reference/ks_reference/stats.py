"""Observability (spec section 16): the stats object, named as the spec names it (KS-OBS-1)."""

from __future__ import annotations

from typing import Any

from ks_reference.core import Core, MessageState

RESOLUTION_KINDS = ("acked", "dropped", "dead_lettered", "filtered")


def collect_stats(state: Core) -> dict[str, Any]:
    """Counters since the last restart and gauges of the present state, as one JSON object."""
    stats: dict[str, Any] = {
        "now": state.now,
        "delivered_total": state.delivered_total,
        "redelivered_total": state.redelivered_total,
        "resolved_total": {kind: state.resolved_total[kind] for kind in RESOLUTION_KINDS},
        "dropped_total": dict(sorted(state.dropped_total.items())),
        "ack_ignored_total": dict(sorted(state.ack_ignored_total.items())),
        "window_used": len(state.messages),
        "window_size": state.config.window,
        "cursor": state.cursor.position,
        "persisted_cursor": state.persisted_position,
        "ack_holes": state.cursor.hole_count(),
        "consumers": {},
        "held_by_key": {},
        # req: KS-OBS-2
        "blocked_keys": sorted(state.blocked),
        "stuck_keys": [],
        "evicted_total": state.evicted_total,
    }
    if not state.config.reliable:  # best-effort has no window and no cursor (spec section 18)
        for name in ("window_used", "window_size", "cursor", "persisted_cursor", "ack_holes"):
            del stats[name]
    held_at: dict[str, int] = {name: 0 for name in state.members}
    for offset in state.holds.values():
        held = state.messages[offset].held
        if held is not None and held[1] in held_at:
            held_at[held[1]] += 1
    draining, by_consumer = _draining(state)
    for name, member in state.members.items():
        stats["consumers"][name] = {
            "capacity": member.capacity,
            "unacked": len(member.outstanding),
            "connected": member.connected,
            "held": held_at[name],
            "draining_hashes": by_consumer.get(name, []),
        }
    stats["held_by_key"], stats["stuck_keys"] = _held_and_stuck(state)
    stats["held_keys"] = len(stats["held_by_key"])
    stats.update(draining)
    if state.layout is not None:
        # req: KS-BKT-7
        stats["buckets_withheld"] = len(state.layout.withheld)
        stats["bucket_reassignments_total"] = state.layout.reassignments_total
        stats["rollovers_total"] = state.layout.rollovers_total
        stats["drain_mode"] = state.layout.drain_mode()
    return stats


def _behind(state: Core, key: str, offset: int) -> int:
    """The key's unresolved, undelivered read messages from `offset` on (the held or blocked one included)."""
    return sum(
        1
        for other in state.queues.get(key, ())
        if other >= offset and state.messages[other].state is not MessageState.OUTSTANDING
    )


def _held_and_stuck(state: Core) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    held_by_key: dict[str, Any] = {}
    stuck: list[dict[str, Any]] = []
    for key, offsets in sorted(state.blocked.items()):
        count = _behind(state, key, offsets[0])
        held_by_key[key] = {"held": count, "reason": "blocked"}
        since = min(state.messages[offset].blocked_at for offset in offsets)
        # req: KS-OBS-2
        stuck.append({"key": key, "reason": "blocked", "held": count, "since": since})
    for key, offset in sorted(state.holds.items()):
        message = state.messages[offset]
        if message.held is None or key in held_by_key:
            continue
        count = _behind(state, key, offset)
        held_by_key[key] = {"held": count, "reason": message.held[0]}
        stuck.append({"key": key, "reason": message.held[0], "held": count, "since": message.held_since})
    for key, queue in sorted(state.queues.items()):
        if key in held_by_key:
            continue
        head = state.messages[queue[0]]
        queued = _behind(state, key, queue[0])
        if head.state is MessageState.OUTSTANDING and head.delivered_at < state.now and queued > 0:
            stuck.append({"key": key, "reason": "unacked", "held": queued, "since": head.delivered_at})
    return held_by_key, stuck


def _draining(state: Core) -> tuple[dict[str, int], dict[str, list[dict[str, int]]]]:
    """PIP-379's draining stats: the subscription's counts, and per old owner its draining hashes.

    A hash is the selector's position of a draining key (its slot, or its 32-bit hash); keys of one slot
    drain as one hash. `pending` counts the owner's outstanding deliveries of it.
    """
    pending: dict[tuple[str, int], int] = {}
    if state.config.selector != "any":
        for key, holders in state.key_holders.items():
            queue = state.queues.get(key)
            placement = state.messages[queue[0]].placement if queue else None
            target = state.target_name(key, placement)
            position = placement.hash if placement is not None else state.selector.position(key)
            for holder, count in holders.items():
                if holder.name != target:
                    pending[holder.name, position] = pending.get((holder.name, position), 0) + count
    by_consumer: dict[str, list[dict[str, int]]] = {}
    for (name, position), count in sorted(pending.items()):
        by_consumer.setdefault(name, []).append({"hash": position, "pending": count})
    return {
        "draining_hashes_count": len({position for _, position in pending}),
        "draining_hashes_pending_messages": sum(pending.values()),
        "draining_hashes_cleared_total": state.draining_cleared_total,
    }, by_consumer
