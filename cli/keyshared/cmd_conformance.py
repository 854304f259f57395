"""`keyshared conformance`: run any dispatcher against the spec (run, smoke, replay, report, serve)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keyshared.ui import console, error_console, table

EXIT_BY_VERDICT = {"conformant": 0, "not-conformant": 1, "unknown": 2}
EX_USAGE = 64
EX_CONFIG = 78
"""The adapter failed to start or speaks another protocol version."""

ADAPTER_HELP = (
    "the implementation: 'reference', 'spark' (the Spark dispatcher), py:module:factory (in-process) or "
    'cmd:"command" (JSON lines over stdio, spec/adapter-protocol.md)'
)
STATUS_COLOURS = {
    "passed": "green",
    "failed": "red",
    "warning": "yellow",
    "vacuous": "yellow",
    "skipped": "dim",
    "untested": "dim",
}


def register(commands: Any) -> None:
    """Add `conformance run|smoke|replay|vectors|report|serve`."""
    conformance = commands.add_parser(
        "conformance",
        help="run a dispatcher against the spec through its adapter (run, smoke, replay, vectors, report, serve)",
        description="The conformance kit. Exit codes: 0 conformant, 1 not conformant, 2 unknown, 64 usage, "
        "66 missing file, 78 the adapter failed to start.",
    )
    actions = conformance.add_subparsers(title="actions", metavar="ACTION", parser_class=type(conformance))
    actions.required = True

    run = actions.add_parser(
        "run",
        help="the suite: random programs drawn from the adapter's capabilities, every step judged, a verdict per "
        "requirement",
    )
    run.add_argument("--adapter", required=True, help=ADAPTER_HELP)
    run.add_argument("--profile", choices=("ci", "thorough"), default="ci", help="how hard to look (default ci)")
    run.add_argument("--seed", type=int, default=0, help="the seed of the random programs (default 0)")
    run.add_argument("--examples", type=int, metavar="N", help="override: examples per stratum and round")
    run.add_argument("--steps", type=int, metavar="N", help="override: steps per example")
    run.add_argument("--report", type=Path, metavar="FILE", help="write the JSON-lines report (spec/report-format.md)")
    run.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (a test case per requirement)")
    run.add_argument("--markdown", type=Path, metavar="FILE", help="write a Markdown summary")
    run.add_argument(
        "--scenarios",
        type=Path,
        default=Path("conformance-scenarios"),
        metavar="DIR",
        help="where to save each failure as a replayable scenario (default ./conformance-scenarios)",
    )
    run.add_argument("--validate-protocol", action="store_true", help="check every message against the schema")
    run.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds to wait for each answer")
    run.add_argument("--no-stats", action="store_true", help="do not query and compare the stats after each op")
    run.add_argument(
        "--batch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drive the adapter through `replay`, a chunk of ops at a time (default: only adapters that declare "
        "interactive: false); needs the batch capability",
    )
    run.add_argument("--chunk", type=int, metavar="N", help="in batch mode, ops per replay while drawing (default 12)")
    run.set_defaults(handler=run_run)

    smoke = actions.add_parser("smoke", help="check that an adapter works at all: a short scripted exchange, printed")
    smoke.add_argument("--adapter", required=True, help=ADAPTER_HELP)
    smoke.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds to wait for each answer")
    smoke.set_defaults(handler=run_smoke)

    replay = actions.add_parser("replay", help="replay saved scenarios against an adapter and judge them")
    replay.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO", help="scenario files (.jsonl)")
    replay.add_argument("--adapter", required=True, help=ADAPTER_HELP)
    replay.add_argument("--validate-protocol", action="store_true", help="check every message against the schema")
    replay.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds to wait for each answer")
    replay.add_argument("--trace", type=Path, metavar="DIR", help="write each replay's trace to DIR/<id>.jsonl")
    replay.set_defaults(handler=run_replay)

    vectors = actions.add_parser(
        "vectors",
        help="replay the frozen conformance vectors (spec/vectors/) against an adapter, a table by requirement",
        description="Replay every conformance vector (spec/vectors/README.md) against the adapter and judge each with "
        "the kit's checks: a conformant dispatcher passes them all. Exit codes: 0 every vector passed or was skipped, "
        "1 a vector failed, 2 an adapter fault, 64 usage, 65 a malformed vector file, 66 no vectors, 78 the adapter "
        "failed to start.",
    )
    vectors.add_argument("--adapter", required=True, help=ADAPTER_HELP)
    vectors.add_argument(
        "--vectors",
        type=Path,
        metavar="DIR",
        help="the vector folder, searched recursively for *.vector.jsonl (default: the corpus in spec/vectors)",
    )
    vectors.add_argument(
        "--only", metavar="KS-ID,...", help="replay only the vectors that target one of these requirements"
    )
    vectors.add_argument("--validate-protocol", action="store_true", help="check every message against the schema")
    vectors.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds to wait for each answer")
    vectors.add_argument("--verbose", action="store_true", help="print a line per vector as it is replayed")
    vectors.set_defaults(handler=run_vectors)

    show = actions.add_parser("report", help="render a saved report on the terminal, or as JUnit or Markdown")
    show.add_argument("report", type=Path, metavar="REPORT", help="a report written by --report")
    show.add_argument("--format", choices=("table", "junit", "markdown"), default="table", help="default table")
    show.set_defaults(handler=run_report)

    serve = actions.add_parser("serve", help="serve a py:module:factory adapter over stdio (JSON lines)")
    serve.add_argument("--adapter", required=True, help="'reference' or py:module:factory")
    serve.set_defaults(handler=run_serve)


def _connect_factory(args: argparse.Namespace) -> Any:
    from ks_conformance.adapters import check_adapter_name, connect

    check_adapter_name(args.adapter)
    validate = bool(getattr(args, "validate_protocol", False))
    return lambda: connect(args.adapter, validate=validate, timeout=args.timeout)


def _start_failed(error: Exception) -> int:
    error_console.print(f"keyshared: error: the adapter failed to start: {error}", soft_wrap=True, markup=False)
    return EX_CONFIG


def run_run(args: argparse.Namespace) -> int:
    """Run the suite, print the summary, write the reports; exit by verdict."""
    from ks_conformance import report
    from ks_conformance.protocol import StartFailed
    from ks_conformance.results import report_lines, settings_for
    from ks_conformance.suite import run_suite
    from ks_spec.errors import UserError

    overrides: dict[str, int] = {}
    for name, value in (("max_examples", args.examples), ("steps", args.steps)):
        if value is not None:
            if value < 1:
                raise UserError(f"--{'examples' if name == 'max_examples' else 'steps'}: must be at least 1", 64)
            overrides[name] = value
    if args.examples is not None:
        overrides["examples_total"] = 0  # exactly N per stratum, not the profile's total budget
    if args.chunk is not None:
        if args.chunk < 1:
            raise UserError("--chunk: must be at least 1", 64)
        overrides["batch_chunk"] = args.chunk
    settings = settings_for(args.profile, seed=args.seed, **overrides)
    factory = _connect_factory(args)
    try:
        result = run_suite(
            factory,
            settings,
            scenarios=args.scenarios,
            check_stats=not args.no_stats,
            on_progress=lambda message: error_console.print(f"[dim]{message}[/dim]", markup=True, highlight=False),
            batch=args.batch,
        )
    except StartFailed as error:
        return _start_failed(error)
    lines = report_lines(result)
    print_summary(lines)
    if args.report:
        report.write_report(lines, args.report)
    if args.junit:
        report.write_text(report.to_junit(lines), args.junit)
    if args.markdown:
        report.write_text(report.to_markdown(lines), args.markdown)
    return EXIT_BY_VERDICT[result.verdict]


def print_summary(lines: Sequence[dict[str, Any]]) -> None:
    """The terminal view of a report: a table of requirements, each violation explained, the verdict."""
    from ks_conformance import report
    from rich.markup import escape

    head = lines[0]
    footer = lines[-1]
    implementation = head.get("implementation", {})
    console.print(
        f"[bold]{escape(str(implementation.get('name', '?')))}[/bold] {escape(str(implementation.get('version', '')))}"
        f" via {escape(str(head.get('adapter', '?')))} ({head.get('transport', '?')}), spec {head['spec_version']}",
        soft_wrap=True,
    )
    rows = []
    for line in lines:
        if line["type"] != "requirement":
            continue
        colour = STATUS_COLOURS.get(line["status"], "white")
        exercised = sum(line["exercised"].values())
        status = f"[{colour}]{line['status']}[/{colour}]"
        note = escape(line.get("reason", "")) if line["status"] != "passed" else ""
        rows.append((line["id"], line["level"], status, exercised, escape(line["title"]), note))
    console.print(table("requirements", ("id", "level", "status", "exercised", "title", "note"), rows))
    for line in lines:
        if line["type"] == "violation":
            where = f" (replay: {escape(line['scenario'])})" if line.get("scenario") else ""
            console.print(f"[red]{line['anomaly']}[/red] ({line['id']}, {line['level']}){where}", soft_wrap=True)
            console.print(f"  {escape(line['text'])}", soft_wrap=True)
            for note in report.violation_notes(line):
                console.print(f"  [dim]{escape(note)}[/dim]", soft_wrap=True)
        elif line["type"] == "error":
            console.print(f"[yellow]adapter fault[/yellow] ({line['kind']}): {escape(line['message'])}", soft_wrap=True)
            if line.get("stderr"):
                console.print(escape(line["stderr"]), soft_wrap=True)
    sheet = [line for line in lines if line["type"] == "departure"]
    if sheet:
        console.print("[bold]departures from strict Key-Shared[/bold] (declared, judged by their own rules)")
    for line in sheet:
        relaxes = ", ".join(line["relaxes"]) or "nothing the spec promises"
        console.print(
            f"  [cyan]{escape(line['choice'])}[/cyan]: gives up {line['guarantee']} (keeps {line['rule']}, relaxes "
            f"{relaxes}; in effect in {line['in_effect']} examples)",
            soft_wrap=True,
        )
        console.print(f"    {escape(line['text'])}", soft_wrap=True)
    counts = ", ".join(f"{count} {status}" for status, count in sorted(footer["counts"].items()))
    colour = {"conformant": "green", "not-conformant": "red"}.get(footer["verdict"], "yellow")
    examples = f", {footer['examples']} examples, {footer['steps']} steps" if "examples" in footer else ""
    console.print(f"verdict: [{colour}]{footer['verdict']}[/{colour}] ({counts}{examples})")
    console.print(f"  {escape(report.departure_summary(lines))}", soft_wrap=True)
    for limit in footer.get("limits", []):
        console.print(f"[yellow]limit reached[/yellow]: {escape(limit)}", soft_wrap=True)


def run_smoke(args: argparse.Namespace) -> int:
    """Run the smoke script and print every exchange; 0 if the adapter works, 1 if not, 78 if it did not start."""
    import json

    from ks_conformance.protocol import StartFailed
    from ks_conformance.smoke import smoke
    from rich.markup import escape

    try:
        result = smoke(_connect_factory(args)())
    except StartFailed as error:
        return _start_failed(error)
    for request, response in result.exchanges:
        console.print(f"[cyan]>[/cyan] {escape(json.dumps(request))}", soft_wrap=True)
        console.print(f"[magenta]<[/magenta] {escape(json.dumps(response))}", soft_wrap=True)
    for anomaly in result.anomalies:
        console.print(f"[red]{anomaly.name}[/red] ({anomaly.requirement}): {escape(anomaly.explanation.text())}")
    if result.fault is not None:
        console.print(f"[red]adapter fault[/red] ({result.fault.kind}): {escape(result.fault.message)}", soft_wrap=True)
        if result.fault.stderr:
            console.print(escape(result.fault.stderr), soft_wrap=True)
    if result.ok:
        name = result.info.implementation.get("name") if result.info else "?"
        console.print(f"[green]smoke ok[/green]: {name} answered {len(result.exchanges)} requests correctly")
        return 0
    console.print("[red]smoke failed[/red]")
    return 1


def run_replay(args: argparse.Namespace) -> int:
    """Replay scenarios; print what each showed; exit by the merged verdict."""
    from ks_conformance.protocol import AdapterFault, StartFailed
    from ks_conformance.scenario import read_scenario, replay
    from ks_spec.trace import write_trace
    from rich.markup import escape

    scenarios = [(path, read_scenario(path)) for path in args.scenarios]
    connection = _connect_factory(args)()
    try:
        info = connection.start()
    except StartFailed as error:
        return _start_failed(error)
    worst = "conformant"
    try:
        for path, scenario in scenarios:
            try:
                outcome = replay(scenario, connection, info.capabilities, info.implementation)
            except AdapterFault as fault:
                console.print(f"[yellow]unknown[/yellow] {escape(str(path))}: adapter fault: {escape(fault.message)}")
                worst = "unknown" if worst == "conformant" else worst
                continue
            if outcome.skipped:
                console.print(f"[dim]skipped[/dim] {escape(str(path))}: needs {', '.join(outcome.skipped)}")
                continue
            if outcome.refused_config:
                console.print(f"[yellow]unknown[/yellow] {escape(str(path))}: reset refused ({outcome.refused_config})")
                worst = "unknown" if worst == "conformant" else worst
                continue
            assert outcome.session is not None
            if args.trace:
                write_trace(outcome.session.trace, args.trace / f"{scenario.id}.jsonl")
            must = [a for a in outcome.anomalies if a.level == "MUST"]
            if must:
                worst = "not-conformant"
            colour, verdict = ("red", "violates") if must else ("green", "passes")
            covered = ", ".join(scenario.covers) or "-"
            console.print(
                f"[{colour}]{verdict}[/{colour}] {escape(str(path))} ({scenario.id}, covers {covered}): "
                f"{len(outcome.session.steps)} steps, {len(outcome.session.trace)} events",
                soft_wrap=True,
            )
            for anomaly in outcome.anomalies:
                console.print(f"  [bold]{anomaly.name}[/bold] ({anomaly.requirement}, {anomaly.level})")
                console.print(f"    {escape(anomaly.explanation.text())}", soft_wrap=True)
    finally:
        connection.close()
    return EXIT_BY_VERDICT[worst]


def run_vectors(args: argparse.Namespace) -> int:
    """Replay the vectors, print a table by requirement and each failure explained; exit 1 on any failure."""
    from ks_conformance.protocol import StartFailed
    from ks_conformance.vectors import VECTORS_DIR, VectorResult, by_requirement, find_vectors
    from ks_conformance.vectors import run_vectors as replay_vectors
    from ks_spec.errors import UserError
    from ks_spec.requirements import load_index
    from rich.markup import escape

    only = [part.strip() for part in (args.only or "").split(",") if part.strip()]
    if args.only is not None and not only:
        raise UserError("--only: expected requirement IDs separated by commas (KS-ORD-1,KS-DRN-1)", EX_USAGE)
    known = {str(entry["id"]) for entry in load_index()}
    for identifier in only:
        if identifier not in known:
            raise UserError(f"--only {identifier}: no such requirement in the spec", EX_USAGE)
    folder = args.vectors if args.vectors is not None else VECTORS_DIR
    vectors = find_vectors(folder, only)
    if not vectors:
        raise UserError(f"--only {args.only}: no vector in {folder} targets these requirements", EX_USAGE)

    def progress(result: VectorResult) -> None:
        if args.verbose:
            colour = STATUS_COLOURS.get(result.status, "white")
            detail = ", ".join(result.kinds) or result.reason
            console.print(
                f"[{colour}]{result.status}[/{colour}] {escape(result.vector.name)} {escape(detail)}", soft_wrap=True
            )

    factory = _connect_factory(args)
    try:
        results = replay_vectors(vectors, factory, progress)
    except StartFailed as error:
        return _start_failed(error)
    rows = []
    for row in by_requirement(results):
        colour = STATUS_COLOURS.get(row.status, "white")
        counts = ", ".join(f"{n} {status}" for status, n in sorted(row.counts.items()))
        rows.append((row.id, row.level, f"[{colour}]{row.status}[/{colour}]", counts, escape("; ".join(row.notes))))
    console.print(table("vectors", ("requirement", "level", "status", "vectors", "note"), rows))
    for result in results:
        if result.status not in ("failed", "warning"):
            continue
        console.print(
            f"[red]{result.status}[/red] {escape(result.vector.name)} (replay: {escape(str(result.vector.path))})",
            soft_wrap=True,
        )
        for anomaly in result.anomalies:
            console.print(f"  [bold]{anomaly.name}[/bold] ({anomaly.requirement}, {anomaly.level})")
            console.print(f"    {escape(anomaly.explanation.text())}", soft_wrap=True)
    totals: dict[str, int] = {}
    for result in results:
        totals[result.status] = totals.get(result.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(totals.items()))
    console.print(f"{len(results)} vectors against {escape(args.adapter)}: {summary}", soft_wrap=True)
    if totals.get("failed"):
        return 1
    return 2 if totals.get("error") else 0


def run_report(args: argparse.Namespace) -> int:
    """Render a saved report."""
    from ks_conformance import report

    lines = report.read_report(args.report)
    if args.format == "junit":
        console.print(report.to_junit(lines), markup=False, highlight=False, soft_wrap=True)
    elif args.format == "markdown":
        console.print(report.to_markdown(lines), markup=False, highlight=False, soft_wrap=True)
    elif lines[0]["kind"] == "check-trace":
        console.print(report.to_markdown(lines), markup=False, highlight=False, soft_wrap=True)
    else:
        print_summary(lines)
    verdict = report.footer_of(lines)["verdict"]
    return {"valid": 0, "invalid": 1}.get(verdict, EXIT_BY_VERDICT.get(verdict, 2))


def run_serve(args: argparse.Namespace) -> int:
    """Serve an in-process adapter over stdio until `stop`."""
    from ks_conformance.adapters import check_adapter_name, load_object
    from ks_conformance.protocol import StartFailed
    from ks_conformance.stdio import serve_stdio
    from ks_spec.errors import UserError

    full = check_adapter_name(args.adapter)
    if not full.startswith("py:"):
        raise UserError(f"--adapter {args.adapter}: only a py: adapter (or 'reference') can be served", EX_USAGE)
    try:
        adapter = load_object(full)
    except StartFailed as error:
        return _start_failed(error)
    return serve_stdio(adapter)
