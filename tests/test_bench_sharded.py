"""benchmarks/bench_sharded.py runs end to end: one process, --jobs 2 and the machine's bound, in children."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cells_of(line: str) -> list[str]:
    """The cells of one printed table line."""
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


def test_a_quick_run_prints_one_process_the_shards_and_the_machines_bound(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_sharded", "--quick", "--repeat", "1", "--data", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    one = cells_of(next(line for line in lines if "one process" in line and "│" in line))
    jobs = cells_of(next(line for line in lines if "--jobs 2" in line and "│" in line))
    bound = cells_of(next(line for line in lines if "bound " in line and "│" in line))
    assert one[-1] == "valid" and jobs[-1].startswith("valid, in 2 shards"), (one, jobs)
    one_seconds, jobs_seconds, together = float(one[5]), float(jobs[5]), float(bound[5])
    assert abs(float(jobs[4]) - one_seconds / jobs_seconds) < 0.1
    # Two whole checks at once take at least one check's time: the bound is at most two (and the printed figure is
    # twice one process's seconds over theirs).
    assert together >= one_seconds * 0.9
    assert abs(float(bound[4].removeprefix("bound ")) - 2 * one_seconds / together) < 0.1
