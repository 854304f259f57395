"""Crash and restart with a real process: SIGKILL a dispatcher mid-run; the store lost nothing unresolved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ks_reference.dispatcher import Dispatcher
from ks_reference.store import SqliteStore
from reference_support.crash_child import config

ROOT = Path(__file__).resolve().parent.parent


def _run_and_kill(store: Path, holes: bool, lines_wanted: int) -> list[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    child = subprocess.Popen(
        [sys.executable, "-m", "reference_support.crash_child", str(store), "holes" if holes else "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    assert child.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while len(lines) < lines_wanted and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
    child.send_signal(signal.SIGKILL)  # no clean-up, no flush: a crash
    child.wait(timeout=30)
    # Read the rest through the same buffered reader: communicate() reads the raw pipe and would
    # miss lines readline() had already buffered.
    lines += [line.strip() for line in child.stdout.read().splitlines() if line.strip()]
    assert child.stderr is not None
    errors = child.stderr.read()
    assert child.returncode == -signal.SIGKILL, errors
    return lines


@pytest.mark.parametrize("holes", [False, True], ids=["cursor-only", "with-ack-holes"])
def test_a_killed_dispatcher_loses_nothing_unresolved(tmp_path: Path, holes: bool) -> None:
    # req: KS-CUR-1, KS-CUR-3, KS-CUR-4, KS-MEM-1
    store_path = tmp_path / "store.sqlite"
    lines = _run_and_kill(store_path, holes, lines_wanted=2500)
    assert "ready" in lines, "the child was killed before it got going"
    published = {int(line.split()[1]) for line in lines if line.startswith("publish ")}
    acked = {int(line.split()[1]) for line in lines if line.startswith("ack ")}

    store = SqliteStore(store_path, config(holes))
    snapshot = store.load()
    log = set(range(len(snapshot.log)))
    assert log <= published and len(published - log) <= 1  # at most the publish in flight was lost
    durable = set(range(snapshot.cursor)) | set(snapshot.holes)
    assert snapshot.cursor > 0, "nothing was persisted before the kill: the test proves nothing"
    if holes:
        assert snapshot.holes, "no ack hole was persisted before the kill"
    # KS-CUR-1: what the store records as resolved was resolved (acked) before the crash
    assert durable <= acked
    unresolved_at_kill = log - acked
    assert unresolved_at_kill, "every message had been acked: nothing to lose"

    # A new process starts from the store: everything not durably resolved is delivered again.
    restarted = Dispatcher(config(holes), store)
    restarted.add_consumer("survivor", 1000)
    delivered: set[int] = set()
    while restarted.cursor.position < len(restarted.log):
        outstanding = sorted(restarted.members["survivor"].outstanding)
        assert outstanding, "unresolved messages that nobody will receive: they were lost"
        for offset in outstanding:
            delivered.add(offset)
            restarted.ack("survivor", offset)
    store.close()
    assert unresolved_at_kill <= delivered  # KS-CUR-3, KS-MEM-1: nothing unresolved was lost
    assert not delivered & durable  # KS-CUR-4: nothing the store recorded comes back
    assert delivered == log - durable
