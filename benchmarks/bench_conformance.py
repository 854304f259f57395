"""Benchmarks of the conformance suite: examples per second, and how fast each mutant is caught.

1. The `ci` profile against the reference, in process and over stdio, one run per seed: examples, steps,
   seconds, examples/s and steps/s (medians over the seeds), and the stdio/in-process ratio.
2. Every mutant of tests/conformance_mutants, one `ci` run per seed: the wall time from the start of
   `run_suite` to the first finding on a requirement the mutant must be caught on (its `warns` if it has
   no `catches`); the run stops there. Median over seeds, a seed that never caught it counting as
   infinitely slow. Two worker processes share the mutants, as in tests/test_conformance_mutants.py.
3. Every double mutant (a cheap bug with a deep one), one whole `ci` run per seed: the wall time to the last
   finding and the requirements found; with `--thorough`, also a `thorough` run of the same seed and the
   ci/thorough ratio (requirements the `ci` run found among those the thorough run found).
4. `--only procrastinate`: the procrastinate adapter (conformance/adapters/procrastinate) on a private
   PostgreSQL cluster this script starts and stops: one whole `ci` run per seed, the time to its last
   finding, and with `--thorough` a `thorough` run per seed and the ci/thorough ratio.
Run `python -m benchmarks.bench_conformance` (minutes); `--quick` checks the script in well under one.
"""

from __future__ import annotations

import argparse
import datetime
import math
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import readme
from benchmarks.host import machine

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
QUICK_MUTANTS = ("newest_first", "no_draining", "stale_ack_accepted", "lenient_config")
"""`--quick`: a few mutants, among them one caught by the configuration probes (not by a round)."""
NOT_A_ROUND = {"config-accepted"}
"""Anomalies only the configuration probes report: made before the first round, so no `on_finding` call."""


@dataclass(frozen=True)
class ReferenceRun:
    """One `ci` run against the reference: how much the suite did, and how long it took."""

    transport: str
    seed: int
    examples: int
    steps: int
    seconds: float
    verdict: str
    why: str = ""
    """Unless conformant: the failed or vacuous MUST requirements and the adapter faults."""


@dataclass(frozen=True)
class Catch:
    """One `ci` run against a mutant: seconds to the first finding on its requirements, None if never."""

    mutant: str
    seed: int
    seconds: float | None
    requirements: tuple[str, ...]
    """The target requirements that first finding named."""
    run_seconds: float
    """How long the run went on: `seconds` when caught, the whole run when not."""
    faults: int = 0
    error: str = ""


class _Caught(Exception):
    """Raised from `on_finding` to end a run at its first finding on a target requirement."""

    def __init__(self, seconds: float, requirements: tuple[str, ...]) -> None:
        super().__init__(f"caught after {seconds:.3f} s on {', '.join(requirements)}")
        self.seconds, self.requirements = seconds, requirements


def use_tests_folder(path: Sequence[str] = ()) -> None:
    """Make `conformance_mutants` importable (pytest does it through pyproject; a script must do it itself)."""
    for entry in [str(TESTS), *path]:
        if entry not in sys.path:
            sys.path.append(entry)


def reference_run(transport: str, seed: int) -> ReferenceRun:
    """The `ci` profile against the reference over one transport (`in-process` or `stdio`)."""
    from ks_conformance.adapters import connect, stdio_command
    from ks_conformance.results import settings_for
    from ks_conformance.suite import run_suite

    adapter = "reference" if transport == "in-process" else stdio_command("reference")
    started = time.perf_counter()
    result = run_suite(lambda: connect(adapter), settings_for("ci", seed))
    elapsed = time.perf_counter() - started
    why = [f"{r['id']} {r['status']}" for r in result.requirements if r["status"] in ("failed", "vacuous")]
    why += [f"fault {fault.kind}: {fault.message}" for fault, _ in result.faults]
    return ReferenceRun(transport, seed, result.examples, result.steps, elapsed, result.verdict, "; ".join(why))


