"""The anomalies of spec/checking.md that the Spark validator's parallel passes compute (`--partial`), with their
requirements; by default the Python checker judges every kind in one task (ks_spark.validation.sequential).

Names and requirement IDs follow the anomaly catalogue; levels come from spec/requirements.json.
Which kinds apply to a trace is the Python checker's own rule (`applicable`), so the validator can
say exactly which applicable kinds it did not compute (the verdict `valid-partial`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ks_spec.requirements import load_index

if TYPE_CHECKING:
    from ks_conformance.checker import Checker


@dataclass(frozen=True)
class Check:
    """One anomaly kind: its name, the requirement it violates, and where the validator computes it."""

    anomaly: str
    requirement: str
    stage: str  # "key" (per-key pass), "capacity", "window", "cursor", "sequence" (physical-order pass)
    situation: str  # when the check is exercised (spec/checking.md, last column)


CHECKS: tuple[Check, ...] = (
    Check("key-reorder", "KS-ORD-1", "key", "a first delivery while an earlier message of its key is unresolved"),
    Check("overtaken-hold", "KS-FLW-3", "key", "a first delivery while an earlier message of its key has been held"),
    Check("strict-overlap", "KS-ORD-2", "key", "a delivery while another message of its key is unresolved"),
    Check("retry-overtaken", "KS-ORD-3", "key", "a delivery while an earlier message of its key awaits redelivery"),
    Check(
        "split-owner",
        "KS-DRN-1",
        "key",
        "a delivery while its key has deliveries outstanding from an earlier epoch",
    ),
    Check("duplicate", "KS-RES-2", "key", "a delivery of a message that was delivered before"),
    Check("key-moved", "KS-ASN-1", "key", "a second delivery of a key within one epoch"),
    Check("stale-ack-accepted", "KS-ACK-2", "key", "an ack from a consumer that does not hold the message"),
    Check("capacity-overrun", "KS-FLW-1", "capacity", "a delivery to a consumer at capacity minus one"),
    Check(
        "window-overrun",
        "KS-FLW-2",
        "window",
        "a first delivery while at least window - 1 earlier offsets are unresolved",
    ),
    Check("cursor-skip", "KS-CUR-1", "cursor", "a persist while some offset is unresolved"),
    Check("cursor-regress", "KS-CUR-2", "sequence", "a second persist"),
    Check("lost", "KS-MEM-1", "key", "a holder leaves with outstanding deliveries"),
    Check("drain-stuck", "KS-DRN-2", "key", "a message is held for draining"),
    Check("stuck-key", "KS-LIV-1", "key", "a quiescent point with messages published"),
    Check("cursor-stall", "KS-LIV-2", "sequence", "a quiescent point"),
)
"""Every anomaly kind the Spark validator computes, in catalogue order."""

BY_NAME: dict[str, Check] = {check.anomaly: check for check in CHECKS}

NOT_COMPUTED: dict[str, str] = {
    "blocked-key-leak": "not yet ported to the per-key pass",
    "resurrected": "not yet ported (needs the persisted holes joined per key)",
    "filter-violation": "needs glob evaluation of every member's filters per delivery; left to the Python checker",
    "inactive-delivery": "needs connection state per delivery; left to the Python checker",
    "permit-overrun": "needs each member's grants and deliveries across keys; left to the Python checker",
    "attempt-miscount": "not yet ported to the per-key pass",
    "unstable-assignment": "needs the membership diff between epochs per key; left to the Python checker",
    "early-retry": "needs back-off arithmetic in ticks; left to the Python checker",
    "retry-overrun": "not yet ported to the per-key pass",
    "holder-ack-ignored": "ack_ignored events may lack a key; left to the Python checker",
    "stale-nack-accepted": "not yet ported to the per-key pass",
    "holder-nack-ignored": "nack_ignored events may lack a key; left to the Python checker",
    "seek-skip": "an end-of-op check over the messages a seek brought back; globally sequential",
    "seek-resurrected": "needs the seek's target at each delivery; left to the Python checker",
    "seek-unpersisted": "an end-of-op check of the cursor after a seek; globally sequential",
    "seek-stale-ack": "needs the deliveries a seek cut; left to the Python checker",
    "zombie-accepted": "needs the zombie op that opens the ack or nack; left to the Python checker",
    "zombie-ack-ignored": "needs the zombie op and ack_by_id; left to the Python checker",
    "delivered-before-due": "needs each delayed message's due tick at its delivery; left to the Python checker",
    "premature-timeout": "needs tick arithmetic; left to the Python checker",
    "extended-timeout-early": "needs the extend op and tick arithmetic; left to the Python checker",
    "extension-lost": "needs the extend op that the answer belongs to; left to the Python checker",
    "zombie-extension": "needs the extend op that the answer belongs to; left to the Python checker",
    "double-resolution": "not yet ported to the per-key pass",
    "unjustified-resolution": "needs the poison policy and operator ops per message; left to the Python checker",
    "unjustified-filter": "needs every member's filters per key; left to the Python checker",
    "filtered-without-members": "left to the Python checker",
    "dead-letter-mismatch": "left to the Python checker",
    "phase-order": "a per-op check over the physical order; left to the Python checker",
    "premature-eviction": "left to the Python checker",
    "reconnect-ignored": "needs connection state per member; left to the Python checker",
    "unjustified-hold": "needs every key of a slot and each holder per hold; left to the Python checker",
    "unstable-buckets": "needs each bucket's owner across membership changes; left to the Python checker",
    "misrouted-bucket": "selector buckets: left to the Python checker",
    "bucket-misassigned": "selector buckets: left to the Python checker",
    "bucket-split-owner": "selector buckets: left to the Python checker",
    "successor-first": "selector buckets: left to the Python checker",
    "checkpoint-skip": "selector buckets: left to the Python checker",
    "checkpoint-resurrected": "selector buckets: left to the Python checker",
    "entry-split": "selector buckets: left to the Python checker",
    "invalid-layout": "selector buckets: left to the Python checker",
    "best-effort-redelivery": "left to the Python checker",
    "missed-timeout": "an end-of-op state check over all messages; globally sequential",
    "extended-timeout-missed": "an end-of-op state check over all messages; globally sequential",
    "poison-ignored": "an end-of-op state check; globally sequential",
    "missed-eviction": "an end-of-op state check; globally sequential",
    "skip-ignored": "left to the Python checker",
    "persist-late": "an end-of-op check of the cursor after every op; globally sequential",
    "persist-early": "left to the Python checker",
    "idle-while-ready": "an end-of-op check over the whole window and every member; globally sequential",
    "missing-outcome": "left to the Python checker",
    "blocked-behind-delayed": "an end-of-op check over the window and every key's due messages; globally sequential",
    "due-left-waiting": "an end-of-op check over the window and every member; globally sequential",
    "unjustified-outcome": "needs the declared terminal outcomes; left to the Python checker",
    "unfiltered-wait": "an end-of-op check over the whole window and every member's filters; globally sequential",
    "restart-skip": "an end-of-op check over the messages a restart brought back; globally sequential",
    "return-counted": "needs returns and failures per message; not yet ported to the per-key pass",
    "unjustified-block": "needs failures per message; not yet ported to the per-key pass",
    "stale-budget": "needs failures since a release per message; not yet ported to the per-key pass",
}
"""Anomaly kinds of spec/checking.md section 2.1-2.3 that the parallel passes do not compute, and why (--partial
leaves them unchecked; the default one-task pass judges them with every other kind)."""


@cache
def _requirements() -> dict[str, dict[str, object]]:
    return {str(r["id"]): r for r in load_index()}


def level(check: Check) -> str:
    """MUST or SHOULD: anomalies of SHOULD requirements are warnings."""
    return str(_requirements()[check.requirement]["level"])


def trace_kinds() -> tuple[str, ...]:
    """Every anomaly kind judged from a trace (spec/checking.md 2.1-2.3), in catalogue order."""
    from ks_conformance.rules import RULES, Stage

    return tuple(rule.name for rule in RULES if rule.stage is not Stage.HARNESS)


def _checker(config: Mapping[str, Any]) -> Checker:
    """A Python checker fed only the trace's `config` event: what it then applies and refuses is check-trace's rule."""
    from ks_conformance.checker import Checker

    checker = Checker()
    checker.feed({"seq": 0, "tick": 0, "event": "config", "detail": json.dumps({"config": dict(config)})})
    return checker


def applicable(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The trace kinds the Python checker judges under this configuration, in catalogue order.

    Asked of the checker itself, so Spark's notion of what applies can never drift from check-trace's.
    """
    checker = _checker(config)
    return tuple(name for name in trace_kinds() if checker.applies(name))


