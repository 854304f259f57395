"""The pure helpers' contracts hold: CrossHair proves them or searches for counterexamples in bounded time."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACTED = [
    "ks_reference.hashing.pulsar_consistent_slot_of_hash",
    "ks_reference.hashing.pulsar_range_slot_of_hash",
    "ks_reference.hashing.fold_64_to_32",
    "ks_reference.hashing.fmix32",
    "ks_reference.hashing.bucket_of",
    "ks_reference.hashing.bucket_hash_range",
    "ks_reference.hashing.split_hash",
    "ks_reference.hashing.bucket_owner_index",
    "ks_reference.hashing.owned_buckets",
    "ks_reference.cursor.advance_cursor",
    "ks_reference.cursor.hole_ranges",
    "ks_reference.filters.glob_match",
    "ks_reference.retries.backoff",
    "ks_reference.selectors.ring_successor",
    "ks_reference.selectors.merge_ranges",
]
PROVEN = {
    # slot and bucket arithmetic is small enough for the solver to confirm over all inputs
    "hashing.py": {"pulsar_consistent_slot_of_hash", "pulsar_range_slot_of_hash", "bucket_of", "bucket_owner_index"},
}


def _crosshair() -> str:
    path = Path(sys.executable).parent / "crosshair"
    found = str(path) if path.exists() else shutil.which("crosshair")
    if found is None:
        pytest.skip("crosshair is not installed (make installs it with the dev extra)")
    return found


def _check(targets: list[str], timeout: float, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _crosshair(),
            "check",
            "--analysis_kind=PEP316",
            f"--per_condition_timeout={timeout}",
            "--report_all",
            *targets,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_contracts_of_the_pure_helpers_hold() -> None:
    completed = _check(CONTRACTED, 1.0, ROOT)
    errors = [line for line in completed.stdout.splitlines() if ": error:" in line]
    assert completed.returncode == 0 and not errors, completed.stdout + completed.stderr
    confirmed = {
        (Path(m.group(1)).name, int(m.group(2)))
        for m in re.finditer(r"^(.*?):(\d+): info: Confirmed over all paths", completed.stdout, re.MULTILINE)
    }
    source = (ROOT / "reference/ks_reference/hashing.py").read_text().splitlines()
    for name in PROVEN["hashing.py"]:
        start = next(i for i, line in enumerate(source, 1) if line.startswith(f"def {name}("))
        posts = [i for i in range(start, start + 15) if source[i - 1].strip().startswith("post:")]
        assert posts and all(("hashing.py", line) in confirmed for line in posts), (name, sorted(confirmed))


def test_crosshair_finds_a_broken_bucket_formula(tmp_path: Path) -> None:
    """The check above can fail: the same contract on a wrong formula yields a counterexample."""
    (tmp_path / "broken_buckets.py").write_text(
        '''
def bucket_owner_index(bucket: int, buckets: int, members: int) -> int:
    """
    pre: 1 <= buckets <= 65536
    pre: 0 <= bucket < buckets
    pre: 1 <= members <= 100000
    post: __return__ * buckets // members <= bucket < (__return__ + 1) * buckets // members
    """
    return bucket * members // buckets
''',
        encoding="utf-8",
    )
    completed = _check(["broken_buckets.py"], 5.0, tmp_path)
    assert completed.returncode == 1
    assert "error: false when calling bucket_owner_index" in completed.stdout
