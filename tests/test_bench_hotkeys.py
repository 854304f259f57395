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
