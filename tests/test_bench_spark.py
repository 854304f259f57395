"""The Spark benchmark's helpers: sizes, labels and the CPU accounting behind its "cores busy" figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """benchmarks.bench_spark, imported from the repository root (benchmarks/ is not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.bench_spark as module

    return module


@pytest.mark.parametrize(
    ("text", "events"), [("10M", 10_000_000), ("200k", 200_000), ("1,500", 1500), ("2.5m", 2_500_000)]
)
def test_sizes_read_as_written_and_label_back(bench: ModuleType, text: str, events: int) -> None:
    assert bench.parse_size(text) == events
    assert bench.parse_size(bench.label(events)) == events


def test_cpu_seconds_count_what_a_finished_child_burned(bench: ModuleType) -> None:
    """A child that spins for 0.4 s of CPU and is waited for shows up in the tree's total (cutime)."""
    before = bench.tree_cpu_seconds()
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", spin], check=True)
    assert bench.tree_cpu_seconds() - before >= 0.35


def test_cpu_seconds_count_a_running_grandchild(bench: ModuleType) -> None:
    """A grandchild still running (a Spark Python worker under the JVM) is found through its parent."""
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    middle = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {spin!r}])\ntime.sleep(30)"
    process = subprocess.Popen([sys.executable, "-c", middle])
    try:
        deadline = 100
        while bench.tree_cpu_seconds(process.pid) < 0.35 and deadline:
            subprocess.run(["sleep", "0.1"], check=True)
            deadline -= 1
        assert bench.tree_cpu_seconds(process.pid) >= 0.35
    finally:
        for pid in sorted(bench.tree_pids(process.pid), reverse=True):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        process.wait()


def test_the_target_lines_judge_every_kind_against_the_floor(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 10M target lines: every kind on two cores (in shards, the default row; one task beside it), the scaling
    from one core, and the floor."""
    rows = [
        bench.Row(f"{bench.EVERY_KIND} in 2 shards, local[2]", "2", 80_000.0, 125.0),
        bench.Row(f"{bench.EVERY_KIND} in one task, local[2]", "2", 50_000.0, 200.0),
        bench.Row(f"{bench.EVERY_KIND} in one task, local[1]", "1", 40_000.0, 250.0),
        bench.Row(f"{bench.FLOOR} (key events into Python), local[2]", "2", 1_600_000.0, 6.0),
    ]
    bench.console.width = 200
    bench.print_targets({10_000_000: rows})
    lines = capsys.readouterr().out.splitlines()
    every_kind = "10M: Spark validator, every kind, local[2] 80,000 ev/s (target 1,000,000: NOT met, 5% of the floor)"
    assert every_kind in lines
    assert "10M: every kind, scaling local[1] -> local[2]: x2.00 (linear: x2.00)" in lines
    assert "10M: every kind, local[2] in shards of keys / in one task: x1.60" in lines
    assert "10M: Spark floor local[2] (no checking) 1,600,000 ev/s, over the target" in lines
