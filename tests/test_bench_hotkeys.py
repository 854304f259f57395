"""benchmarks/bench_hotkeys.py measures what it says: a stuck consumer stalls the subscription, else none."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("bound", ["window", "lookahead"])
@pytest.mark.parametrize("profile", ["strict", "owner"])
def test_a_stuck_consumer_stalls_the_read_bound_and_a_healthy_run_does_not(
    profile: str, bound: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.bench_hotkeys import Case, run_case

    case = Case(profile, bound, limit=32, capacity=4, hot=0.05)
    stuck = run_case(case, stuck=True, horizon=200)
    healthy = run_case(case, stuck=False, horizon=200)
    assert stuck.stalled_at is not None and healthy.stalled_at is None
    ticks = stuck.stalled_at
    assert 0 < stuck.healthy < run_case(case, stuck=False, horizon=ticks).healthy
    bigger = run_case(Case(profile, bound, limit=256, capacity=4, hot=0.05), stuck=True, horizon=200)
    assert (
        bigger.stalled_at is None or bigger.stalled_at > ticks
    )  # the read bound is the only stop (KS-ISO-2, KS-ISO-3)


@pytest.mark.parametrize("bound", ["window", "lookahead"])
def test_parking_stalls_later_and_says_what_it_parked(bound: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # req: KS-ISO-4: a stuck key keeps one place of the read bound; its later messages are parked
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.bench_hotkeys import Case, run_case

    plain = run_case(Case("owner", bound, limit=64, capacity=4, hot=0.05), stuck=True, horizon=200)
    parked = run_case(Case("owner", bound, limit=64, capacity=4, hot=0.05, park_after=1), stuck=True, horizon=200)
    assert plain.stalled_at is not None and plain.parked == 0
    assert parked.stalled_at is None or parked.stalled_at > plain.stalled_at
    assert parked.parked > 0 and parked.healthy > plain.healthy
