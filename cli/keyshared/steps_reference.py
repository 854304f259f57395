"""The reference dispatcher's steps of `keyshared verify` (order 30)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from keyshared.cmd_verify import Quick, Step, StepResult

COMPAT_FACTS = [
    # (what, computed by, expected) from Pulsar's documentation and Danube's sources
    ("murmur3('Order-3459134')", "murmur3", 3112179635),
    ("Pulsar slot of 'Order-3459134' in [0, 65535]", "range_slot", 6067),
    ("Pulsar consistent-hashing slot of 'Order-3459134'", "consistent_slot", 20788),
    ("Danube h('')", "danube", 3323002737),
    ("Danube h('order-123')", "danube", 3430057601),
]
VERIFY_MESSAGES = 400


def _compat(args: argparse.Namespace) -> StepResult:
    from ks_reference.hashing import danube_hash, murmur3_32, pulsar_consistent_slot, pulsar_range_slot
    from ks_reference.selectors import PulsarAutoSplitSelector

    functions = {
        "murmur3": murmur3_32,
        "range_slot": pulsar_range_slot,
        "consistent_slot": pulsar_consistent_slot,
        "danube": danube_hash,
    }
    for what, function, expected in COMPAT_FACTS:
        key = what.split("'")[1]
        got = functions[function](key)
        if got != expected:
            return StepResult(False, f"{what} is {got}, expected {expected}")
    selector = PulsarAutoSplitSelector()
    selector.add("a")
    selector.add("b")
    if selector.target("Order-3459134") != "b":
        return StepResult(False, "pulsar-auto-split with members a, b does not route Order-3459134 to b")
    return StepResult(True, f"{len(COMPAT_FACTS) + 1} published Pulsar and Danube values reproduced")


def _workloads(args: argparse.Namespace) -> StepResult:
    import tempfile
    from pathlib import Path

    from ks_reference.store import SqliteStore
    from ks_reference.workloads import NAMED_WORKLOADS, run_named
    from ks_spec.trace import SequenceRules, schema_problem

    checker_of: Callable[[list[dict[str, Any]]], Any] | None
    try:
        checker_of = importlib.import_module("ks_conformance.checker").check_events
    except ImportError:  # the kit's checker is optional here; the format is always checked
        checker_of = None
    judged = 0
    events_total = 0
    with tempfile.TemporaryDirectory(prefix="ks-verify-") as folder:
        for name in NAMED_WORKLOADS:
            store = SqliteStore(Path(folder) / f"{name}.sqlite")
            try:
                simulation = run_named(name, VERIFY_MESSAGES, store=store)
            finally:
                store.close()
            rules = SequenceRules()
            for event in simulation.events:
                problem = schema_problem(event) or rules.check(event)
                if problem:
                    return StepResult(False, f"{name}: seq {event['seq']}: {problem}")
            if not simulation.summary.quiescent:
                return StepResult(False, f"{name}: the run did not reach quiescence")
            events_total += len(simulation.events)
            if checker_of is not None:
                checker = checker_of(simulation.events)
                if checker.anomalies or checker.problems:
                    first = checker.anomalies[0].name if checker.anomalies else checker.problems[0]
                    return StepResult(False, f"{name}: the kit's checker finds {first} (spec/checking.md decides)")
                judged += 1
    verdict = ", all valid by the kit's checker" if judged else " (the kit's checker is not installed)"
    return StepResult(
        True, f"{len(NAMED_WORKLOADS)} named workloads, {events_total:,} events, well formed and quiescent{verdict}"
    )


def _contracts(args: argparse.Namespace) -> StepResult:
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    crosshair = Path(sys.executable).parent / "crosshair"
    program = str(crosshair) if crosshair.exists() else shutil.which("crosshair")
    if program is None:
        return StepResult(False, "crosshair is not installed (make installs it with the dev extra)")
    targets = ["ks_reference.hashing", "ks_reference.cursor", "ks_reference.filters", "ks_reference.retries"]
    targets += ["ks_reference.selectors.ring_successor", "ks_reference.selectors.merge_ranges"]
    completed = subprocess.run(
        [program, "check", "--analysis_kind=PEP316", "--per_condition_timeout=1", *targets],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        first = (completed.stdout or completed.stderr).strip().splitlines()[:1]
        return StepResult(False, f"counterexample: {first[0] if first else completed.returncode}")
    return StepResult(True, "cursor advance, glob, slot and bucket arithmetic, ring lookup: no counterexample")


def steps() -> list[Step]:
    """The reference's steps: compatibility facts, every named workload (both quick already), the helpers' contracts
    (CrossHair: --full only)."""
    return [
        Step(
            "reference compat",
            "the selectors reproduce Pulsar's and Danube's published values",
            _compat,
            part="reference",
            quick=Quick(),
            order=30,
        ),
        Step(
            "reference workloads",
            "every named workload runs to quiescence and writes a well-formed, valid trace",
            _workloads,
            part="reference",
            quick=Quick(),
            order=31,
        ),
        Step(
            "reference contracts",
            "CrossHair finds no counterexample to the pure helpers' contracts",
            _contracts,
            part="reference",
            order=32,
        ),
    ]
