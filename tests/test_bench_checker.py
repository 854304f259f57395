"""benchmarks/bench_checker.py runs end to end: check-trace on a synthetic trace against its floor, in children."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_quick_run_prints_the_rates_the_ratio_and_a_valid_verdict(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_checker", "--quick", "--data", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    row = next(line for line in completed.stdout.splitlines() if "200k" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    floor, checker, ratio = (float(cells[i].replace(",", "")) for i in (1, 2, 3))
    assert 0 < checker < floor and abs(ratio - checker / floor) < 0.002
    said = re.fullmatch(r"valid; ([\d,]+) of ([\d,]+)", cells[-1])
    assert said is not None, cells[-1]
    kept, published = (int(number.replace(",", "")) for number in said.groups())
    assert 0 < kept < published // 4  # the checker kept the live messages on its heap, not the trace's
