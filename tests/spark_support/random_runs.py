"""Random runs recorded from the reference, for differential tests of the Spark dispatcher.

`recorded_run(seed)` draws a configuration and a program of ops within the Spark dispatcher's
capabilities (strict or owner, a selector with a per-key target, joins with and without filters,
leaves, disconnects, acks from holders, from others and for unknown offsets, ticks, restarts) and
drives the reference with it op by op, choosing acks from what the reference actually delivered.
The reference's responses are what the Spark dispatcher must reproduce exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ks_reference.adapter import ReferenceAdapter

KEYS = ("a1", "a2", "b1", "b2", "c")
NAMES = ("c1", "c2", "c3", "c4")
FILTERS: tuple[list[str], ...] = ([], [], ["a*"], ["?1"], ["b?", "c"])
SELECTORS = ("ring", "pulsar-consistent", "pulsar-auto-split", "danube")
UNBOUNDED = 1_000_000


@dataclass
class RecordedRun:
    """A configuration, its ops, and the reference's response to each op."""

    config: dict[str, Any]
    ops: list[dict[str, Any]]
    responses: list[dict[str, Any]]


def recorded_run(seed: int, length: tuple[int, int] = (5, 60)) -> RecordedRun:
    """A random run (deterministic for the seed) and the reference's responses."""
    rng = random.Random(seed)
    selector = rng.choice(SELECTORS)
    config = {
        "profile": rng.choice(("strict", "owner")),
        "selector": selector,
        "persist_interval": rng.choice((0, 0, 1, 2)),
        "persist_ack_holes": rng.random() < 0.5,
        "evict_after": rng.choice((0, 1, 2)),
    }
    reference = ReferenceAdapter(durable=False)
    reference.reset(config)
    ops: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    outstanding: dict[int, str] = {}
    published = 0
    for _ in range(rng.randint(*length)):
        op = _draw(rng, selector, published, outstanding)
        response = reference.op(op)
        ops.append(op)
        responses.append(response)
        if op["op"] == "publish" and response.get("ok"):
            published += 1
        if op["op"] == "restart":
            outstanding.clear()
        gone = {op["consumer"]} if op["op"] == "remove_consumer" and response.get("ok") else set()
        for event in response.get("events", []):
            if event["event"] == "deliver":
                outstanding[event["offset"]] = event["consumer"]
            elif event["event"] in ("ack", "filter"):
                outstanding.pop(event["offset"], None)
            elif event["event"] == "consumer_evicted":
                gone.add(event["consumer"])
        for offset, holder in list(outstanding.items()):
            if holder in gone:
                del outstanding[offset]
    reference.stop()
    return RecordedRun(config, ops, responses)


def _draw(rng: random.Random, selector: str, published: int, outstanding: dict[int, str]) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.3:
        return {"op": "publish", "offset": published, "key": rng.choice(KEYS)}
    if roll < 0.42:
        filters = rng.choice(FILTERS) if selector != "pulsar-auto-split" else []
        return {"op": "add_consumer", "consumer": rng.choice(NAMES), "capacity": UNBOUNDED, "filters": filters}
    if roll < 0.5:
        return {"op": "remove_consumer", "consumer": rng.choice((*NAMES, "nobody"))}
    if roll < 0.55:
        return {"op": "disconnect", "consumer": rng.choice(NAMES)}
    if roll < 0.8 and outstanding:
        offset, holder = rng.choice(sorted(outstanding.items()))
        if rng.random() < 0.15:
            holder = rng.choice(NAMES)  # a stale or foreign ack
        return {"op": "ack", "consumer": holder, "offset": offset}
    if roll < 0.85:
        return {"op": "ack", "consumer": rng.choice(NAMES), "offset": rng.randint(0, published + 1)}
    if roll < 0.95:
        return {"op": "tick"}
    return {"op": "restart"}