def targets_of(name: str) -> frozenset[str]:
    """The requirements whose first finding counts as catching the mutant: `catches`, else `warns`."""
    from conformance_mutants import BY_NAME

    mutant = BY_NAME[name]
    return mutant.catches or mutant.warns


def catch_time(name: str, seed: int) -> Catch:
    """Run the `ci` profile against mutant `name` until its first finding on a target requirement."""
    from conformance_mutants import BY_NAME
    from ks_conformance.protocol import InProcessConnection
    from ks_conformance.results import Finding, settings_for
    from ks_conformance.suite import run_suite

    mutant = BY_NAME[name]
    targets = targets_of(name)
    adapter = f"py:conformance_mutants:{name}"
    first_round: list[float] = []

    def progress(message: str) -> None:
        if not first_round:  # the configuration probes are over when the first round starts
            first_round.append(time.perf_counter() - started)

    def on_finding(finding: Finding) -> None:
        hit = tuple(sorted({a.requirement for a in finding.anomalies} & targets))
        if hit:
            raise _Caught(time.perf_counter() - started, hit)

    started = time.perf_counter()
    try:
        result = run_suite(
            lambda: InProcessConnection(mutant.create(), adapter),
            settings_for("ci", seed),
            on_progress=progress,
            on_finding=on_finding,
        )
    except _Caught as caught:
        return Catch(name, seed, caught.seconds, caught.requirements, caught.seconds)
    except Exception as error:  # an adapter that does not start: reported, not fatal to the benchmark
        return Catch(name, seed, None, (), time.perf_counter() - started, error=f"{type(error).__name__}: {error}")
    elapsed = time.perf_counter() - started
    # A target finding that reached no `on_finding`: a configuration probe (over when the first round
    # started) or a determinism replay (the last thing a run does).
    for finding in result.findings:
        hit = tuple(sorted({a.requirement for a in finding.anomalies} & targets))
        if hit:
            probe = {a.name for a in finding.anomalies} <= NOT_A_ROUND
            seconds = first_round[0] if probe and first_round else elapsed
            return Catch(name, seed, seconds, hit, elapsed, len(result.faults))
    return Catch(name, seed, None, (), elapsed, len(result.faults))


@dataclass(frozen=True)
class WholeRun:
    """One whole run against a double mutant: the requirements found and when the last one was found."""

    mutant: str
    seed: int
    profile: str
    found: frozenset[str]
    last_finding: float
    seconds: float
    must: frozenset[str]


def whole_run(name: str, seed: int, profile: str) -> WholeRun:
    """Run `profile` to the end against mutant `name`; the time of the last finding, from the run's start."""
    from conformance_mutants import BY_NAME
    from ks_conformance.protocol import InProcessConnection

    mutant = BY_NAME[name]
    return timed_run(
        name, lambda: InProcessConnection(mutant.create(), name), seed, profile, mutant.catches | mutant.warns
    )


def timed_run(name: str, connect: Callable[[], Any], seed: int, profile: str, must: frozenset[str]) -> WholeRun:
    """Run `profile` to the end against an adapter; the time of the last finding, from the run's start."""
    from ks_conformance.results import Finding, settings_for
    from ks_conformance.suite import run_suite

    last = [0.0]

    def on_finding(finding: Finding) -> None:
        last[0] = time.perf_counter() - started

    started = time.perf_counter()
    result = run_suite(connect, settings_for(profile, seed), on_finding=on_finding)
    elapsed = time.perf_counter() - started
    if any(not f.shrunk for f in result.findings):  # kinds added at the end of the run, unshrunk
        last[0] = elapsed
    found = frozenset(r["id"] for r in result.requirements if r["status"] in ("failed", "warning"))
    return WholeRun(name, seed, profile, found, last[0], elapsed, must)


PROCRASTINATE = ROOT / "conformance" / "adapters" / "procrastinate"


