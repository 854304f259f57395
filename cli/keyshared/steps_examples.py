"""The example adapter's step of `keyshared verify` (order 45): examples/toy_adapter.py, a dispatcher written outside
the kit and served over stdio, gets what `keyshared conformance smoke` and `conformance run --adapter cmd:...` give
it: the smoke script, then the suite (the quick job: the in-process step's small budget)."""

from __future__ import annotations

import argparse
import shlex
import sys
from functools import partial
from pathlib import Path

from keyshared.cmd_verify import Quick, Step, StepResult
from keyshared.steps_conformance import QUICK_BUDGET, _problem, _run, _summary

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path("examples") / "toy_adapter.py"
"""The example adapter, relative to the repository root."""


def _example_adapter(args: argparse.Namespace, budget: dict[str, int] | None = None) -> StepResult:
    """Smoke the example adapter over stdio (this Python runs it), then run the suite's ci profile against it (with
    `budget` overriding its settings): it must answer every smoke request correctly and be conformant."""
    from ks_conformance.adapters import connect
    from ks_conformance.protocol import StartFailed
    from ks_conformance.smoke import smoke

    path = ROOT / EXAMPLE
    if not path.is_file():
        return StepResult(False, f"{EXAMPLE} does not exist: there is no example adapter to smoke and run")
    adapter = "cmd:" + shlex.join([sys.executable, str(path)])
    try:
        smoked = smoke(connect(adapter))
    except StartFailed as error:
        return StepResult(False, f"{EXAMPLE} did not start: {error}")
    if not smoked.ok:
        wrong = smoked.fault.message if smoked.fault else smoked.anomalies[0].explanation.text()
        return StepResult(False, f"smoke failed after {len(smoked.exchanges)} requests: {wrong}")
    name = smoked.info.implementation.get("name", "?") if smoked.info else "?"
    said = f"smoke: {name} answered {len(smoked.exchanges)} requests correctly"
    result = _run(adapter, budget)
    problem = _problem(result)
    if problem is not None:
        return StepResult(False, f"{said}; the run: {problem}")
    return StepResult(True, f"{said}; the run over stdio: {_summary(result)}")


def steps() -> list[Step]:
    """The example adapter's step: after the conformance kit (40), before Spark (50)."""
    command = f'cmd:"python {EXAMPLE}"'
    return [
        Step(
            "example adapter",
            f"{EXAMPLE} passes `conformance smoke --adapter {command}` and is conformant to the ci profile over stdio",
            _example_adapter,
            part="example adapter",
            quick=Quick(
                partial(_example_adapter, budget=QUICK_BUDGET),
                f"{EXAMPLE} passes `conformance smoke --adapter {command}` and a short run over stdio (12 examples "
                "per stratum, one round) finds it conformant",
            ),
            order=45,
        )
    ]
