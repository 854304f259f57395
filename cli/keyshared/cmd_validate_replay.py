"""`keyshared validate-replay`: judge traces with Spark, at any scale, never collecting them to the driver."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ks_spark.session import check_driver_memory, check_master

from keyshared.ui import argument_type, console, error_console, table

EXIT_BY_VERDICT = {"valid": 0, "invalid": 1, "unknown": 2}
"""Exit codes: 0 valid, 1 invalid (a MUST anomaly), 2 unknown (malformed or contradicting), as `check-trace`."""

COLOUR = {"valid": "green", "invalid": "red", "unknown": "yellow"}


def register(commands: Any) -> None:
    """Add `validate-replay`."""
    command = commands.add_parser(
        "validate-replay",
        help="judge traces with PySpark on every anomaly kind of check-trace (--shards N: in shards of keys)",
        description="Judge each trace (JSON lines, Parquet, or a folder of Parquet files; local paths or any URL "
        "Spark reads) with Spark on every anomaly kind of spec/checking.md, exactly as `check-trace` does: a parallel "
        "pass checks the format, then the Python checker itself (check-trace's code) judges every kind, fed the whole "
        "trace in seq order inside one task, at one core's speed, or with --shards N in shards of keys, one Spark task "
        "each (check-trace --jobs' code: the shards tell each other what spans keys through Spark's shuffle; a trace "
        "the shards do not cover yet goes to one task, and the output says why). The trace is never collected to the "
        "driver (only counts, the first witnesses of each anomaly kind and, in shards, two bytes a message). Runs "
        "embedded on every core by default; pass --master for a cluster, or run it under spark-submit "
        "(cli/keyshared/submit.py) without code changes. Exit codes: 0 valid, 1 invalid, 2 unknown, 64 usage, 66 "
        "missing trace, 69 no Java or Spark cannot start, 70 a Spark job failed (out of memory, a lost executor); for "
        "several traces, the worst verdict (invalid, unknown, valid).",
    )
    command.add_argument("traces", nargs="*", metavar="TRACE", help="a .jsonl or .parquet trace, a folder, or a URL")
    command.add_argument(
        "--list-checks",
        action="store_true",
        help="print every anomaly kind judged from a trace, its requirement, and the situation its rule judges (a "
        "key, a consumer, the subscription); starts no Spark",
    )
    command.add_argument(
        "--shards",
        type=int,
        metavar="N",
        default=1,
        help="judge in N shards of keys, one Spark task each (default 1: the whole trace in one task; on two cores two "
        "shards cost about what one task costs, benchmarks/README.md); a trace the shards do not cover yet is judged "
        "in one task, with the reason printed",
    )
    command.add_argument(
        "--master",
        metavar="URL",
        type=argument_type(check_master),
        help="Spark master (default: local[*], or spark-submit's)",
    )
    command.add_argument(
        "--report", type=Path, metavar="FILE", help="write a JSON-lines report (spec/report-format.md)"
    )
    command.add_argument(
        "--witnesses",
        type=int,
        default=3,
        metavar="N",
        help="explain the first N anomalies of each kind per trace (0 to 8; default 3)",
    )
    command.add_argument(
        "--driver-memory",
        metavar="SIZE",
        type=argument_type(check_driver_memory),
        help="Spark driver memory, e.g. 2g (embedded runs)",
    )
    command.add_argument("--quiet", action="store_true", help="print only the verdict line of each trace")
    command.set_defaults(handler=run_validate_replay, usage_error=command.error)


def list_checks() -> int:
    """Print each trace anomaly kind, its requirement and the situation its rule judges (catalogue.py, from the rule
    registry); the Python checker judges every one."""
    from ks_spark.validation.catalogue import listing

    rows = listing()
    width = max(len(name) for name, _, _ in rows)
    for name, requirement, scope in rows:
        console.print(f"{name:<{width}}  {requirement:<9}  {scope}", soft_wrap=True, markup=False)
    console.print(
        f"all {len(rows)} kinds judged by the Python checker (in one task, or in shards of keys with --shards N)",
        soft_wrap=True,
    )
    return 0


def run_validate_replay(args: argparse.Namespace) -> int:
    """Validate every trace, print verdicts, counts and explained witnesses, write the report if asked."""
    from ks_conformance.anomalies import describe_event
    from ks_spark.progress import SparkProgress
    from ks_spark.session import SessionOptions, get_session, spark_job
    from ks_spark.validation.reader import local_path
    from ks_spark.validation.report import report_lines
    from ks_spark.validation.validator import MAX_WITNESSES, merge_verdicts, validate
    from ks_spec.errors import MissingInput, UserError
    from rich.markup import escape

    from keyshared.ui import progress

    if args.list_checks:
        return list_checks()
    if not args.traces:
        args.usage_error("the following arguments are required: TRACE (or --list-checks)")
    if not 0 <= args.witnesses <= MAX_WITNESSES:
        raise UserError(f"--witnesses: must be between 0 and {MAX_WITNESSES}", exit_code=64)
    if args.shards < 1:
        raise UserError("--shards: must be 1 or more", exit_code=64)
    for trace in args.traces:  # a missing local trace is said at once, not after Spark has started
        path = local_path(trace)
        if path is not None and not path.exists():
            raise MissingInput(f"{path}: no such file or folder")
    started = time.perf_counter()
    with error_console.status("starting Spark"):
        session = get_session(SessionOptions(master=args.master, driver_memory=args.driver_memory))
    results = []
    with progress() as bar:
        for trace in args.traces:
            task = bar.add_task(f"{trace}: starting", total=None)

            def update(description: str, done: int, total: int, task: Any = task, trace: str = trace) -> None:
                bar.update(task, description=f"{trace}: {description}", completed=done, total=total or None)

            with spark_job(trace), SparkProgress(session, update) as spark_progress:
                results.append(
                    validate(
                        session,
                        trace,
                        witnesses=args.witnesses,
                        stage=spark_progress.stage,
                        shards=args.shards,
                    )
                )
            bar.remove_task(task)
    for result in results:
        colour = COLOUR[result.verdict.value]
        summary = ", ".join(f"{name} {count}" for name, count in result.counts.items()) or "no anomalies"
        console.print(
            f"[{colour}]{result.verdict.value}[/{colour}] {escape(result.trace)}: {result.events} events, "
            f"{summary} ({result.seconds:.1f}s)",
            soft_wrap=True,
        )
        if args.shards > 1 and result.judged and not args.quiet:
            console.print(f"  judged {escape(result.judged)}", soft_wrap=True)
        if result.malformed:
            console.print(f"  cannot judge: {escape(result.malformed)}", soft_wrap=True)
        for seq, message in result.problems[:3]:
            console.print(f"  contradiction at seq {seq}: {escape(message)}", soft_wrap=True)
        if args.quiet:
            continue
        if result.counts:
            console.print(table("anomalies", ("anomaly", "count"), list(result.counts.items())))
        for finding in result.findings:
            anomaly = finding.anomaly
            console.print(
                f"  [bold]{anomaly.name}[/bold] ({anomaly.requirement}, {anomaly.level}) at seq {anomaly.seq}"
            )
            console.print(f"    {escape(anomaly.explanation.text())}", soft_wrap=True)
            for event in finding.events:
                console.print(f"      {escape(describe_event(event))}", soft_wrap=True)
        shown = len(result.findings)
        if result.total > shown:
            console.print(f"  ... {result.total - shown} more (counted above; --witnesses shows up to 8 per kind)")
    if len(results) > 1:
        summary_rows = [(r.trace, r.events, r.verdict.value, r.total) for r in results]
        console.print(table("validate-replay", ("trace", "events", "verdict", "anomalies"), summary_rows))
    if args.report:
        from ks_conformance import report

        settings = {
            "engine": "spark",
            "master": session.sparkContext.master,
            "witnesses_per_anomaly": args.witnesses,
        }
        report.write_report(report_lines(results, settings, time.perf_counter() - started), args.report)
    return EXIT_BY_VERDICT[merge_verdicts(r.verdict for r in results).value]
