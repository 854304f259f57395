"""`python -m benchmarks` (what `make bench` runs): every benchmarks/bench_*.py in turn, each printing its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    """Run each benchmark module in its own process, in name order; exit non-zero if any failed."""
    failed = 0
    for path in sorted(HERE.glob("bench_*.py")):
        print(f"== {path.stem} ==", flush=True)
        completed = subprocess.run([sys.executable, "-m", f"benchmarks.{path.stem}"], cwd=HERE.parent, check=False)
        failed += completed.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
