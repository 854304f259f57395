"""Run the conformance suite against one mutant and replay what it found: what the mutant tests assert on.

A plain function of picklable arguments, so that the tests can judge mutants in worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ks_conformance.protocol import InProcessConnection
from ks_conformance.results import settings_for
from ks_conformance.scenario import read_scenario, replay
from ks_conformance.suite import run_suite
from ks_reference.adapter import create as create_reference

from conformance_mutants import BY_NAME

NOT_REPLAYABLE = {"nondeterministic", "config-accepted"}
"""Findings a single replay cannot show: two runs that differ, and a refused reset."""


@dataclass
class Judgement:
    """What the suite said about one mutant, and what replaying its saved scenarios showed."""

    name: str
    verdict: str
    failed: set[str]
    warnings: set[str]
    faults: list[str]
    seconds: float
    scenarios: list[Path] = field(default_factory=list)
    """Every finding's saved scenario."""
    replayed: list[tuple[list[str], list[str]]] = field(default_factory=list)
    """Per saved scenario: (its recorded anomalies, the anomalies replaying it against the mutant gave)."""
    on_reference: list[list[str]] = field(default_factory=list)
    """Per saved scenario: the anomalies replaying it against the reference gave (none, if the bug is the mutant's)."""


def judge(name: str, folder: str, seed: int = 0, examples_total: int | None = None) -> Judgement:
    """Run the `ci` profile (or its rounds on `examples_total` examples) against mutant `name`, saving scenarios in
    `folder`, then replay each of them."""
    mutant = BY_NAME[name]
    adapter = f"py:conformance_mutants:{name}"
    budget = {} if examples_total is None else {"examples_total": examples_total}
    result = run_suite(
        lambda: InProcessConnection(mutant.create(), adapter),
        settings_for("ci", seed, **budget),
        scenarios=Path(folder),
    )
    judgement = Judgement(
        name,
        result.verdict,
        {r["id"] for r in result.requirements if r["status"] == "failed"},
        {r["id"] for r in result.requirements if r["status"] == "warning"},
        [fault.message for fault, _ in result.faults],
        result.duration,
    )
    for finding in result.findings:
        if finding.path is None:
            continue
        judgement.scenarios.append(finding.path)
        scenario = read_scenario(finding.path)
        if not scenario.steps or set(scenario.anomalies) & NOT_REPLAYABLE:
            continue
        mutated = InProcessConnection(mutant.create(), adapter)
        info = mutated.start()
        again = replay(scenario, mutated, info.capabilities, info.implementation)
        mutated.close()
        found = sorted({a.name for a in again.session.anomalies}) if again.session else ["(not replayed)"]
        judgement.replayed.append((sorted(scenario.anomalies), found))
        reference = InProcessConnection(create_reference(), "reference")
        info = reference.start()
        clean = replay(scenario, reference, info.capabilities, info.implementation)
        reference.close()
        judgement.on_reference.append(
            sorted({a.name for a in clean.session.anomalies}) if clean.session else ["(not replayed)"]
        )
    return judgement
