"""The checker and the reference were written independently: every named workload of the reference must
be judged valid, and the checker must exercise the checks each workload is about."""

from __future__ import annotations

from pathlib import Path

import pytest
from ks_conformance.anomalies import Verdict
from ks_conformance.tracefile import check_trace

pytest.importorskip("ks_reference.workloads")

WORKLOADS = {
    "steady": ["key-moved", "persist-late"],
    "churn": ["split-owner", "unstable-assignment", "lost", "missed-eviction", "filter-violation"],
    "hot-key-slow-consumer": ["capacity-overrun", "window-overrun", "idle-while-ready"],
    "poison-drop": ["retry-overrun", "poison-ignored", "missed-timeout", "early-retry"],
    "poison-dead-letter": ["dead-letter-mismatch", "unjustified-resolution"],
    "poison-block": ["blocked-key-leak", "skip-ignored"],
    "crash-restart": ["resurrected", "cursor-regress", "persist-early"],
    "bucket-rollover": ["misrouted-bucket", "bucket-misassigned", "bucket-split-owner", "successor-first"],
    "best-effort-saturation": ["best-effort-redelivery", "missing-outcome", "capacity-overrun"],
}


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_reference_workload_traces_are_valid(workload: str, tmp_path: Path) -> None:
    from keyshared.cli import main

    trace = tmp_path / f"{workload}.jsonl"
    assert main(["simulate", workload, "--messages", "300", "--memory-store", "--out", str(trace)]) == 0
    result = check_trace(trace)
    assert [a.explanation.text() for a in result.anomalies] == []
    assert result.problems == [] and result.verdict is Verdict.VALID
    for check in WORKLOADS[workload]:
        assert result.exercised[check] > 0, f"{workload} never exercised {check}"


@pytest.mark.parametrize("policy", ["sorted", "sticky", "controller"])
def test_a_delivery_to_a_non_member_under_buckets_is_judged_not_a_crash(policy: str) -> None:
    """A delivery to a consumer that is no member, under each bucket policy: the checker reports it (KS-MEM-3) and
    goes on; under the policies other than `sorted` it once failed an assertion (a bucket's owner must be a member)."""
    from ks_conformance.checker import check_events
    from ks_reference.store import MemoryStore
    from ks_reference.workloads import run_named

    run = run_named("bucket-rollover", size=40, seed=3, overrides={"bucket_assignment": policy}, store=MemoryStore())
    events = [dict(event) for event in run.events]
    first = next(at for at, event in enumerate(events) if event["event"] == "deliver")
    events[first]["consumer"] = "ghost"
    checker = check_events(events)
    assert checker.problems == []
    assert "inactive-delivery" in {a.name for a in checker.anomalies if a.witness[-1] == events[first]["seq"]}
