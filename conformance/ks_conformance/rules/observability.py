"""The rules of spec section 16 Observability."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

STATS_MISMATCH = define(
    "stats-mismatch",
    "KS-OBS-1",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "a stats gauge disagrees with the checker's state",
    needs=lambda a: need(a.stats, "capability stats"),
)

BLOCKED_KEY_HIDDEN = define(
    "blocked-key-hidden",
    "KS-OBS-2",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "a blocked key is missing from `blocked_keys` or `stuck_keys`",
    needs=lambda a: need(a.stats and "block" in a.policies, "capability stats and policy block"),
)