def config_problems(config: Mapping[str, Any]) -> list[str]:
    """Where the Python checker finds the configuration contradictory (an unknown profile): nothing can be judged."""
    return [problem.message for problem in _checker(config).problems]


def not_computed_under(config: Mapping[str, Any]) -> dict[str, str]:
    """Kinds the parallel passes compute in general but not under this configuration, and why (--partial leaves
    them unchecked then)."""
    left: dict[str, str] = {}
    if int(config.get("park_after") or 0) > 0:
        left["window-overrun"] = "parking (park_after) leaves parked messages out of the window's count (KS-ISO-4)"
    if config.get("ack_by_id"):
        left["stale-ack-accepted"] = (
            "with ack_by_id a zombie_ack's ack of an unresolved message is allowed (KS-ACK-3); the per-key pass does "
            "not see zombie ops"
        )
    if config.get("selector") == "buckets":
        batches = "batched entries (KS-BKT-10) exempt a batch's later messages; the parallel passes do not know batches"
        left["capacity-overrun"] = left["window-overrun"] = batches
    return left


def active_checks(config: Mapping[str, Any]) -> frozenset[str]:
    """The kinds the validator computes that apply to this configuration."""
    return (frozenset(applicable(config)) & BY_NAME.keys()) - not_computed_under(config).keys()


def not_computed(config: Mapping[str, Any]) -> list[str]:
    """The kinds that apply to this configuration but the validator does not compute, in catalogue order.

    A kind missing from both CHECKS and NOT_COMPUTED (one newly added to the catalogue) counts as not computed.
    """
    computed = active_checks(config)
    return [name for name in applicable(config) if name not in computed]


def why(name: str) -> str:
    """Why --partial does not compute a kind: its own reason, or what its rule's scope makes it."""
    from ks_conformance.rules import Scope, rule

    if name in NOT_COMPUTED:
        return NOT_COMPUTED[name]
    if rule(name).scope is Scope.KEY:
        return "not ported to the per-key pass; left to the Python checker"
    return f"a {rule(name).scope.value} rule, globally sequential; left to the Python checker"


def listing() -> list[tuple[str, str, str]]:
    """(anomaly, requirement, `parallel` or `--partial skips it: <why not in parallel>`) for every trace kind, for
    --list-checks. By default the Python checker judges them all in one task (ks_spark.validation.sequential).
    """
    from ks_conformance.rules import rule

    return [
        (name, rule(name).requirement, "parallel" if name in BY_NAME else f"--partial skips it: {why(name)}")
        for name in trace_kinds()
    ]
