"""The rules of spec section 7 Draining on reassignment."""

from __future__ import annotations

from ks_spec.slots import SLOT_SELECTORS

from ks_conformance.rules.registry import Scope, Stage, define, need

SPLIT_OWNER = define(
    "split-owner",
    "KS-DRN-1",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of m to c while another incarnation holds an outstanding delivery of a message of m's key",
    witness="that other delivery, the delivery",
    exercised=(
        "a delivery while a membership change moved its key (the key has outstanding deliveries from an earlier epoch)"
    ),
    needs=lambda a: need(len(a.profiles) > 0, ""),
)

UNJUSTIFIED_HOLD = define(
    "unjustified-hold",
    "KS-DRN-2",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        'with `drain_granularity = "hash"`: a `held` with reason `draining` (naming target T, or no target) '
        "while no key of its slot (its own included) holds an outstanding delivery that may sit at an old "
        "owner (one at a consumer other than T made before the last membership change, or any one at a "
        "consumer other than T while members have filters), and no key of its slot awaits redelivery or is "
        "blocked: the slot's target did not move, so nothing drains (KS-DRN-3 allows a hold only for a "
        "slot-mate at another consumer than the target, awaiting or blocked; a delivery made in the current "
        "epoch without filters is at the slot's target, whatever target the hold names; PIP-379 holds only "
        "hashes whose owner changed)"
    ),
    witness="the latest outstanding delivery of the slot at T or of the current epoch, if any, the `held`",
    exercised="a hold for draining, with hash-granularity draining",
    needs=lambda a: (
        need(a.held_events, "held events (capability held_events); a needless hold shows as idle-while-ready")
        or need(
            "hash" in a.forms("drain_granularity") and bool(a.selectors & set(SLOT_SELECTORS)),
            "drain_granularity hash declared in config_values, with a slot selector (KS-DRN-3)",
        )
    ),
)

DRAIN_STUCK = define(
    "drain-stuck",
    "KS-DRN-2",
    Stage.QUIESCENT,
    Scope.KEY,
    "an unresolved message whose last hold had reason `draining`",
    witness="the `held`, the `quiescent`",
    exercised="a message is held for draining",
    needs=lambda a: (
        need(
            a.held_events,
            "held events (capability held_events); a drain that never clears shows as stuck-key (KS-LIV-1)",
        )
        or need(
            bool(a.selectors - {"any"}), "a selector with key affinity (with any, a held key never moves: no drain)"
        )
        or need(
            "owner" in a.profiles and bool(a.selectors - {"any", "buckets", "partitions"}),
            "the owner profile with a selector other than any, buckets and partitions (in strict a key's next "
            "message waits for the previous one, under buckets a moving bucket is withheld instead, KS-BKT-4, and"
            " under partitions a key moves only away from a leaver, whose deliveries return with it: no key "
            "drains)",
        )
    ),
)
