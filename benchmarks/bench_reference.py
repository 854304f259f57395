"""Benchmarks of the reference dispatcher (issue 3). Prints its figures; run `python -m benchmarks.bench_reference`.

1. Dispatch: publish -> deliver -> ack with 1,000 consumers and 100,000 keys, as a ratio to a bare
   loop measured in the same run that does only the hash, the ring lookup and the dict updates.
2. The cursor with 1,000,000 (and 10,000,000) ack holes: acks per second, bytes persisted, restart
   load time and peak memory, each size in a fresh process.
Medians of several runs; machines here are shared and noisy, so the ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mmh3
from ks_conformance.pacing import peak_rss

from benchmarks import readme
from benchmarks.host import machine

CONSUMERS = 1000
KEYS = 100_000
POINTS = 100


def _keys(messages: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [f"key-{rng.randrange(KEYS)}" for _ in range(messages)]


def bare_loop(keys: list[str]) -> float:
    """The Python floor: murmur3 of the key, a bisect on the sorted ring, in-flight dict updates; msgs/s."""
    points = sorted(
        (mmh3.hash(f"consumer-{c}#{i}".encode(), 0, signed=False), f"consumer-{c}")
        for c in range(CONSUMERS)
        for i in range(POINTS)
    )
    positions = [p for p, _ in points]
    owners = [o for _, o in points]
    in_flight: dict[str, set[int]] = {f"consumer-{c}": set() for c in range(CONSUMERS)}
    holder_of: dict[int, str] = {}
    started = time.perf_counter()
    for offset, key in enumerate(keys):
        h = mmh3.hash(key.encode("utf-8"), 0, signed=False)
        index = bisect.bisect_left(positions, h)
        consumer = owners[index if index < len(owners) else 0]
        in_flight[consumer].add(offset)
        holder_of[offset] = consumer
        in_flight[holder_of.pop(offset)].discard(offset)  # the ack
    return len(keys) / (time.perf_counter() - started)


def reference_loop(keys: list[str], store_kind: str, profile: str) -> float:
    """The reference: publish, then ack the delivery it made, through the public API; msgs/s."""
    from ks_reference.dispatcher import Dispatcher
    from ks_reference.store import MemoryStore, SqliteStore, Store

    with tempfile.TemporaryDirectory() as folder:
        store: Store = MemoryStore() if store_kind == "memory" else SqliteStore(Path(folder) / "s.sqlite")
        dispatcher = Dispatcher({"profile": profile}, store)
        for c in range(CONSUMERS):
            dispatcher.add_consumer(f"consumer-{c}", 10)
        started = time.perf_counter()
        for offset, key in enumerate(keys):
            delivery = dispatcher.publish(key).events[0]
            dispatcher.ack(delivery["consumer"], offset)
        elapsed = time.perf_counter() - started
        store.close()
    return len(keys) / elapsed


def dispatch_figures(messages: int, runs: int) -> list[tuple[str, str]]:
    keys = _keys(messages)
    floor = [bare_loop(keys) for _ in range(runs)]
    rows = [("bare loop (hash + ring lookup + dict updates)", f"{statistics.median(floor):,.0f} msg/s", "1.00")]
    for store_kind, profile in (("memory", "strict"), ("memory", "owner"), ("sqlite", "strict")):
        count = messages if store_kind == "memory" else messages // 5
        rates = [reference_loop(keys[:count], store_kind, profile) for _ in range(runs)]
        ratio = statistics.median(rates) / statistics.median(floor)
        label = f"reference, {profile}, {store_kind} store" + ("" if store_kind == "memory" else f" ({count:,} msgs)")
        rows.append((label, f"{statistics.median(rates):,.0f} msg/s", f"{ratio:.3f}"))
    return rows


def holes_child(holes: int) -> None:
    """In a fresh process: build `holes` ack holes, persist them, reload them; print figures as JSON."""
    from ks_reference.cursor import Cursor
    from ks_reference.store import SqliteStore

    baseline_rss = peak_rss() // 1024
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.sqlite"
        store = SqliteStore(path)
        cursor = Cursor()
        started = time.perf_counter()
        for offset in range(1, 2 * holes + 1, 2):  # every other offset acked: the worst case for ranges
            cursor.resolve(offset)
        resolve_rate = holes / (time.perf_counter() - started)

        def persist() -> None:
            chunks: dict[int, bytes | None] = {}
            for number in cursor.take_dirty_chunks():
                bits = cursor.chunk(number)
                chunks[number] = bits.serialize() if bits else None
            store.persist_cursor(cursor.position, chunks, 0)

        started = time.perf_counter()
        persist()
        full_persist = time.perf_counter() - started
        state_bytes = store.bytes_persisted
        # then every further ack persisted at once (persist_interval 0): one 8 KiB chunk per write
        extra = 2000
        rng = random.Random(3)
        targets = rng.sample(range(0, 2 * holes, 2), extra)
        before = store.bytes_persisted
        started = time.perf_counter()
        for offset in targets:
            if offset != 0:
                cursor.resolve(offset)
                persist()
        persisted_rate = extra / (time.perf_counter() - started)
        per_ack_bytes = (store.bytes_persisted - before) / extra
        store.close()
        file_bytes = sum(p.stat().st_size for p in Path(folder).iterdir())
        loads = []
        for _ in range(3):
            started = time.perf_counter()
            reopened = SqliteStore(path)
            snapshot = reopened.load()
            Cursor(snapshot.cursor, snapshot.holes)
            loads.append(time.perf_counter() - started)
            reopened.close()
        assert len(snapshot.holes) >= holes, "holes were lost"
    peak_kb = peak_rss() // 1024
    print(
        json.dumps(
            {
                "holes": holes,
                "resolve_rate": resolve_rate,
                "full_persist_s": full_persist,
                "state_bytes": state_bytes,
                "persisted_ack_rate": persisted_rate,
                "bytes_per_persisted_ack": per_ack_bytes,
                "file_bytes": file_bytes,
                "load_s": statistics.median(loads),
                "peak_rss_mib": peak_kb / 1024,
                "rss_growth_mib": (peak_kb - baseline_rss) / 1024,
            }
        )
    )


def holes_figures(sizes: list[int]) -> list[dict[str, Any]]:
    results = []
    for holes in sizes:
        completed = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_reference", "--holes-child", str(holes)],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        results.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000, help="messages per dispatch run (default 200,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is printed (default 3)")
    parser.add_argument("--holes", type=int, action="append", help="ack-hole sizes (default 1,000,000 and 10,000,000)")
    parser.add_argument("--holes-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument(readme.FLAG, action="store_true", help=readme.HELP)
    args = parser.parse_args()
    if args.holes_child:
        holes_child(args.holes_child)
        return
    readme.record(args.write_readme, "bench_reference")
    print(f"machine: {machine()}")
    print(f"\ndispatch: {CONSUMERS:,} consumers, {KEYS:,} keys, {args.messages:,} messages, median of {args.runs}")
    print(f"{'what':<52} {'throughput':>16} {'ratio to floor':>15}")
    for what, rate, ratio in dispatch_figures(args.messages, args.runs):
        print(f"{what:<52} {rate:>16} {ratio:>15}")
    print("\ncursor with ack holes (every other offset acked), SQLite store, each size in a fresh process")
    header = ("holes", "acks/s", "acks/s persisted", "state", "per persisted ack", "store file", "restart", "peak RSS")
    print("{:>12} {:>12} {:>17} {:>10} {:>18} {:>11} {:>9} {:>10}".format(*header))
    for r in holes_figures(args.holes or [1_000_000, 10_000_000]):
        print(
            f"{r['holes']:>12,} {r['resolve_rate']:>12,.0f} {r['persisted_ack_rate']:>17,.0f} "
            f"{r['state_bytes'] / 2**20:>8.2f}MB {r['bytes_per_persisted_ack'] / 1024:>16.1f}KB "
            f"{r['file_bytes'] / 2**20:>9.1f}MB {r['load_s']:>8.3f}s {r['peak_rss_mib']:>8.0f}MB"
        )


if __name__ == "__main__":
    readme.run(main)
