"""Benchmark of the streaming capture; run `python -m benchmarks.bench_capture` (`--quick` for a short check).

The keyed_totals example query (spark/ks_spark/capture/examples) over a file log, on one local Spark session: its
throughput (records per second, from the query's start to every record processed) without capture and with
it, runs alternating in the same process after a warm-up run, and the ratio of the medians; then the time
to assemble the captured folder into a trace and to judge it with check-trace (Python) and validate-replay
(Spark, same session).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import readme

console = Console(width=140)


def run_once(session: Any, log: Path, work: Path, captured: bool) -> float:
    """One run of the example over the whole log into fresh folders; the seconds it took."""
    from ks_spark.capture.examples import keyed_totals
    from ks_spark.capture.recorder import Capture, NoCapture

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    checkpoint = str(work / "checkpoint")
    capture = Capture(work / "capture", checkpoint=checkpoint) if captured else NoCapture(checkpoint)
    capture.begin(session)
    started = time.perf_counter()
    query = keyed_totals.start(session, capture, {"log": str(log), "out": str(work / "out")})
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    seconds = time.perf_counter() - started
    capture.end()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--files", type=int, default=8, help="log files, one micro-batch each")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind, alternating")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--quick", action="store_true", help="4,000 records, 4 files, 1 repeat")
    parser.add_argument(readme.FLAG, action="store_true", help=readme.HELP)
    args = parser.parse_args()
    readme.record(args.write_readme, "bench_capture", quick=args.quick)
    if args.quick:
        args.records, args.files, args.repeats = 4_000, 4, 1
    from ks_conformance.tracefile import check_trace
    from ks_spark.capture.examples.keyed_totals import write_log
    from ks_spark.capture.streamtrace import write
    from ks_spark.session import SessionOptions, get_session
    from ks_spark.validation.validator import validate

    from benchmarks.bench_spark import machine

    root = Path(tempfile.mkdtemp(prefix="ks-bench-capture-"))
    try:
        log = root / "log"
        write_log(log, args.records, args.keys, args.files)
        session = get_session(SessionOptions(master=args.master, shuffle_partitions=4, app_name="bench-capture"))
        run_once(session, log, root / "warm-up", captured=False)
        times: dict[bool, list[float]] = {False: [], True: []}
        for repeat in range(args.repeats):
            for captured in (False, True) if repeat % 2 == 0 else (True, False):
                times[captured].append(run_once(session, log, root / f"run-{repeat}-{captured}", captured))
        last = root / f"run-{args.repeats - 1}-True"
        started = time.perf_counter()
        summary = write(last / "capture", last / "trace.jsonl")
        assemble_s = time.perf_counter() - started
        started = time.perf_counter()
        python = check_trace(last / "trace.jsonl")
        python_s = time.perf_counter() - started
        spark = validate(session, str(last / "trace.jsonl"))
        capture_bytes = sum(p.stat().st_size for p in (last / "capture").rglob("*") if p.is_file())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    bare, captured_s = statistics.median(times[False]), statistics.median(times[True])
    console.print(f"machine: {machine()}")
    console.print(
        f"keyed_totals: {args.records:,} records, {args.keys} keys, {args.files} micro-batches, "
        f"{args.master}, 4 shuffle partitions; medians of {args.repeats} alternating runs"
    )
    table = Table(title="capture overhead", title_justify="left")
    for column in ("query", "seconds", "records/s", "ratio to no capture"):
        table.add_column(column)
    table.add_row("without capture", f"{bare:.2f}", f"{args.records / bare:,.0f}", "1.00")
    table.add_row("with capture", f"{captured_s:.2f}", f"{args.records / captured_s:,.0f}", f"{bare / captured_s:.2f}")
    console.print(table)
    judged = Table(title="the captured trace", title_justify="left")
    for column in ("step", "seconds", "detail"):
        judged.add_column(column)
    judged.add_row("capture folder", "", f"{capture_bytes / 1e6:.2f} MB")
    judged.add_row(
        "assemble (streamtrace)",
        f"{assemble_s:.2f}",
        f"{summary.published:,} records, {len(python.anomalies)} anomalies",
    )
    judged.add_row("check-trace (Python)", f"{python_s:.2f}", f"{python.events:,} events, {python.verdict.value}")
    judged.add_row("validate-replay (Spark)", f"{spark.seconds:.2f}", f"{spark.verdict.value}")
    judged.add_row("", "", f"{summary.batches} batches, {summary.deliveries:,} deliveries")
    console.print(judged)


if __name__ == "__main__":
    readme.run(main)
