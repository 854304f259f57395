"""The rules of spec section 3 Operations and the order of effects."""

from __future__ import annotations

from ks_conformance.explain import Explained
from ks_conformance.rules.registry import NO_TIMERS, Scope, Stage, define, need

PHASE_ORDER = define(
    "phase-order",
    "KS-GEN-7",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        "within a `tick` op, an effect of an earlier phase after one of a later phase (with `tick_order = "
        '"danube"`, a `deliver`, `held` or `filter` before any effect of phase 4 or later belongs to phase 3)'
    ),
    witness="both events",
    exercised="a tick with effects of two phases",
    needs=lambda a: (
        need(a.timers, NO_TIMERS)
        or need("tick" in a.ops, "op tick")
        or need(
            a.two_phases,
            "a source of tick effects of two phases: ack timeouts, disconnect with evict_after > 0, or retries "
            "with back-off and a cursor persisted at an interval",
        )
    ),
)


def phase_order(tick_seq: int, phase: int, effect: str, seq: int, after_phase: int, after_seq: int | None) -> Explained:
    """KS-GEN-7: an `effect` of `phase` after an effect of the later `after_phase` in one tick."""
    return (
        [f"t = the tick at seq {tick_seq}"],
        f"an effect of phase {phase} ({effect}, seq {seq}) came after an effect of phase "
        f"{after_phase} (seq {after_seq}) within t, but the phases of a tick run in order (KS-GEN-7)",
        {"phase": phase, "after_phase": after_phase},
    )
