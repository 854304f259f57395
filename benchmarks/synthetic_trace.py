"""A valid synthetic trace of any size, written as Parquet in row groups with numpy (flat memory, seeded).

Strict profile, ring selector, 16 consumers joined at the start, 100,000 keys. Message i is published
and at once delivered (attempt 1) to its key's ring target; messages are acked one per step, shuffled
within blocks of 64 (so up to 128 are in flight and the cursor has holes), and every ack that moves the
cursor is followed by its `cursor_persisted` (persist_interval 0). A `tick` every 256 steps, ticks to pad
the trace to the exact size asked for, and a final `quiescent`. Keys cycle through a seeded permutation,
rotated per cycle, so no key ever has two messages in flight: both checkers judge the trace valid.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CONSUMERS = 16
KEYS = 100_000
BLOCK = 64
"""Acks are shuffled within blocks of this many messages; at most 2 * BLOCK are in flight."""
TICK_EVERY = 256
CAPACITY = 2 * BLOCK
"""At most 2 * BLOCK messages are ever outstanding, so no consumer can exceed this capacity."""
CHUNK_BLOCKS = 4096
"""Step blocks per row group (4096 * 64 steps, about 800k events)."""
EVENT_KINDS = ("config", "consumer_added", "publish", "deliver", "ack", "cursor_persisted", "tick", "quiescent")
CONFIG, ADDED, PUBLISH, DELIVER, ACK, PERSIST, TICK, QUIESCENT = range(len(EVENT_KINDS))


@dataclass(frozen=True)
class Plan:
    """What a trace of `events` events holds: its messages, persists, ticks and padding."""

    events: int
    seed: int
    blocks: int
    persists: int
    padding: int

    @property
    def messages(self) -> int:
        """Messages published (and acked)."""
        return self.blocks * BLOCK


def _permutations(seed: int) -> Iterator[np.ndarray]:
    """The per-block ack orders, CHUNK_BLOCKS rows at a time, the same stream on every call."""
    rng = np.random.default_rng([seed, 1])
    while True:
        yield rng.permuted(np.tile(np.arange(BLOCK, dtype=np.int64), (CHUNK_BLOCKS, 1)), axis=1)


def _persist_steps(orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each block's ack order: whether the ack at each position moves the cursor, and the cursor after it."""
    rows = orders.shape[0]
    position = np.empty_like(orders)
    position[np.arange(rows)[:, None], orders] = np.arange(BLOCK)
    prefix_max = np.maximum.accumulate(position, axis=1)  # the cursor passes m once every ack up to m is in
    moves = np.zeros((rows, BLOCK), dtype=bool)
    moves[np.arange(rows)[:, None], prefix_max] = True
    counts = np.zeros((rows, BLOCK), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(rows), BLOCK), prefix_max.ravel()), 1)
    return moves, np.cumsum(counts, axis=1)


def _ticks(steps: int) -> int:
    return (steps - 1) // TICK_EVERY if steps > 0 else 0


def plan(events: int, seed: int) -> Plan:
    """How many blocks fit in `events` events (a first pass over the ack orders); the rest is padding ticks."""
    fixed = 1 + CONSUMERS + 1  # config, the joins, quiescent
    if events < fixed + 3 * 2 * BLOCK + 10:
        raise ValueError(f"a synthetic trace needs at least {fixed + 3 * 2 * BLOCK + 10} events")
    blocks = persists = 0
    for orders in _permutations(seed):
        per_block = _persist_steps(orders)[0].sum(axis=1)
        for count in per_block:
            steps = (blocks + 2) * BLOCK
            if fixed + 3 * (blocks + 1) * BLOCK + persists + int(count) + _ticks(steps) > events:
                steps = (blocks + 1) * BLOCK
                padding = events - (fixed + 3 * blocks * BLOCK + persists + _ticks(steps))
                return Plan(events, seed, blocks, persists, padding)
            blocks += 1
            persists += int(count)
    raise AssertionError("unreachable")


