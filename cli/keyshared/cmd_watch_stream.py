"""`keyshared watch-stream`: run a Spark Structured Streaming query under capture and judge its replays."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ks_spark.session import check_master

from keyshared.ui import argument_type, console, error_console, table

EXIT_BY_VERDICT = {"valid": 0, "invalid": 1, "unknown": 2}
"""As check-trace and validate-replay (0 valid, 1 invalid, 2 unknown)."""
COLOUR = {"valid": "green", "invalid": "red", "unknown": "yellow"}
JUDGES = ("check-trace", "validate-replay", "none")


def register(commands: Any) -> None:
    """Add `watch-stream`."""
    command = commands.add_parser(
        "watch-stream",
        help="run a Structured Streaming query module under capture, then judge every run's replays as one trace",
        description="Run a query module (an import name or a .py file defining start(spark, capture, options) and, "
        "optionally, probe(spark, options)) under capture until it has processed every available record, stop it, "
        "then turn the capture folder (all its runs: a run killed and restarted from its checkpoint is a restart) "
        "into a trace by the mapping of spec/streaming.md and judge it: with the Python checker (check-trace, every "
        "anomaly kind) or with --judge validate-replay (Spark). --judge-only judges a capture folder without running "
        "anything. The trace is written to --out (default CAPTURE/trace.jsonl). Exit codes: 0 valid, 1 invalid, 2 "
        "unknown, 64 usage, 65 bad capture, 66 missing input, 69 no Java or Spark "
        "cannot start, 70 the query or a Spark job failed.",
    )
    command.add_argument("module", nargs="?", metavar="MODULE", help="the query module: pkg.module or path/to/query.py")
    command.add_argument("--capture", type=Path, required=True, metavar="DIR", help="the capture folder (all runs)")
    command.add_argument(
        "--checkpoint", metavar="DIR", help="the query's checkpoint location (default: CAPTURE/checkpoint)"
    )
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        dest="options",
        help="an option for the module's start() (repeatable)",
    )
    command.add_argument(
        "--partitions", type=int, metavar="N", help="spark.sql.shuffle.partitions for this run (default 4)"
    )
    command.add_argument(
        "--master", metavar="URL", type=argument_type(check_master), help="Spark master (default: local[2])"
    )
    command.add_argument("--out", type=Path, metavar="TRACE", help="where to write the trace (.jsonl or .parquet)")
    command.add_argument(
        "--judge", choices=JUDGES, default="check-trace", help="how to judge the trace (default check-trace)"
    )
    command.add_argument("--judge-only", action="store_true", help="judge the capture folder; run nothing")
    command.add_argument("--witnesses", type=int, default=3, metavar="N", help="anomalies explained per kind")
    command.set_defaults(handler=run_watch_stream, usage_error=command.error)


def _options(pairs: list[str], usage_error: Any) -> dict[str, str]:
    options = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            usage_error(f"--set {pair}: expected NAME=VALUE")
        options[name.strip()] = value
    return options


def run_watch_stream(args: argparse.Namespace) -> int:
    """Run the module under capture (unless --judge-only), assemble the trace, judge it, print the verdict."""
    from ks_spec.errors import UserError

    if args.witnesses < 0:
        raise UserError("--witnesses: must be 0 or more", exit_code=64)
    if args.partitions is not None and args.partitions < 1:
        raise UserError(f"--partitions {args.partitions}: must be 1 or more", exit_code=64)
    if args.judge_only and args.module:
        args.usage_error("--judge-only runs nothing: leave out MODULE")
    if not args.judge_only and not args.module:
        args.usage_error("the following arguments are required: MODULE (or --judge-only)")
    options = _options(args.options, args.usage_error)
    session = None
    if not args.judge_only:
        session = _run(args, options)
    return _judge(args, session)


def _run(args: argparse.Namespace, options: dict[str, str]) -> Any:
    from ks_spark.capture.watch import load_module, run_under_capture
    from ks_spark.session import SessionOptions, get_session, spark_job

    module = load_module(args.module)
    checkpoint = args.checkpoint or str(args.capture / "checkpoint")
    partitions = args.partitions or 4
    started = time.perf_counter()
    with error_console.status("starting Spark") as status:
        session = get_session(
            SessionOptions(master=args.master or "local[2]", app_name="keyshared watch-stream", quick=True)
        )
        session.conf.set("spark.sql.shuffle.partitions", str(partitions))

        def on_batch(batch: int) -> None:
            status.update(f"{args.module}: batch {batch} ({time.perf_counter() - started:.0f}s)")

        status.update(f"{args.module}: starting the query")
        with spark_job(args.module):
            outcome = run_under_capture(session, module, args.capture, checkpoint, options, on_batch)
    console.print(
        f"{args.module}: {outcome.run_dir.name} ran {outcome.batches} batches in "
        f"{time.perf_counter() - started:.1f}s" + (" (sink probed)" if outcome.probed else ""),
        soft_wrap=True,
    )
    return session


def _judge(args: argparse.Namespace, session: Any) -> int:
    from ks_spark.capture.streamtrace import where, write
    from rich.markup import escape

    if args.judge == "none" and args.out is None:
        return 0
    out = args.out or args.capture / "trace.jsonl"
    summary = write(args.capture, out)
    console.print(
        f"{escape(str(out))}: {summary.runs} runs, {summary.batches} batches, {summary.published} records, "
        f"{summary.deliveries} deliveries ({summary.redeliveries} again), {summary.commits} commits"
        + ("" if summary.clean_end else ", no clean end (no quiescent point: liveness not judged)"),
        soft_wrap=True,
    )
    for pair in summary.concurrent:
        console.print(f"  concurrent runs: {escape(pair)} (one query started twice on one checkpoint)", soft_wrap=True)
    if args.judge == "none":
        return 0
    if args.judge == "validate-replay":
        return _validate_replay(args, session, out, lambda offsets: where(summary, offsets))
    from ks_conformance.tracefile import check_trace, select_witnesses, witness_events

    result = check_trace(out)
    counts: dict[str, int] = {}
    for anomaly in result.anomalies:
        counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
    _verdict_line(result.verdict.value, str(out), result.events, counts)
    _departures_line(result.config if result.malformed is None else None)
    if result.malformed:
        console.print(f"  cannot judge past {escape(result.malformed)}", soft_wrap=True)
    for problem in result.problems[:3]:
        console.print(f"  contradiction at seq {problem.seq}: {escape(problem.message)}", soft_wrap=True)
    shown = select_witnesses(result.anomalies, args.witnesses)
    events = witness_events(out, {s for a in shown for s in a.witness})
    _explain([(a, [events[s] for s in a.witness if s in events]) for a in shown], lambda o: where(summary, o))
    return EXIT_BY_VERDICT[result.verdict.value]


def _validate_replay(
    args: argparse.Namespace, session: Any, out: Path, places: Callable[[Iterable[int]], list[str]]
) -> int:
    from ks_spark.session import SessionOptions, get_session, spark_job
    from ks_spark.validation.validator import MAX_WITNESSES, validate

    if session is None:
        with error_console.status("starting Spark"):
            session = get_session(SessionOptions(master=args.master or "local[2]", quick=True))
    with spark_job(str(out)), error_console.status(f"{out}: validate-replay"):
        result = validate(session, str(out), witnesses=min(args.witnesses, MAX_WITNESSES))
    _verdict_line(result.verdict.value, str(out), result.events, result.counts)
    _departures_line(result.config if result.malformed is None else None)
    if result.malformed:
        console.print(f"  cannot judge: {result.malformed}", soft_wrap=True, markup=False)
    _explain([(f.anomaly, f.events) for f in result.findings], places)
    return EXIT_BY_VERDICT[result.verdict.value]


def _departures_line(config: Mapping[str, Any] | None) -> None:
    """The verdict's second part, as check-trace prints it: what the capture's configuration gives up (none if the
    trace could not be judged)."""
    from ks_conformance import report
    from rich.markup import escape

    departures = report.trace_departure_summary([config] if config else [])
    if departures:
        console.print(escape(departures), soft_wrap=True)


def _verdict_line(verdict: str, trace: str, events: int, counts: dict[str, int]) -> None:
    from rich.markup import escape

    colour = COLOUR[verdict]
    summary = ", ".join(f"{name} {count}" for name, count in counts.items()) or "no anomalies"
    console.print(f"[{colour}]{verdict}[/{colour}] {escape(trace)}: {events} events, {summary}", soft_wrap=True)
    if counts:
        console.print(table("anomalies", ("anomaly", "count"), list(counts.items())))


def _explain(findings: list[tuple[Any, list[dict[str, Any]]]], places: Callable[[Iterable[int]], list[str]]) -> None:
    """Each anomaly's explanation, its witness events, and where in the job its records were read and processed."""
    from ks_conformance.anomalies import describe_event
    from rich.markup import escape

    for anomaly, events in findings:
        console.print(f"  [bold]{anomaly.name}[/bold] ({anomaly.requirement}, {anomaly.level}) at seq {anomaly.seq}")
        console.print(f"    {escape(anomaly.explanation.text())}", soft_wrap=True)
        for event in events:
            console.print(f"      {escape(describe_event(event))}", soft_wrap=True)
        offsets = [int(e["offset"]) for e in events if isinstance(e.get("offset"), int)]
        for line in places(offsets):
            console.print(f"      {escape(line)}", soft_wrap=True)
