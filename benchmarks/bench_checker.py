"""Benchmark of the Python checker (`keyshared check-trace`); run `python -m benchmarks.bench_checker`.

On the synthetic trace (benchmarks/synthetic_trace.py) of each size: `check_trace` (the reader, the schema,
the sequence rules and the checker, as check-trace runs them) against a floor measured in the same run,
reading the same Parquet batches with the same reader and updating one dict per event. Each run is a fresh
process on one core, so its peak memory (RSS) is its own. The target of issue 14: at least 300k events/s,
and a 100M-event trace in under 1 GB. `--sizes 1M,10M,100M` (100M takes about half an hour).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ks_conformance.pacing import peak_rss
from rich.console import Console
from rich.table import Table

from benchmarks import readme
from benchmarks.bench_spark import ensure_trace, label, machine, parse_size

console = Console(width=140)
TARGET_RATE = 300_000
TARGET_RSS = 1 << 30


def floor_child(trace: Path) -> dict[str, Any]:
    """Read every event with the checker's reader and count it in one dict: what any Python pass costs."""
    from ks_spec.trace import read_events

    counts: dict[str, int] = {}
    started = time.perf_counter()
    events = 0
    for _, event in read_events(trace):
        kind = event["event"]
        counts[kind] = counts.get(kind, 0) + 1
        events += 1
    return {"events": events, "seconds": time.perf_counter() - started}


def checker_child(trace: Path) -> dict[str, Any]:
    """check-trace's whole judgment of the file; its verdict and how many messages it kept on the heap."""
    from ks_conformance.tracefile import check_trace

    started = time.perf_counter()
    result = check_trace(trace)
    seconds = time.perf_counter() - started
    return {
        "events": result.events,
        "seconds": seconds,
        "verdict": result.verdict.value,
        "live_messages": result.messages_kept,
        "published": result.messages,
    }


def run_child(mode: str, trace: Path, module: str = "benchmarks.bench_checker") -> dict[str, Any]:
    """One measurement in a fresh process (`module --child mode trace`); its figures with the process's peak RSS."""
    completed = subprocess.run(
        [sys.executable, "-m", module, "--child", mode, str(trace)],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{completed.stderr.strip()}")
    figures: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return figures


def child_main(mode: str, trace: Path) -> None:
    """Run one measurement and print its figures as one JSON line."""
    figures = floor_child(trace) if mode == "floor" else checker_child(trace)
    figures["peak_rss"] = peak_rss()
    print(json.dumps(figures))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child_main(sys.argv[2], Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,10M", help="trace sizes in events (default 1M,10M)")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "ks-bench-data")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="one 200k-event trace")
    parser.add_argument(readme.FLAG, action="store_true", help=readme.HELP)
    args = parser.parse_args()
    readme.record(args.write_readme, "bench_checker", quick=args.quick)
    sizes = [200_000] if args.quick else [parse_size(size) for size in args.sizes.split(",")]
    args.data.mkdir(parents=True, exist_ok=True)
    console.print(f"machine: {machine()}")
    table = Table(title="check-trace on the synthetic trace, one process each", title_justify="left")
    for column in ("events", "floor ev/s", "checker ev/s", "ratio", "seconds", "checker peak RSS", "floor RSS"):
        table.add_column(column, justify="right")
    table.add_column("verdict; messages kept at the end")
    verdicts = []
    for events in sizes:
        trace, _ = ensure_trace(args.data, events, args.seed)
        floor = run_child("floor", trace)
        checked = run_child("checker", trace)
        floor_rate = floor["events"] / floor["seconds"]
        rate = checked["events"] / checked["seconds"]
        verdicts.append(checked["verdict"])
        table.add_row(
            label(events),
            f"{floor_rate:,.0f}",
            f"{rate:,.0f}",
            f"{rate / floor_rate:.3f}",
            f"{checked['seconds']:,.1f}",
            f"{checked['peak_rss'] / 2**20:,.0f} MB",
            f"{floor['peak_rss'] / 2**20:,.0f} MB",
            f"{checked['verdict']}; {checked['live_messages']:,} of {checked['published']:,}",
        )
    console.print(table)
    largest = sizes[-1]
    console.print(
        f"targets (issue 14): >= {TARGET_RATE:,} events/s; a 100M-event trace under 1 GB RSS"
        + ("" if largest >= 100_000_000 else f" (not measured: largest size here {label(largest)})")
    )
    if any(verdict != "valid" for verdict in verdicts):
        raise SystemExit("the checker did not judge the synthetic trace valid")


if __name__ == "__main__":
    readme.run(main)
