"""The models' steps of `keyshared verify`: TLC runs the quick tier of the manifest (the quick job: two configurations
and a trace of it) and every outcome must match; the mutation score (--full only)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial

from keyshared.cmd_verify import Quick, Step, StepResult

QUICK_ENTRIES = ("MCBucketHandoffChain", "MCKeySharedOrderingBugNoDraining", "strict-reordered.jsonl")
"""The quick job's manifest entries: a configuration that holds, a broken variant TLC must reject on the property the
manifest names, a trace TLC must reject at the recorded seq (each a few seconds)."""


def _models_step(args: argparse.Namespace, names: Sequence[str] = ()) -> StepResult:
    """Run the manifest's quick tier (or only the named entries) and compare every outcome with the manifest; the
    whole tier also proves that every action of the coverage runs was taken."""
    from ks_models.coverage import requirement_coverage
    from ks_models.manifest import entries, load_manifest, run_entries, uncovered_actions
    from ks_models.tlc import find_jar
    from ks_spec.java import require_java

    manifest = load_manifest()
    models, traces = entries(manifest, names)
    results = run_entries(models, traces, require_java(), find_jar(), jobs=2)
    mismatches = [r for r in results if not r.ok]
    if mismatches:
        first = mismatches[0]
        return StepResult(
            False,
            f"{len(mismatches)} of {len(results)} did not end as expected; {first.entry.name}: {first.problems[0]}",
        )
    _, coverage_problems = requirement_coverage(manifest)
    if coverage_problems:
        return StepResult(False, coverage_problems[0])
    if names:  # a few entries: say each outcome (action coverage needs every coverage run of the tier)
        said = [f"{r.entry.name} {'holds' if r.got == 'success' else r.got}" for r in results]
        return StepResult(
            True,
            f"{'; '.join(said)}: each as models/manifest.json expects; every MUST safety and liveness requirement "
            "has its property or a models/coverage.json entry",
        )
    never = [f"{module}.{action}" for module, actions in uncovered_actions(results).items() for action in actions]
    if never:
        return StepResult(False, f"actions never enabled in any coverage run: {', '.join(never)}")
    passing = sum(1 for r in results if getattr(r.entry, "kind", "") == "check")
    rejected = sum(1 for r in results if getattr(r.entry, "kind", "") in ("broken", "permission"))
    return StepResult(
        True,
        f"{passing} configurations hold, {rejected} broken variants rejected on the expected property, "
        f"{len(traces)} traces judged as expected",
    )


def _mutants_step(args: argparse.Namespace) -> StepResult:
    from ks_models.mutants import load_mutants, run_mutants, score_text
    from ks_models.tlc import find_jar
    from ks_spec.java import require_java

    results = run_mutants(load_mutants(), require_java(), find_jar(), jobs=2)
    survivors = [r for r in results if not r.killed]
    if survivors:
        first = survivors[0]
        return StepResult(False, f"{score_text(results)}; {first.mutant.id}: {first.problem}")
    return StepResult(True, f"{score_text(results)}: every mutant rejected by the property named for it")


def steps() -> list[Step]:
    """The models steps: after the spec (10), before the reference (30)."""
    return [
        Step(
            "models",
            "TLC checks the quick configurations of models/manifest.json, the broken variants and trace validation",
            _models_step,
            part="models",
            quick=Quick(
                partial(_models_step, names=QUICK_ENTRIES),
                f"TLC: {QUICK_ENTRIES[0]} holds, {QUICK_ENTRIES[1]} and trace {QUICK_ENTRIES[2]} are rejected as "
                "models/manifest.json expects",
            ),
            needs_java=True,
            order=20,
        ),
        Step(
            "model mutants",
            "each bug of models/mutants.json, injected into a copy of the models, is rejected by its property",
            _mutants_step,
            part="models",
            needs_java=True,
            order=21,
        ),
    ]