def _targets(seed: int) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Key names, consumer names, each key's ring target (consumer index) and the key order of the cycles."""
    from ks_reference.selectors import make_selector

    keys = [f"k{i:06d}" for i in range(KEYS)]
    consumers = [f"c{i:02d}" for i in range(1, CONSUMERS + 1)]
    selector = make_selector("ring", 100, 4)
    for consumer in consumers:
        selector.add(consumer)
    index = {c: i for i, c in enumerate(consumers)}
    targets = np.array([index[selector.target(k) or ""] for k in keys], dtype=np.int32)
    order = np.random.default_rng([seed, 2]).permutation(KEYS)
    return keys, consumers, targets, order


def _rotations(messages: int, seed: int) -> np.ndarray:
    """Each key cycle's rotation; a step of at most KEYS - 2 * (2 * BLOCK + 1) keeps the last and the first
    2 * BLOCK + 1 messages around a cycle boundary on distinct keys."""
    shifts = np.random.default_rng([seed, 3]).integers(0, KEYS - 2 * (2 * BLOCK + 1) + 1, size=messages // KEYS + 1)
    rotation = np.cumsum(shifts) - shifts[0]
    return np.asarray(rotation, dtype=np.int64)


def _key_of(messages: np.ndarray, order: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """Message i's key: `order` rotated by its cycle's rotation."""
    keys: np.ndarray = order[(messages + rotation[messages // KEYS]) % KEYS]
    return keys


def _config_detail() -> str:
    from ks_reference.config import Config

    config = Config.parse({"profile": "strict", "selector": "ring", "points": 100, "persist_interval": 0}).as_dict()
    detail = {"trace_version": 1, "config": config, "implementation": {"name": "synthetic-bench", "version": "1"}}
    return json.dumps(detail, sort_keys=True)


def _table(
    kind: np.ndarray,
    offset: np.ndarray,
    key: np.ndarray,
    consumer: np.ndarray,
    cursor: np.ndarray,
    capacity: np.ndarray,
    tick: np.ndarray,
    first_seq: int,
    names: tuple[pa.Array, pa.Array],
    detail: str | None = None,
) -> pa.Table:
    """One row group: every event column built from integer codes (-1: null)."""
    from ks_spec.trace import arrow_schema

    schema = arrow_schema()
    rows = len(kind)
    key_names, consumer_names = names

    def ints(values: np.ndarray) -> pa.Array:
        return pa.array(values, type=pa.int64(), mask=values < 0)

    def take(dictionary: pa.Array, codes: np.ndarray) -> pa.Array:
        return dictionary.take(pa.array(codes, type=pa.int32(), mask=codes < 0))

    is_added = kind == ADDED
    columns: dict[str, pa.Array] = {
        "seq": pa.array(np.arange(first_seq, first_seq + rows, dtype=np.int64)),
        "tick": pa.array(tick, type=pa.int64()),
        "event": pa.array(EVENT_KINDS).take(pa.array(kind, type=pa.int8())),
        "offset": ints(offset),
        "key": take(key_names, key),
        "consumer": take(consumer_names, consumer),
        "attempt": ints(np.where(kind == DELIVER, 1, -1)),
        "capacity": ints(capacity),
        "filters": pa.array([[] if a else None for a in is_added], type=pa.list_(pa.string()))
        if is_added.any()
        else pa.nulls(rows, pa.list_(pa.string())),
        "cursor": ints(cursor),
        "detail": pa.array([detail if k == CONFIG else None for k in kind], type=pa.string())
        if detail is not None
        else pa.nulls(rows, pa.string()),
    }
    arrays = [columns.get(f.name, pa.nulls(rows, f.type)) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def write(path: Path, events: int, seed: int = 7) -> Plan:
    """Write the trace atomically to `path` (a .parquet file); return its plan."""
    the_plan = plan(events, seed)
    keys, consumers, targets, order = _targets(seed)
    names = (pa.array(keys), pa.array(consumers))
    rotation = _rotations(the_plan.messages, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    from ks_spec.trace import arrow_schema

    seq = 0
    with pq.ParquetWriter(temporary, arrow_schema(), compression="zstd") as writer:
        head = 1 + CONSUMERS
        none = np.full(head, -1, dtype=np.int64)
        kind = np.array([CONFIG] + [ADDED] * CONSUMERS, dtype=np.int8)
        consumer = np.array([-1, *range(CONSUMERS)], dtype=np.int64)
        capacity = np.array([-1] + [CAPACITY] * CONSUMERS, dtype=np.int64)
        writer.write_table(
            _table(kind, none, none, consumer, none, capacity, np.zeros(head, np.int64), 0, names, _config_detail())
        )
        seq += head
        step_blocks = the_plan.blocks + 1  # the last step block only acks
        permutations = _permutations(seed)
        previous: np.ndarray | None = None  # ack orders of the chunk's first block minus one
        for first in range(0, step_blocks, CHUNK_BLOCKS):
            orders = next(permutations)
            count = min(CHUNK_BLOCKS, step_blocks - first)
            table, seq = _chunk(first, count, orders, previous, the_plan, order, targets, seq, names, rotation)
            previous = orders[CHUNK_BLOCKS - 1]
            writer.write_table(table)
        steps = step_blocks * BLOCK
        tick = _ticks(steps)
        tail = the_plan.padding + 1
        kind = np.array([TICK] * the_plan.padding + [QUIESCENT], dtype=np.int8)
        ticks = np.concatenate([tick + 1 + np.arange(the_plan.padding), [tick + the_plan.padding]]).astype(np.int64)
        none = np.full(tail, -1, dtype=np.int64)
        writer.write_table(_table(kind, none, none, none, none, none, ticks, seq, names))
        seq += tail
    if seq != events:
        raise AssertionError(f"wrote {seq} events, planned {events}")
    os.replace(temporary, path)
    return the_plan


def _chunk(
    first: int,
    count: int,
    orders: np.ndarray,
    previous: np.ndarray | None,
    the_plan: Plan,
    key_order: np.ndarray,
    targets: np.ndarray,
    seq: int,
    names: tuple[pa.Array, pa.Array],
    rotation: np.ndarray,
) -> tuple[pa.Table, int]:
    """Step blocks first .. first + count - 1: publishes of block j, acks of block j - 1 (ordered by `orders`)."""
    # The acks of step block j follow block j - 1's order: the previous chunk's last row, then this chunk's.
    ack_orders = np.vstack([previous if previous is not None else np.arange(BLOCK), orders[: count - 1]])
    moves, cursor_after = _persist_steps(ack_orders)
    step = (first * BLOCK + np.arange(count * BLOCK)).astype(np.int64)
    block = step // BLOCK
    has_tick = (step % TICK_EVERY == 0) & (step > 0)
    has_publish = block < the_plan.blocks
    has_ack = block >= 1
    acked = (block - 1) * BLOCK + ack_orders.ravel()
    has_persist = has_ack & moves.ravel()
    persisted = (block - 1) * BLOCK + cursor_after.ravel()
    per_step = has_tick.astype(np.int64) + 2 * has_publish + has_ack + has_persist
    start = np.cumsum(per_step) - per_step
    rows = int(per_step.sum())
    kind = np.empty(rows, dtype=np.int8)
    offset = np.full(rows, -1, dtype=np.int64)
    key = np.full(rows, -1, dtype=np.int64)
    consumer = np.full(rows, -1, dtype=np.int64)
    cursor = np.full(rows, -1, dtype=np.int64)
    tick = np.repeat(step // TICK_EVERY, per_step)
    at = start.copy()
    kind[at[has_tick]] = TICK
    at += has_tick
    published_keys = _key_of(step[has_publish], key_order, rotation)
    for event in (PUBLISH, DELIVER):
        where = at[has_publish]
        kind[where] = event
        offset[where] = step[has_publish]
        key[where] = published_keys
        if event == DELIVER:
            consumer[where] = targets[published_keys]
        at += has_publish
    where = at[has_ack]
    acked_keys = _key_of(acked[has_ack], key_order, rotation)
    kind[where] = ACK
    offset[where] = acked[has_ack]
    key[where] = acked_keys
    consumer[where] = targets[acked_keys]
    at += has_ack
    kind[at[has_persist]] = PERSIST
    cursor[at[has_persist]] = persisted[has_persist]
    table = _table(kind, offset, key, consumer, cursor, np.full(rows, -1, np.int64), tick, seq, names)
    return table, seq + rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, required=True, help="exact number of events")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True, help="the .parquet file to write")
    args = parser.parse_args()
    written = write(args.out, args.events, args.seed)
    print(f"{args.out}: {written.events:,} events, {written.messages:,} messages, {written.persists:,} persists")


if __name__ == "__main__":
    main()
