"""`keyshared verify`: the main job; runs every check the kit has and prints a summary table."""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keyshared.ui import console, table


@dataclass(frozen=True)
class StepResult:
    """The outcome of one verification step."""

    ok: bool
    summary: str


@dataclass(frozen=True)
class Step:
    """One part of `keyshared verify`: a name, what it shows, and how to run it.

    `order` places it among the steps of other parts (spec 10, models 20, reference 30,
    conformance 40, Spark 50).
    """

    name: str
    shows: str
    run: Callable[[argparse.Namespace], StepResult]
    needs_java: bool = False
    order: int = 50


def _spec_step(args: argparse.Namespace) -> StepResult:
    from ks_spec.requirements import check_spec

    requirements, problems = check_spec()
    if problems:
        return StepResult(False, f"{len(problems)} problems, first: {problems[0]}")
    return StepResult(True, f"{len(requirements)} requirements; IDs unique, citations defined, index fresh")


def _trace_examples_step(args: argparse.Namespace) -> StepResult:
    from ks_spec.examples import check_trace_examples

    good, bad, problems = check_trace_examples()
    if problems:
        return StepResult(False, problems[0])
    return StepResult(
        True, f"{good} well-formed sample traces accepted, {bad} malformed ones rejected on the expected field"
    )


def steps() -> list[Step]:
    """Every step, in the order they run: ours, plus `steps()` of each keyshared/steps_*.py."""
    found = _spec_steps()
    for path in sorted(Path(__file__).resolve().parent.glob("steps_*.py")):
        module = importlib.import_module(f"keyshared.{path.stem}")
        found += module.steps()
    return sorted(found, key=lambda step: step.order)


def _spec_steps() -> list[Step]:
    return [
        Step("spec", "the spec's requirements are well formed, cited IDs exist, index fresh", _spec_step, order=10),
        Step(
            "trace format",
            "sample traces validate; malformed ones are rejected with file, line and field",
            _trace_examples_step,
            order=11,
        ),
    ]


def register(commands: Any) -> None:
    """Add `verify`."""
    verify = commands.add_parser(
        "verify", help="run the whole kit (spec, models, reference, conformance, Spark) and summarise"
    )
    verify.add_argument("--skip", action="append", default=[], metavar="STEP", help="skip a step by name (repeatable)")
    verify.set_defaults(handler=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    """Run each step, print a summary table, exit 1 if any step failed."""
    from ks_spec.java import require_java

    selected = [step for step in steps() if step.name not in args.skip]
    if any(step.needs_java for step in selected):
        require_java()
    rows = []
    failed = 0
    for step in selected:
        console.print(f"[bold]-> {step.name}[/bold]: {step.shows}")
        started = time.perf_counter()
        try:
            result = step.run(args)
        except Exception as error:  # a crash in a step is a failed step, reported, not a traceback
            result = StepResult(False, f"crashed: {type(error).__name__}: {error}")
        elapsed = time.perf_counter() - started
        failed += 0 if result.ok else 1
        status = "[green]pass[/green]" if result.ok else "[red]FAIL[/red]"
        rows.append((step.name, status, f"{elapsed:.1f}s", result.summary))
    console.print(table("keyshared verify", ("step", "result", "time", "summary"), rows))
    if failed:
        console.print(f"[red]{failed} of {len(rows)} steps failed[/red]")
        return 1
    console.print(f"[green]all {len(rows)} steps passed[/green]")
    return 0
