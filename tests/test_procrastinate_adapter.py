"""The procrastinate adapter (conformance/adapters/procrastinate) against a real PostgreSQL.

A private cluster is started through the adapter's postgres.sh (the tests skip, with its reason, only if
PostgreSQL cannot be installed or started); the ops are checked to map as the adapter's README says, then the
kit's smoke test and a short conformance run drive the adapter over stdio and must reach a verdict without an
adapter fault.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "conformance" / "adapters" / "procrastinate"
SCRIPT = FOLDER / "postgres.sh"
KEYSHARED = [sys.executable, "-c", "import sys; from keyshared.cli import main; sys.exit(main())"]
COMMAND = f"cmd:{sys.executable} {FOLDER / 'adapter.py'}"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ks_procrastinate_adapter", FOLDER / "ks_procrastinate_adapter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ks_procrastinate_adapter", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    """A private cluster for this module: the environment that points the adapter at it."""
    pytest.importorskip("procrastinate", reason="the [procrastinate] extra is not installed")
    state = tempfile.mkdtemp(prefix="ks-pg-test-", dir="/tmp")
    os.rmdir(state)  # postgres.sh creates it, owned by the server's user
    env = {**os.environ, "KS_PG_STATE": state}
    started = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=900, check=False)
    if started.returncode != 0:
        shutil.rmtree(state, ignore_errors=True)
        pytest.skip(f"no PostgreSQL: {started.stderr.strip().splitlines()[-1:] or started.returncode}")
    env["KS_PROCRASTINATE_DSN"] = started.stdout.strip()
    try:
        yield env
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120, check=False)
        assert not Path(state).exists()


@pytest.fixture
def adapter(cluster: dict[str, str]) -> Iterator[Any]:
    """The adapter object, in process, on the private cluster."""
    instance = _module().ProcrastinateAdapter(cluster["KS_PROCRASTINATE_DSN"])
    instance.start(2)
    yield instance
    instance.stop()


def _do(adapter: Any, op: str, **arguments: Any) -> list[dict[str, Any]]:
    response = adapter.op({"op": op, **arguments})
    assert response.get("ok") is True, response
    events: list[dict[str, Any]] = response["events"]
    return events


def _reset(adapter: Any, **config: Any) -> None:
    assert adapter.reset({"profile": "strict", "selector": "any", **config}) == {"ok": True, "events": []}


def _deliveries(events: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    return [(e["offset"], e["consumer"], e["attempt"]) for e in events if e["event"] == "deliver"]


def test_start_answers_the_version_asked(cluster: dict[str, str]) -> None:
    instance = _module().ProcrastinateAdapter(cluster["KS_PROCRASTINATE_DSN"])
    try:
        assert instance.start(1)["version"] == 1
        answer = instance.start(2)
        assert answer["version"] == 2
        capabilities = answer["capabilities"]
        assert capabilities["selectors"] == ["any"] and capabilities["profiles"] == ["strict"]
        assert capabilities["cursor"] is False and capabilities["window"] is False
        assert capabilities["terminal_outcomes"] == {"failed": "dead_lettered", "aborted": None}
    finally:
        instance.stop()


def test_publish_is_delivered_to_a_free_consumer(adapter: Any) -> None:
    _reset(adapter)
    assert _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[]) == []
    assert _do(adapter, "publish", offset=0, key="k") == [
        {"event": "deliver", "offset": 0, "key": "k", "consumer": "c1", "attempt": 1}
    ]
    assert _do(adapter, "ack", consumer="c1", offset=0) == [{"event": "ack", "offset": 0, "key": "k", "consumer": "c1"}]


def test_one_lock_runs_one_job_at_a_time(adapter: Any) -> None:
    _reset(adapter)
    _do(adapter, "add_consumer", consumer="c1", capacity=2, filters=[])
    _do(adapter, "add_consumer", consumer="c2", capacity=2, filters=[])
    assert _deliveries(_do(adapter, "publish", offset=0, key="k")) == [(0, "c1", 1)]
    assert _do(adapter, "publish", offset=1, key="k") == []  # same lock: waits although both have free slots
    assert _deliveries(_do(adapter, "publish", offset=2, key="other")) == [(2, "c1", 1)]
    assert _deliveries(_do(adapter, "ack", consumer="c1", offset=0)) == [(1, "c1", 1)]  # any free worker: c1 first


def test_capacity_is_the_worker_concurrency(adapter: Any) -> None:
    _reset(adapter)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="a")
    assert _do(adapter, "publish", offset=1, key="b") == []
    assert _deliveries(_do(adapter, "ack", consumer="c1", offset=0)) == [(1, "c1", 1)]


def test_nack_retries_by_the_task_strategy_then_fails(adapter: Any) -> None:
    _reset(adapter, max_redeliveries=1)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    events = _do(adapter, "nack", consumer="c1", offset=0)
    assert events[0] == {"event": "nack", "offset": 0, "key": "k", "consumer": "c1", "attempt": 1}
    assert _deliveries(events) == [(0, "c1", 2)]  # back-off 0: retried at once
    assert _do(adapter, "nack", consumer="c1", offset=0)[1:] == [
        {"event": "outcome", "offset": 0, "key": "k", "reason": "failed", "consumer": "c1"}
    ]
    assert _do(adapter, "ack", consumer="c1", offset=0) == [
        {"event": "ack_ignored", "offset": 0, "consumer": "c1", "reason": "resolved", "key": "k"}
    ]


def test_protocol_v1_reports_a_failed_job_as_dead_lettered(adapter: Any) -> None:
    adapter.start(1)  # v1 has no outcome event: `failed` is reported as the resolution it stands for
    _reset(adapter, max_redeliveries=0)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    assert _do(adapter, "nack", consumer="c1", offset=0)[1:] == [
        {"event": "dead_letter", "offset": 0, "key": "k", "attempt": 1, "reason": "nack"}
    ]


def test_removal_aborts_running_jobs(adapter: Any) -> None:
    _reset(adapter, max_redeliveries=1)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "add_consumer", consumer="c2", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    assert _deliveries(_do(adapter, "remove_consumer", consumer="c1")) == [(0, "c2", 2)]  # retried: attempts left
    assert _do(adapter, "remove_consumer", consumer="c2") == [
        {"event": "outcome", "offset": 0, "key": "k", "reason": "aborted", "consumer": "c2"}
    ]


def test_a_disconnected_worker_is_pruned_after_evict_after_ticks(adapter: Any) -> None:
    _reset(adapter, evict_after=2)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    _do(adapter, "tick")
    _do(adapter, "disconnect", consumer="c1")  # at tick 1: evicted at tick 3
    _do(adapter, "add_consumer", consumer="c2", capacity=1, filters=[])
    assert _do(adapter, "tick") == []
    assert _do(adapter, "tick") == [
        {"event": "consumer_evicted", "consumer": "c1"},
        {"event": "deliver", "offset": 0, "key": "k", "consumer": "c2", "attempt": 2},
    ]
    assert adapter.op({"op": "ack", "consumer": "c1", "offset": 0})["error"]["code"] == "unknown_consumer"


def test_a_pruned_worker_that_finishes_late_resolves_the_retry_another_worker_runs(adapter: Any) -> None:
    # KS-ACK-3's finding: finish_job takes a job in `todo` or `doing` from any worker (no fencing)
    _reset(adapter, evict_after=1)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    _do(adapter, "disconnect", consumer="c1")
    _do(adapter, "add_consumer", consumer="c2", capacity=1, filters=[])
    assert _deliveries(_do(adapter, "tick")) == [(0, "c2", 2)]  # c1 pruned as stalled, its job retried on c2
    assert _do(adapter, "zombie_ack", consumer="c1", offset=0, attempt=1) == [
        {"event": "ack", "offset": 0, "key": "k", "consumer": "c1"}
    ]
    assert _do(adapter, "ack", consumer="c2", offset=0)[0]["reason"] == "resolved"  # c2's own result is refused


def test_a_late_result_for_a_finished_job_is_refused_by_procrastinate(adapter: Any) -> None:
    _reset(adapter)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    _do(adapter, "ack", consumer="c1", offset=0)
    for op in ("zombie_ack", "zombie_nack"):
        events = _do(adapter, op, consumer="c1", offset=0, attempt=1)
        assert [(e["event"], e["reason"]) for e in events] == [(op.replace("zombie_", "") + "_ignored", "resolved")]
    missing = adapter.op({"op": "zombie_ack", "consumer": "c2", "offset": 0, "attempt": 1})
    assert missing["error"]["code"] == "invalid_argument"  # no delivery to c2 ended


def test_restart_leaves_jobs_to_the_stalled_job_task(adapter: Any) -> None:
    _reset(adapter, evict_after=1)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    _do(adapter, "publish", offset=0, key="k")
    assert _do(adapter, "restart") == []
    assert _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[]) == []  # the dead worker holds k
    assert _deliveries(_do(adapter, "tick")) == [(0, "c1", 2)]
    assert _deliveries(_do(adapter, "publish", offset=1, key="j")) == []  # c1 is full; offsets go on after restart


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"window": 0}, "window"),
        ({"window": 4}, "window"),
        ({"backoff_base": 1}, "backoff_base"),
        ({"backoff_base": 5, "backoff_max": 1}, "backoff_base"),
        ({"ack_timeout": 2}, "ack_timeout"),
        ({"poison_policy": "block"}, "poison_policy"),
        ({"evict_after": 0}, "evict_after"),
        ({"persist_interval": 2}, "persist_interval"),
        ({"max_redeliveries": -1}, "max_redeliveries"),
        ({"max_redeliveries": True}, "max_redeliveries"),
        ({"profile": "owner"}, "profile"),
        ({"selector": "ring"}, "selector"),
        ({"bucket_budget": 2}, "bucket_budget"),
        ({"frobnicate": 1}, "frobnicate"),
    ],
)
def test_values_it_cannot_honour_are_refused(config: dict[str, Any], field: str) -> None:
    module = _module()
    with pytest.raises(module.Refused) as refused:
        module.parse_config(config)
    assert (refused.value.code, refused.value.field_name) == ("invalid_config", field)


def test_refusals_change_nothing(adapter: Any) -> None:
    _reset(adapter)
    _do(adapter, "add_consumer", consumer="c1", capacity=1, filters=[])
    codes = [
        adapter.op({"op": "publish", "offset": 5, "key": "k"})["error"]["code"],
        adapter.op({"op": "add_consumer", "consumer": "c1", "capacity": 1, "filters": []})["error"]["code"],
        adapter.op({"op": "add_consumer", "consumer": "c2", "capacity": 0, "filters": []})["error"]["code"],
        adapter.op({"op": "ack", "consumer": "c9", "offset": 0})["error"]["code"],
        adapter.op({"op": "disconnect", "consumer": "c9"})["error"]["code"],
    ]
    assert codes == [
        "invalid_argument",
        "duplicate_consumer",
        "invalid_argument",
        "unknown_consumer",
        "unknown_consumer",
    ]
    assert _deliveries(_do(adapter, "publish", offset=0, key="k")) == [(0, "c1", 1)]


def _kit_speaks_v2() -> bool:
    from ks_conformance import protocol

    return 2 in getattr(protocol, "PROTOCOL_VERSIONS", ()) and "any" in protocol.SELECTORS


def test_smoke_and_a_short_run_reach_a_verdict(cluster: dict[str, str], tmp_path: Path) -> None:
    if not _kit_speaks_v2():
        pytest.skip("the kit speaks protocol v1, which cannot declare a dispatcher without key affinity (selector any)")
    smoke = subprocess.run(
        [*KEYSHARED, "conformance", "smoke", "--adapter", COMMAND],
        env=cluster,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert smoke.returncode == 0, smoke.stdout[-3000:] + smoke.stderr[-3000:]
    report = tmp_path / "report.jsonl"
    short = ["--seed", "0", "--examples", "2", "--steps", "12", "--timeout", "60"]
    written = ["--report", str(report), "--scenarios", str(tmp_path / "scenarios")]
    run = subprocess.run(
        [*KEYSHARED, "conformance", "run", "--adapter", COMMAND, *short, *written],
        env=cluster,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    lines = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    footer = next((line for line in lines if line.get("type") == "footer"), {})
    faults = [line for line in lines if line.get("type") == "error"]
    # a run this short may leave a MUST vacuous (verdict unknown, exit 2); an adapter fault is never acceptable
    assert run.returncode in (0, 1, 2), run.stdout[-3000:] + run.stderr[-3000:]
    assert not faults, faults
    assert footer.get("verdict") in ("conformant", "not-conformant", "unknown"), footer
    assert footer.get("examples", 0) > 0 and footer.get("steps", 0) > 0, footer
