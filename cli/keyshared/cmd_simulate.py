"""`keyshared simulate`: run a named or file-given workload through the reference, write its trace."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keyshared.ui import console, error_console, progress, table

if TYPE_CHECKING:
    from ks_reference.config import Config
    from ks_reference.simulate import Simulation
    from ks_reference.store import Store
    from ks_reference.workloads import WorkloadFile


def register(commands: Any) -> None:
    """Add `simulate`."""
    parser = commands.add_parser(
        "simulate",
        help="run a workload through the reference dispatcher; write the trace, print a summary",
        description=(
            "Run a named workload (see --list) or a workload file (--file: JSON lines of adapter-protocol ops, "
            "plus settle and quiescent) through the reference dispatcher with a durable SQLite store, write "
            "the trace (--out, .jsonl or .parquet) and print a summary table."
        ),
    )
    parser.add_argument("workload", nargs="?", metavar="WORKLOAD", help="a named workload (see --list)")
    parser.add_argument("--file", type=Path, metavar="FILE", help="a workload file instead of a named workload")
    parser.add_argument("--list", action="store_true", help="list the named workloads and exit")
    parser.add_argument("--out", type=Path, metavar="TRACE", help="write the trace here (.jsonl or .parquet)")
    parser.add_argument(
        "--ops-out", type=Path, metavar="FILE", help="write the ops performed as a replayable workload file"
    )
    parser.add_argument("--messages", type=int, metavar="N", help="messages a named workload publishes (default 2000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of a named workload (default 1)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a configuration field (VALUE as JSON, else a string), e.g. --set profile=owner",
    )
    parser.add_argument(
        "--store", type=Path, metavar="PATH", help="keep the SQLite store here (default: a temporary one)"
    )
    parser.add_argument("--memory-store", action="store_true", help="keep the store in memory (faster, not durable)")
    parser.set_defaults(handler=run_simulate)


def _overrides(settings: list[str]) -> dict[str, Any]:
    from ks_spec.errors import UserError

    overrides: dict[str, Any] = {}
    for setting in settings:
        name, equals, text = setting.partition("=")
        if not equals or not name:
            raise UserError(f"--set {setting!r}: expected FIELD=VALUE")
        try:
            overrides[name] = json.loads(text)
        except json.JSONDecodeError:
            overrides[name] = text
    return overrides


def run_simulate(args: argparse.Namespace) -> int:
    """Run the workload, write the trace, print the summary."""
    import tempfile

    from ks_reference.config import Config
    from ks_reference.store import MemoryStore, SqliteStore
    from ks_reference.workloads import NAMED_WORKLOADS, parse_workload_file, write_ops
    from ks_spec.errors import UserError

    if args.list:
        rows = [(w.name, w.default_size, w.summary) for w in NAMED_WORKLOADS.values()]
        console.print(table("named workloads", ("name", "messages", "what it shows"), rows))
        return 0
    if (args.workload is None) == (args.file is None):
        raise UserError("give either a named WORKLOAD or --file FILE (see --list)")
    if args.out is not None and args.out.suffix not in (".jsonl", ".parquet"):
        raise UserError(f"--out {args.out}: the trace file must end in .jsonl or .parquet")
    overrides = _overrides(args.set)
    workload_file = parse_workload_file(args.file) if args.file is not None else None
    if workload_file is not None:
        config = Config.parse({**(workload_file.config or {}), **overrides})
    else:
        if args.workload not in NAMED_WORKLOADS:
            raise UserError(f"no workload named {args.workload!r} (known: {', '.join(NAMED_WORKLOADS)})")
        config = Config.parse({**NAMED_WORKLOADS[args.workload].config, **overrides})
    with tempfile.TemporaryDirectory(prefix="ks-simulate-") as folder:
        store: Store
        if args.memory_store:
            store = MemoryStore()
        else:
            path = args.store if args.store is not None else Path(folder) / "store.sqlite"
            store = SqliteStore(path, config.as_dict())
        try:
            simulation, warnings = _run(args, workload_file, config, overrides, store)
        finally:
            store.close()
    for warning in warnings[:10]:
        error_console.print(f"[yellow]warning[/yellow] {warning}", highlight=False, soft_wrap=True)
    if len(warnings) > 10:
        error_console.print(f"[yellow]warning[/yellow] ... and {len(warnings) - 10} more refused ops")
    problem = _format_problem(simulation.events)
    if problem is not None:
        raise UserError(f"internal error: the reference wrote a malformed trace: {problem}")
    if args.out is not None:
        from ks_spec.trace import write_trace

        count = write_trace(simulation.events, args.out)
        console.print(f"trace: {count} events, well formed (trace format v1) -> {args.out}")
    if args.ops_out is not None:
        write_ops(simulation, args.ops_out)
        console.print(f"ops: {len(simulation.ops)} -> {args.ops_out}")
    name = args.workload or str(args.file)
    console.print(
        table(f"simulate {name} ({config.profile}, {config.selector})", ("what", "value"), simulation.summary.rows())
    )
    return 0


def _run(
    args: argparse.Namespace,
    workload_file: WorkloadFile | None,
    config: Config,
    overrides: dict[str, Any],
    store: Store,
) -> tuple[Simulation, list[str]]:
    """Run the workload with a progress bar (shown only on a terminal); return the run and its warnings."""
    from ks_reference.simulate import Simulation
    from ks_reference.workloads import run_named, run_workload_file

    with progress() as bar:
        task = bar.add_task("publishing", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        if workload_file is not None:
            simulation = Simulation(config, store)
            return simulation, run_workload_file(simulation, workload_file, advance)
        return run_named(args.workload, args.messages, args.seed, overrides, store, advance), []


def _format_problem(events: list[dict[str, Any]]) -> str | None:
    """The first trace-format problem of the events (schema and sequence rules), or None."""
    from ks_spec.trace import SequenceRules, schema_problem

    rules = SequenceRules()
    for event in events:
        problem = schema_problem(event) or rules.check(event)
        if problem:
            return f"seq {event.get('seq')}: {problem}"
    return None
