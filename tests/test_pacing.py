"""A process's peak memory as the benchmarks and check-trace's workers report it (ks_conformance.pacing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ks_conformance.pacing import peak_rss

CHILD = (
    "import json, resource; from ks_conformance.pacing import peak_rss; "
    "print(json.dumps([peak_rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]))"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_a_child_reports_its_own_peak_not_its_parents() -> None:
    """A child started by a process holding 400 MB reports its own peak, not the parent's (ru_maxrss, which Linux keeps
    across exec, reports the parent's: the benchmarks' memory columns showed the parent's peak when it had just
    generated the trace)."""
    held = bytearray(400 * 2**20)
    held[::4096] = b"\x01" * len(held[::4096])  # touched: resident
    assert peak_rss() >= 400 * 2**20
    completed = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    own, inherited = json.loads(completed.stdout)
    assert inherited >= 400 * 2**20  # (the teeth: what ru_maxrss says)
    assert 0 < own < 300 * 2**20
    del held
