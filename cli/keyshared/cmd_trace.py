"""`keyshared trace`: validate trace files against the trace format v1."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from keyshared.ui import console


def register(commands: Any) -> None:
    """Add `trace validate`."""
    trace = commands.add_parser("trace", help="work with trace files (spec/trace.md)")
    actions = trace.add_subparsers(title="actions", metavar="ACTION", parser_class=type(trace))
    actions.required = True
    validate = actions.add_parser(
        "validate", help="check traces (JSON lines or Parquet) against the schema and the sequence rules"
    )
    validate.add_argument(
        "traces",
        nargs="+",
        type=Path,
        metavar="TRACE",
        help="a .jsonl or .parquet file, or a folder of .parquet files",
    )
    validate.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    """Print one line per trace; exit 1 if any is malformed."""
    from ks_spec.errors import MissingInput
    from ks_spec.trace import validate_trace

    failed = 0
    for path in args.traces:
        if not path.exists():
            raise MissingInput(f"{path}: no such file or folder")
        count, problem = validate_trace(path)
        if problem:
            failed += 1
            console.print(f"[red]invalid[/red] {problem}", highlight=False, soft_wrap=True)
        else:
            console.print(f"[green]valid[/green] {path}: {count} events", highlight=False)
    return 1 if failed else 0
