"""`keyshared verify`: the main job. By default the quick job: every part of the kit exercised once, in a couple of
minutes (each step with small parameters); `--full` runs every step at its full size, the maintainers' whole
self-check (half an hour or more). Either way it prints what each step ran and showed, and a summary table."""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keyshared.ui import console, table

PARTS = ("spec", "models", "reference", "conformance", "trace", "example adapter")
"""The parts of the kit a step can belong to; the quick job runs at least one step of each."""

Run = Callable[[argparse.Namespace], "StepResult"]


@dataclass(frozen=True)
class StepResult:
    """The outcome of one verification step."""

    ok: bool
    summary: str


@dataclass(frozen=True)
class Quick:
    """How the quick job runs a step: the full step's function with smaller parameters (`run`, usually a
    functools.partial of it), or the full step as it is when both fields are left None (it is quick already)."""

    run: Run | None = None
    shows: str | None = None
    """What the quick variant shows, when it shows less than the full step."""


@dataclass(frozen=True)
class Step:
    """One part of `keyshared verify`: a name, what it shows, how to run it, and its quick variant if it has one.

    `part` is one of PARTS. `quick` None means only `--full` runs it. `order` places it among the steps of other
    parts (spec 10, models 20, reference 30, conformance 40, example adapter 45, Spark 50).
    """

    name: str
    shows: str
    run: Run
    part: str
    quick: Quick | None = None
    needs_java: bool = False
    order: int = 50

    def __post_init__(self) -> None:
        if self.part not in PARTS:
            raise ValueError(f"step {self.name!r}: part {self.part!r} is not one of {PARTS}")

    @property
    def in_quick_job(self) -> bool:
        """True if the quick job (`keyshared verify` without --full) runs this step."""
        return self.quick is not None

    def variant(self, full: bool) -> tuple[str, Run]:
        """What the step shows and the function to call, in the full job or in the quick one."""
        if full or self.quick is None:
            return self.shows, self.run
        return self.quick.shows or self.shows, self.quick.run or self.run


def _spec_step(args: argparse.Namespace) -> StepResult:
    from ks_spec.requirements import check_spec

    from keyshared.cmd_spec import stale_tables

    requirements, problems = check_spec()
    problems += stale_tables()
    if problems:
        return StepResult(False, f"{len(problems)} problems, first: {problems[0]}")
    return StepResult(True, f"{len(requirements)} requirements; IDs unique, citations defined, index and tables fresh")


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


def job(full: bool) -> list[Step]:
    """The steps of the full job, or of the quick one."""
    return [step for step in steps() if full or step.in_quick_job]


def _spec_steps() -> list[Step]:
    return [
        Step(
            "spec",
            "the spec's requirements are well formed, cited IDs exist, index fresh",
            _spec_step,
            part="spec",
            quick=Quick(),
            order=10,
        ),
        Step(
            "trace format",
            "sample traces validate; malformed ones are rejected with file, line and field",
            _trace_examples_step,
            part="spec",
            quick=Quick(),
            order=11,
        ),
    ]


DESCRIPTION = """\
Without options: the quick job, a couple of minutes on two cores. Every part of the kit (spec, models,
reference, conformance, trace, example adapter) is exercised once, each step with small parameters: one
passing TLC configuration and one broken variant, a short conformance run of the reference, a reference trace
and its fault-injected twin judged by both check-trace and Spark's validate-replay, the example adapter's smoke
test and a short run. With --full: every step at its full size (the quick tier of the models, the model
mutation score, the ci conformance profile over both transports and the presets, CrossHair, the Spark
dispatcher): the maintainers' whole self-check, half an hour or more. --list shows each step, its part, and
whether the quick job runs it. Exit 0 if every step passed, 1 if any failed."""


def register(commands: Any) -> None:
    """Add `verify`."""
    verify = commands.add_parser(
        "verify",
        help="the main job: every part of the kit once, quickly (--full: the whole self-check); a summary table",
        description=DESCRIPTION,
    )
    verify.add_argument(
        "--full", action="store_true", help="run every step at its full size (make verify-all; half an hour or more)"
    )
    verify.add_argument("--skip", action="append", default=[], metavar="STEP", help="skip a step by name (repeatable)")
    verify.add_argument("--list", action="store_true", help="list the steps: part, quick job or --full only, shows")
    verify.set_defaults(handler=run_verify)


def _list_steps() -> int:
    rows = [
        (step.name, step.part, "quick and full" if step.in_quick_job else "--full only", step.variant(False)[0])
        for step in steps()
    ]
    console.print(table("keyshared verify --list", ("step", "part", "runs in", "shows (quick job)"), rows))
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Run each step of the job, saying what it ran and showed; print a summary table; exit 1 if any step failed."""
    from ks_spec.errors import UserError
    from ks_spec.java import require_java
    from rich.markup import escape

    if getattr(args, "list", False):
        return _list_steps()
    full = bool(getattr(args, "full", False))
    every = steps()
    unknown = sorted(set(args.skip) - {step.name for step in every})
    if unknown:
        raise UserError(f"--skip {unknown[0]!r}: no such step (keyshared verify --list names them)", exit_code=64)
    chosen = [step for step in every if full or step.in_quick_job]
    selected = [step for step in chosen if step.name not in args.skip]
    if any(step.needs_java for step in selected):
        require_java()
    mode = "full" if full else "quick"
    console.print(f"[bold]keyshared verify ({mode} job)[/bold]: {len(selected)} steps", soft_wrap=True)
    rows = []
    failed = 0
    began = time.perf_counter()
    for step in selected:
        shows, run = step.variant(full)
        console.print(f"[bold]-> {escape(step.name)}[/bold] ({step.part}): {escape(shows)}", soft_wrap=True)
        started = time.perf_counter()
        try:
            result = run(args)
        except Exception as error:  # a crash in a step is a failed step, reported, not a traceback
            result = StepResult(False, f"crashed: {type(error).__name__}: {error}")
        elapsed = time.perf_counter() - started
        failed += 0 if result.ok else 1
        status = "[green]pass[/green]" if result.ok else "[red]FAIL[/red]"
        console.print(f"   {status} in {elapsed:.1f}s: {escape(result.summary)}", soft_wrap=True)
        rows.append((escape(step.name), step.part, status, f"{elapsed:.1f}s", escape(result.summary)))
    took = time.perf_counter() - began
    console.print(table(f"keyshared verify ({mode} job)", ("step", "part", "result", "time", "summary"), rows))
    skipped = [step.name for step in chosen if step.name in args.skip]
    if skipped:
        console.print(f"skipped (--skip): {escape(', '.join(skipped))}", soft_wrap=True)
    if not full:
        rest = [step.name for step in every if not step.in_quick_job]
        console.print(f"only in --full: {escape(', '.join(rest))} (make verify-all)", soft_wrap=True)
    if failed:
        console.print(f"[red]{failed} of {len(rows)} steps failed[/red] ({took:.0f} s)")
        return 1
    console.print(f"[green]all {len(rows)} steps passed[/green] ({took:.0f} s)")
    return 0
