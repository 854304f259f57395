"""`keyshared check-trace`: judge recorded traces against the spec (spec/checking.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from keyshared.ui import console, table

EXIT_BY_VERDICT = {"valid": 0, "invalid": 1, "unknown": 2}
"""Exit codes: 0 valid, 1 invalid (a MUST anomaly), 2 unknown (malformed or self-contradicting)."""


def register(commands: Any) -> None:
    """Add `check-trace`."""
    check = commands.add_parser(
        "check-trace",
        help="judge traces against the spec: verdict, anomalies with explained witnesses (exit 0 valid, 1 invalid, "
        "2 unknown)",
        description="Judge each trace (JSON lines, Parquet, or a folder of Parquet files) with the anomaly catalogue "
        "of spec/checking.md. Exit codes: 0 valid, 1 invalid, 2 unknown (malformed or self-contradicting), 64 usage, "
        "66 missing file.",
    )
    check.add_argument("traces", nargs="+", type=Path, metavar="TRACE", help="a .jsonl or .parquet trace or a folder")
    check.add_argument("--report", type=Path, metavar="FILE", help="write a JSON-lines report (spec/report-format.md)")
    check.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (one test case per trace)")
    check.add_argument("--markdown", type=Path, metavar="FILE", help="write a Markdown summary")
    check.add_argument(
        "--witnesses",
        type=int,
        default=3,
        metavar="N",
        help="explain at most N anomalies of each kind per trace (0: all; default 3)",
    )
    check.add_argument("--quiet", action="store_true", help="print only the verdict line of each trace")
    check.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="judge each trace in N shards of keys, in N processes (default 1; JSON lines are converted to Parquet by "
        "the workers first); the judgment is the same, and a trace the shards do not cover yet (such as selector "
        "buckets with checkpoint_resume, or a malformed trace) is judged in one process, with the reason printed",
    )
    check.set_defaults(handler=run_check_trace)


def run_check_trace(args: argparse.Namespace) -> int:
    """Check every trace, print verdicts and explanations, write the requested reports."""
    from ks_conformance import report
    from ks_conformance.anomalies import describe_event, merge_verdicts
    from ks_conformance.tracefile import check_trace, report_lines, select_witnesses, witness_events
    from ks_spec.errors import UserError
    from rich.markup import escape

    if args.witnesses < 0:
        raise UserError("--witnesses: must be 0 or more", exit_code=64)
    if args.jobs < 1:
        raise UserError("--jobs: must be 1 or more", exit_code=64)
    results = [check_trace(path, jobs=args.jobs) for path in args.traces]
    for result in results:
        colour = {"valid": "green", "invalid": "red", "unknown": "yellow"}[result.verdict.value]
        counts: dict[str, int] = {}
        for anomaly in result.anomalies:
            counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
        summary = ", ".join(f"{name} {count}" for name, count in counts.items()) or "no anomalies"
        console.print(
            f"[{colour}]{result.verdict.value}[/{colour}] {escape(str(result.path))}: "
            f"{result.events} events, {summary}",
            soft_wrap=True,
        )
        if args.jobs > 1:
            console.print(f"  judged {escape(result.judged)}", soft_wrap=True)
        if result.malformed:
            console.print(f"  cannot judge: {escape(result.malformed)}", soft_wrap=True)
        for problem in result.problems[:3]:
            console.print(
                f"  contradiction at seq {problem.seq}: {escape(problem.message)}; judging stopped there",
                soft_wrap=True,
            )
        if args.quiet:
            continue
        shown = select_witnesses(result.anomalies, args.witnesses)
        events = witness_events(result.path, {s for a in shown for s in a.witness})
        for anomaly in shown:
            console.print(
                f"  [bold]{anomaly.name}[/bold] ({anomaly.requirement}, {anomaly.level}) at seq {anomaly.seq}"
            )
            console.print(f"    {escape(anomaly.explanation.text())}", soft_wrap=True)
            for seq in anomaly.witness:
                if seq in events:
                    console.print(f"      {escape(describe_event(events[seq]))}", soft_wrap=True)
        hidden = len(result.anomalies) - len(shown)
        if hidden:
            console.print(f"  ... {hidden} more (--witnesses 0 shows all)")
    if len(results) > 1:
        rows = [(r.path, r.events, r.verdict.value, len(r.anomalies)) for r in results]
        console.print(table("check-trace", ("trace", "events", "verdict", "anomalies"), rows))
    departures = report.trace_departure_summary(r.config for r in results if r.malformed is None)
    if departures:
        console.print(escape(departures), soft_wrap=True)
    if args.report or args.junit or args.markdown:
        lines = report_lines(results, args.witnesses)
        if args.report:
            report.write_report(lines, args.report)
        if args.junit:
            report.write_text(report.to_junit(lines), args.junit)
        if args.markdown:
            report.write_text(report.to_markdown(lines), args.markdown)
    return EXIT_BY_VERDICT[merge_verdicts(r.verdict for r in results).value]