def run_procrastinate(seeds: Sequence[int], thorough: bool, log: Callable[[str], None]) -> list[WholeRun]:
    """Whole runs against the procrastinate adapter on a private PostgreSQL cluster (started and stopped here)."""
    from ks_conformance.stdio import StdioConnection

    state = tempfile.mkdtemp(prefix="ks-bench-pg-")
    environment = {**os.environ, "KS_PG_STATE": state}
    script = str(PROCRASTINATE / "postgres.sh")
    started = subprocess.run([script, "start"], capture_output=True, text=True, env=environment, check=False)
    if started.returncode != 0:
        raise SystemExit(f"bench_conformance: cannot start PostgreSQL: {started.stderr.strip() or started.stdout}")
    dsn = started.stdout.strip().splitlines()[-1]
    command = f"{sys.executable} {PROCRASTINATE / 'adapter.py'} --dsn {dsn}"
    runs: list[WholeRun] = []
    try:
        for seed in seeds:
            for profile in ("ci", "thorough") if thorough else ("ci",):
                run = timed_run(
                    "procrastinate",
                    lambda: StdioConnection(command, adapter="procrastinate"),
                    seed,
                    profile,
                    frozenset(),
                )
                runs.append(run)
                log(
                    f"procrastinate seed {seed} {profile}: last finding {run.last_finding:.1f} s of {run.seconds:.1f} s"
                )
    finally:
        subprocess.run([script, "stop"], capture_output=True, env=environment, check=False)
    return runs


def doubles_table(runs: Sequence[WholeRun]) -> Table:
    """Per double mutant and seed: ci's time to the last finding, what it missed, and the ratio to thorough."""
    table = Table(title="double mutants: one whole ci run (and a thorough run with --thorough)")
    for header in ("mutant", "seed", "ci last finding s", "ci run s", "ci found", "missed (must)", "ci/thorough"):
        table.add_column(header, justify="left" if header in ("mutant", "ci found", "missed (must)") else "right")
    for run in sorted((r for r in runs if r.profile == "ci"), key=lambda r: (r.mutant, r.seed)):
        thorough = next(
            (r for r in runs if r.profile == "thorough" and (r.mutant, r.seed) == (run.mutant, run.seed)), None
        )
        ratio = "-"
        if thorough is not None and thorough.found:
            ratio = f"{len(run.found & thorough.found)}/{len(thorough.found)}"
        table.add_row(
            run.mutant,
            str(run.seed),
            f"{run.last_finding:.1f}",
            f"{run.seconds:.1f}",
            " ".join(sorted(run.found)),
            " ".join(sorted(run.must - run.found)) or "none",
            ratio,
        )
    return table


