"""The conformance kit's steps of `keyshared verify` (order 40): the suite against the reference, both transports, and
the seed presets. The quick job runs the in-process step with a small budget (QUICK_BUDGET)."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from keyshared.cmd_verify import Quick, Step, StepResult

VERIFY_SEED = 0
QUICK_BUDGET = {"max_examples": 20, "examples_total": 0, "rounds": 1}
"""The quick job's run: 20 examples per stratum, one round (and the coverage rounds a MUST requirement may need),
instead of the ci profile's 210 examples over up to three rounds. 12 were enough until the reference declared the
zombie ops and the heartbeat options: KS-POI-4 then stayed vacuous."""
_results: dict[str, Any] = {}
"""The in-process run, kept so that the stdio step can compare its verdicts with it."""


def _run(adapter: str, budget: dict[str, int] | None = None) -> Any:
    """The suite's ci profile (with `budget` overriding its settings) against the adapter."""
    from ks_conformance.adapters import connect
    from ks_conformance.results import settings_for
    from ks_conformance.suite import run_suite

    return run_suite(lambda: connect(adapter), settings_for("ci", VERIFY_SEED, **(budget or {})))


def _summary(result: Any) -> str:
    counts: dict[str, int] = {}
    for line in result.requirements:
        counts[line["status"]] = counts.get(line["status"], 0) + 1
    shown = ", ".join(f"{counts[s]} {s}" for s in ("passed", "skipped", "untested", "vacuous", "failed") if s in counts)
    return f"{result.verdict}: {shown}; {result.examples} examples, {result.steps} steps in {result.duration:.0f} s"


def _problem(result: Any) -> str | None:
    if result.faults:
        return f"adapter fault: {result.faults[0][0].message}"
    if result.verdict != "conformant":
        failed = [line["id"] for line in result.requirements if line["status"] in ("failed", "vacuous")]
        first = result.anomalies[0].explanation.text() if result.anomalies else ""
        return f"{result.verdict} ({', '.join(failed)}) {first}".strip()
    return None


def _in_process(args: argparse.Namespace, budget: dict[str, int] | None = None) -> StepResult:
    result = _run("reference", budget)
    _results["in-process"] = result
    problem = _problem(result)
    return StepResult(problem is None, problem or _summary(result))


def _stdio(args: argparse.Namespace) -> StepResult:
    from ks_conformance.adapters import stdio_command

    result = _run(stdio_command("reference"))
    problem = _problem(result)
    if problem is not None:
        return StepResult(False, problem)
    local = _results.get("in-process")
    if local is None:
        return StepResult(True, _summary(result) + " (no in-process run to compare with)")
    statuses = {line["id"]: line["status"] for line in result.requirements}
    differ = sorted(line["id"] for line in local.requirements if statuses.get(line["id"]) != line["status"])
    if local.verdict != result.verdict or differ:
        return StepResult(False, f"the transports disagree: {local.verdict} vs {result.verdict}; on {differ[:5]}")
    return StepResult(True, _summary(result) + "; the same verdict on every requirement as in process")


def steps() -> list[Step]:
    """The suite's `ci` profile against the reference, in process and over the stdio protocol, and its presets."""
    return [
        Step(
            "conformance (in-process)",
            "the reference is conformant to the ci profile",
            _in_process,
            part="conformance",
            quick=Quick(
                partial(_in_process, budget=QUICK_BUDGET),
                "a short run of the suite (20 examples per stratum, one round) finds the reference conformant",
            ),
            order=40,
        ),
        Step(
            "conformance (stdio)",
            "served over JSON lines, the reference gets the same verdict on every requirement",
            _stdio,
            part="conformance",
            order=41,
        ),
        Step(
            "conformance (seed presets)",
            "pulsar-379, danube and pip-486 are conformant; danube-at-most-once shows exactly Danube's admitted loss, "
            "classic-pulsar the blocking PIP-379 lists against classic Key_Shared",
            _presets,
            part="conformance",
            order=42,
        ),
    ]


def _presets(args: argparse.Namespace) -> StepResult:
    """Each seed-faithful preset gets the verdict its seed's design calls for (reference/ks_reference/presets.py)."""
    from ks_reference.presets import PRESETS

    said: list[str] = []
    for name, preset in PRESETS.items():
        result = _run(f"py:ks_reference.presets:{name.replace('-', '_')}")
        failed = {line["id"] for line in result.requirements if line["status"] == "failed"}
        if result.faults:
            return StepResult(False, f"{name}: adapter fault: {result.faults[0][0].message}")
        if preset.expected:
            if not set(preset.expected) <= failed <= set(preset.expected) | set(preset.consequences):
                return StepResult(False, f"{name}: expected {sorted(preset.expected)} failed, got {sorted(failed)}")
            said.append(f"{name} finds {', '.join(sorted(failed))} as documented")
        elif result.verdict != "conformant":
            return StepResult(False, f"{name}: {_problem(result)}")
        else:
            said.append(f"{name} conformant")
    return StepResult(True, "; ".join(said))
