"""The models' step of `keyshared verify`: TLC runs the quick manifest and every outcome must match."""

from __future__ import annotations

import argparse

from keyshared.cmd_verify import Step, StepResult


def _models_step(args: argparse.Namespace) -> StepResult:
    from ks_models.coverage import requirement_coverage
    from ks_models.manifest import entries, load_manifest, run_entries, uncovered_actions
    from ks_models.tlc import find_jar
    from ks_spec.java import require_java

    manifest = load_manifest()
    models, traces = entries(manifest)
    results = run_entries(models, traces, require_java(), find_jar())
    mismatches = [r for r in results if not r.ok]
    if mismatches:
        first = mismatches[0]
        return StepResult(
            False,
            f"{len(mismatches)} of {len(results)} did not end as expected; {first.entry.name}: {first.problems[0]}",
        )
    never = [f"{module}.{action}" for module, actions in uncovered_actions(results).items() for action in actions]
    if never:
        return StepResult(False, f"actions never enabled in any coverage run: {', '.join(never)}")
    _, coverage_problems = requirement_coverage(manifest)
    if coverage_problems:
        return StepResult(False, coverage_problems[0])
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
            needs_java=True,
            order=20,
        ),
        Step(
            "model mutants",
            "each bug of models/mutants.json, injected into a copy of the models, is rejected by its property",
            _mutants_step,
            needs_java=True,
            order=21,
        ),
    ]
