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


@pytest.mark.parametrize("selector", ["ring", "danube", "pulsar-consistent"])
def test_a_key_moved_across_a_seek_is_key_moved(selector: str) -> None:
    """A seek keeps the members, so every key keeps its target (spec section 14): a key delivered to another member
    after a seek is KS-ASN-1's finding (under these stable selectors the checker once failed an
    assertion there, reading the seek as a membership change without a member)."""
    from ks_conformance.checker import check_events
    from ks_reference.simulate import Behaviour, Simulation
    from ks_reference.store import MemoryStore

    sim = Simulation({"profile": "owner", "selector": selector}, MemoryStore())
    sim.add_consumer("c1", 4, Behaviour(delay=1))
    sim.add_consumer("c2", 4, Behaviour(delay=1))
    for _ in range(3):
        sim.publish("k")
        sim.tick()
    sim.apply({"op": "seek", "offset": 0})
    sim.settle()
    events = [dict(event) for event in sim.events]
    assert check_events(events).anomalies == []
    seek = next(at for at, event in enumerate(events) if event["event"] == "seek")
    after = next(at for at in range(seek, len(events)) if events[at]["event"] == "deliver")
    holder = events[after]["consumer"]
    for event in events[after:]:
        if event.get("consumer") == holder and event["event"] in ("deliver", "ack"):
            event["consumer"] = "c1" if holder == "c2" else "c2"
    checker = check_events(events)
    assert checker.problems == []
    assert "key-moved" in {a.name for a in checker.anomalies if events[after]["seq"] in a.witness}


def test_a_restart_after_publishes_to_an_unknown_segment_is_judged_not_a_crash() -> None:
    """Selector buckets, the segment_created of segment 0 missing: each publish is a problem (no active segment), and
    a restart then rebuilds the buckets' indexes without the segment (it once raised KeyError there)."""
    from ks_conformance.checker import check_events
    from ks_reference.simulate import Behaviour, Simulation
    from ks_reference.store import MemoryStore

    sim = Simulation({"profile": "owner", "selector": "buckets"}, MemoryStore())
    sim.add_consumer("c1", 1, Behaviour(delay=3))
    for key in ("a", "b", "c"):
        sim.publish(key)
    sim.tick()
    sim.restart()
    sim.add_consumer("c1", 4, Behaviour(delay=1))
    sim.settle()
    events = [dict(event) for event in sim.events if event["event"] != "segment_created"]
    for seq, event in enumerate(events):
        event["seq"] = seq
    checker = check_events(events)
    assert checker.problems and "no active segment contains" in checker.problems[0].message
