"""The rules of spec section 18 The best-effort variant."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

BEST_EFFORT_REDELIVERY = define(
    "best-effort-redelivery",
    "KS-BEF-1",
    Stage.EVENT,
    Scope.KEY,
    (
        "best-effort: a second outcome (delivery, drop or filter) for a message, or an outcome in another op "
        "than its `publish`"
    ),
    witness="both events",
    exercised="a best-effort publish",
)

MISSING_OUTCOME = define(
    "missing-outcome",
    "KS-BEF-1",
    Stage.OP,
    Scope.KEY,
    "best-effort: a `publish` op without an outcome (delivery, drop or filter) for its message",
    witness="the `publish`",
    exercised="a best-effort publish",
)

DROP_UNCOUNTED = define(
    "drop-uncounted",
    "KS-BEF-2",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "best-effort: `dropped_total` disagrees with the `drop` events",
    needs=lambda a: need(a.stats, "capability stats"),
)
