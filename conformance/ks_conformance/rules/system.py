"""The rules of spec section 1 The system."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

MISSING_REFUSAL = define(
    "missing-refusal",
    "KS-GEN-4",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "an operation the spec refuses (section 3 of the adapter protocol) was accepted",
)

REFUSAL_WITH_EFFECTS = define(
    "refusal-with-effects",
    "KS-GEN-4",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "a refused operation reported events",
)

SPURIOUS_REFUSAL = define(
    "spurious-refusal",
    "KS-GEN-4",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "a valid operation was refused",
)

SYSTEM_FAULT = define(
    "system-fault",
    "KS-GEN-4",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    (
        "the system failed or rejected an operation (adapter response `system_fault`, a crashed component or "
        "a rejected request) instead of performing it or refusing it as the spec says; the op counts as not "
        "performed and the run goes on"
    ),
)

NONDETERMINISTIC = define(
    "nondeterministic",
    "KS-GEN-5",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    (
        "the same operations gave different events: a Hypothesis `Flaky` error, a passing example replayed on"
        " the adapter and again on a newly started one (new object or process) with different events, or "
        "(batch mode) a replay whose answers to ops already replayed differ from the previous replay's"
    ),
    needs=lambda a: need(a.deterministic, "the adapter does not declare itself deterministic"),
)