def run_doubles(seeds: int, workers: int, thorough: bool, log: Callable[[str], None]) -> list[WholeRun]:
    """Every double mutant and seed, ci (and thorough), `workers` at a time in spawned processes."""
    use_tests_folder()
    from conformance_mutants import DOUBLE_MUTANTS

    profiles = ("ci", "thorough") if thorough else ("ci",)
    jobs = [(m.name, seed, p) for m in DOUBLE_MUTANTS for seed in range(seeds) for p in profiles]
    context = multiprocessing.get_context("spawn")
    runs: list[WholeRun] = []
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=use_tests_folder, initargs=(sys.path,)
    ) as pool:
        futures = [pool.submit(whole_run, *job) for job in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            run = future.result()
            runs.append(run)
            log(
                f"[{done}/{len(jobs)}] {run.mutant} seed {run.seed} {run.profile}: "
                f"last finding {run.last_finding:.1f} s"
            )
    return runs


def select_mutants(names: str | None, quick: bool = False) -> list[str]:
    """The mutants to run, in MUTANTS order: all, the `--quick` few, or a comma-separated list (checked)."""
    use_tests_folder()
    from conformance_mutants import MUTANTS

    known = [m.name for m in MUTANTS]
    if names is None:
        return [n for n in known if n in QUICK_MUTANTS] if quick else known
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown mutant(s): {', '.join(unknown)}; known mutants: {', '.join(known)}")
    if not wanted:
        raise ValueError("--mutants: no mutant named")
    return [n for n in known if n in wanted]


def run_catches(names: Iterable[str], seeds: int, workers: int, log: Callable[[str], None]) -> list[Catch]:
    """Every (mutant, seed) run, `workers` at a time in spawned processes."""
    jobs = [(name, seed) for name in names for seed in range(seeds)]
    context = multiprocessing.get_context("spawn")
    catches: list[Catch] = []
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=use_tests_folder, initargs=(sys.path,)
    ) as pool:
        futures: list[Future[Catch]] = [pool.submit(catch_time, name, seed) for name, seed in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            catch = future.result()
            catches.append(catch)
            what = (
                f"caught in {catch.seconds:.2f} s on {', '.join(catch.requirements)}"
                if catch.seconds is not None
                else f"NOT caught (run of {catch.run_seconds:.1f} s){' ' + catch.error if catch.error else ''}"
            )
            log(f"[{done}/{len(jobs)}] {catch.mutant} seed {catch.seed}: {what}")
    return catches


def median_seconds(catches: Sequence[Catch]) -> float:
    """Median time to catch over seeds; a seed that never caught the mutant counts as infinitely slow."""
    return statistics.median(c.seconds if c.seconds is not None else math.inf for c in catches)


def _seconds(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.2f}"


def reference_table(runs: Sequence[ReferenceRun]) -> Table:
    """Medians over seeds per transport, and each transport's examples/s as a ratio to in process."""
    seeds = len(runs) // 2
    table = Table(title=f"ci profile against the reference, median of {seeds} seed{'s' if seeds > 1 else ''}")
    for header in ("transport", "examples", "steps", "seconds", "examples/s", "steps/s", "ratio to in-process"):
        table.add_column(header, justify="left" if header == "transport" else "right")
    rates: dict[str, float] = {}
    for transport in ("in-process", "stdio"):
        mine = [r for r in runs if r.transport == transport]
        rates[transport] = statistics.median(r.examples / r.seconds for r in mine)
        table.add_row(
            transport,
            f"{statistics.median(r.examples for r in mine):,.0f}",
            f"{statistics.median(r.steps for r in mine):,.0f}",
            f"{statistics.median(r.seconds for r in mine):.2f}",
            f"{rates[transport]:,.1f}",
            f"{statistics.median(r.steps / r.seconds for r in mine):,.0f}",
            f"{rates[transport] / rates['in-process']:.2f}",
        )
    return table


def catch_table(catches: Sequence[Catch], seeds: int) -> tuple[Table, str]:
    """Per mutant, fastest first: median seconds to catch, seeds that caught it, each seed's time; and a summary."""
    by_mutant: dict[str, list[Catch]] = {}
    for catch in catches:
        by_mutant.setdefault(catch.mutant, []).append(catch)
    medians = {name: median_seconds(mine) for name, mine in by_mutant.items()}
    table = Table(title=f"seconds to catch each mutant, ci profile, {seeds} seed{'s' if seeds > 1 else ''}")
    for header in ("mutant", "caught on", "median s", "seeds that caught it", "per seed"):
        table.add_column(header, justify="left" if header in ("mutant", "caught on") else "right")
    for name in sorted(medians, key=lambda n: (medians[n], n)):
        mine = sorted(by_mutant[name], key=lambda c: c.seed)
        caught = [c for c in mine if c.seconds is not None]
        table.add_row(
            name,
            " ".join(sorted(targets_of(name))),
            _seconds(medians[name]),
            f"{len(caught)}/{len(mine)}",
            " ".join(_seconds(c.seconds if c.seconds is not None else math.inf) for c in mine),
        )
    slowest = max(medians, key=lambda n: (medians[n], n))
    every_seed = sum(all(c.seconds is not None for c in mine) for mine in by_mutant.values())
    summary = (
        f"{len(medians)} mutants: median time to catch {_seconds(statistics.median(medians.values()))} s "
        f"(median of the per-mutant medians); slowest {slowest} ({_seconds(medians[slowest])} s); "
        f"caught by every seed: {every_seed}/{len(medians)}"
    )
    return table, summary


def main() -> None:
    """Parse the options, run the reference figures, then the mutants, and print both tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, help="seeds per figure; medians are printed (default 3, --quick 1)")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="procrastinate: start at this seed (to split a --thorough run)"
    )
    parser.add_argument("--mutants", help="comma-separated mutant names to run (default every mutant)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes for the mutants (default 2)")
    parser.add_argument("--quick", action="store_true", help="1 seed and a handful of mutants: checks the script")
    parser.add_argument(
        "--only", choices=("reference", "mutants", "doubles", "procrastinate"), help="run one part only"
    )
    parser.add_argument(
        "--thorough", action="store_true", help="doubles, procrastinate: also a thorough run per seed (slow)"
    )
    parser.add_argument(readme.FLAG, action="store_true", help=readme.HELP)
    args = parser.parse_args()
    # A kill (SIGTERM) unwinds like Ctrl-C, so that the PostgreSQL cluster of the procrastinate part is stopped.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    seeds = args.seeds if args.seeds is not None else 1 if args.quick else 3
    if seeds < 1 or args.workers < 1 or args.first_seed < 0:
        parser.error("--seeds and --workers must be at least 1, --first-seed at least 0")
    try:
        names = select_mutants(args.mutants, args.quick)
    except ValueError as error:
        parser.error(str(error))
    section = f"bench_conformance.{args.only}" if args.only else "bench_conformance"
    readme.record(args.write_readme, section, quick=args.quick)
    console = Console(width=None if sys.stdout.isatty() else 140)
    errors = Console(stderr=True)
    started = time.perf_counter()
    console.print(f"machine: {machine()}")
    console.print(f"date: {datetime.date.today().isoformat()}")
    if args.only == "procrastinate":
        chosen = range(args.first_seed, args.first_seed + seeds)
        whole = run_procrastinate(chosen, args.thorough, lambda line: errors.print(line, highlight=False))
        table = doubles_table(whole)
        table.title = "procrastinate adapter: one whole ci run per seed (and a thorough run with --thorough)"
        console.print(table)
        console.print(f"wall time: {time.perf_counter() - started:.0f} s")
        return
    if args.only not in ("mutants", "doubles"):
        runs = [reference_run(transport, seed) for seed in range(seeds) for transport in ("in-process", "stdio")]
        console.print(reference_table(runs))
        for run in runs:
            if run.verdict != "conformant":
                line = f"reference, {run.transport}, seed {run.seed}: {run.verdict} ({run.why})"
                console.print(line, highlight=False)
    if args.only in (None, "doubles") and not args.quick:
        doubles = run_doubles(seeds, args.workers, args.thorough, lambda line: errors.print(line, highlight=False))
        console.print(doubles_table(doubles))
        slowest = max(doubles, key=lambda r: r.last_finding if r.profile == "ci" else 0.0)
        console.print(f"ci: slowest last finding {slowest.last_finding:.1f} s ({slowest.mutant}, seed {slowest.seed})")
    if args.only in (None, "mutants"):
        catches = run_catches(names, seeds, args.workers, lambda line: errors.print(line, highlight=False))
        table, summary = catch_table(catches, seeds)
        console.print(table)
        console.print(summary, soft_wrap=True)
        for catch in catches:
            if catch.faults or catch.error:
                console.print(f"{catch.mutant} seed {catch.seed}: {catch.faults} adapter faults {catch.error}".rstrip())
    console.print(f"wall time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    readme.run(main)
