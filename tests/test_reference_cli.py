"""`keyshared route`, `hash` and `simulate`: what users run to predict routing and to produce traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from keyshared.cli import main
from ks_conformance.checker import check_events
from ks_reference.workloads import NAMED_WORKLOADS
from ks_spec.trace import load_trace, validate_trace

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keyshared", *args], capture_output=True, text=True, check=False, cwd=ROOT
    )


def test_hash_prints_the_documented_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hash", "--json", "Order-3459134", "order-123", ""]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["murmur3"] == 3112179635
    assert rows[0]["pulsar_range_slot"] == 6067 and rows[0]["pulsar_consistent_slot"] == 20788
    assert rows[1]["danube"] == 3430057601 and rows[2]["danube"] == 3323002737


def test_route_predicts_pulsar_auto_split(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["route", "--selector", "pulsar-auto-split", "--consumers", "a,b", "--ranges", "--json", "Order-3459134"])
        == 0
    )
    answer = json.loads(capsys.readouterr().out)
    assert answer["routes"] == [{"key": "Order-3459134", "murmur3": 3112179635, "slot": 6067, "consumer": "b"}]
    assert answer["ranges"] == {"b": [[1, 32768]], "a": [[32769, 65536]]}


def test_route_tables_and_sticky_gaps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route", "--selector", "pulsar-sticky", "--consumers", "a=0-6000,b=7000-65535", "Order-3459134"]) == 0
    out = capsys.readouterr().out
    assert "6067" in out and "(none)" in out  # slot 6067 lies in no declared range


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--selector", "pulsar-sticky", "--consumers", "a=0-100,b=50-200", "k"], "overlaps"),
        (["--selector", "ring", "--consumers", "a,a", "k"], "appears twice"),
        (["--selector", "danube", "--consumers", "a", "--points", "5", "k"], "--points"),
        (["--selector", "ring", "--consumers", "a"], "at least one KEY"),
    ],
)
def test_route_mistakes_are_one_line(args: list[str], fragment: str) -> None:
    completed = _cli("route", *args)
    assert completed.returncode == 65
    assert completed.stderr.count("\n") == 1 and fragment in completed.stderr and "Traceback" not in completed.stderr


@pytest.mark.parametrize("name", sorted(NAMED_WORKLOADS))
def test_every_named_workload_writes_a_valid_trace(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / f"{name}.jsonl"
    assert main(["simulate", name, "--messages", "300", "--out", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "quiescent at the end" in out and "well formed" in out
    count, problem = validate_trace(trace)
    assert problem is None and count > 300
    events = load_trace(trace)
    assert events[-1]["event"] == "quiescent"
    checker = check_events(events)
    assert [a.name for a in checker.anomalies] == [] and checker.problems == []


def test_ops_out_replays_to_the_same_trace(tmp_path: Path) -> None:
    # req: KS-GEN-5: the ops a named run performed, replayed from a file, give the same events
    first, second, ops = tmp_path / "a.parquet", tmp_path / "b.jsonl", tmp_path / "ops.jsonl"
    assert main(["simulate", "poison-block", "--messages", "200", "--out", str(first), "--ops-out", str(ops)]) == 0
    assert main(["simulate", "--file", str(ops), "--out", str(second)]) == 0
    assert validate_trace(first)[1] is None
    assert load_trace(first) == load_trace(second)


def test_shipped_workload_files_run(tmp_path: Path) -> None:
    for path in sorted((ROOT / "reference/workloads").glob("*.jsonl")):
        trace = tmp_path / f"{path.stem}.jsonl"
        assert main(["simulate", "--file", str(path), "--out", str(trace)]) == 0
        assert validate_trace(trace)[1] is None


@pytest.mark.parametrize(
    ("lines", "where"),
    [
        (['{"op": "publish", "key": "k"}', "not json"], ":2: field '(line)': not valid JSON"),
        (['{"op": "teleport"}'], ":1: field 'op': 'teleport' is not an op"),
        (['{"op": "publish", "key": "k", "colour": 1}'], ":1: field 'colour': op 'publish' takes no such field"),
        (['{"op": "ack", "consumer": "c"}'], ":1: field 'offset': required by op 'ack' but missing"),
        (['{"op": "add_consumer", "consumer": "c", "capacity": "2"}'], ":1: field 'capacity': must be a JSON integer"),
        (['{"op": "tick", "count": -3}'], ":1: field 'count': must be an integer >= 1, got -3"),
        (['{"op": "tick"}', '{"op": "config", "config": {}}'], ":2: field 'op': a 'config' line must come first"),
        (["[1, 2]"], ":1: field '(line)': expected a JSON object"),
    ],
)
def test_bad_workload_files_get_one_line_naming_line_and_field(tmp_path: Path, lines: list[str], where: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "never.jsonl"
    completed = _cli("simulate", "--file", str(path), "--out", str(out))
    assert completed.returncode == 65, completed.stderr
    assert completed.stderr.count("\n") == 1 and f"{path}{where}" in completed.stderr
    assert "Traceback" not in completed.stderr and not out.exists()


def test_bad_configuration_is_refused_naming_the_field(tmp_path: Path) -> None:
    completed = _cli("simulate", "steady", "--set", "window=0")
    assert completed.returncode == 65
    assert "config field 'window': must be >= 1, got 0" in completed.stderr and completed.stderr.count("\n") == 1
    completed = _cli("simulate", "steady", "--set", "bucket_budget=3")
    assert "config field 'bucket_budget': only applies to selector 'buckets'" in completed.stderr


def test_refused_ops_are_warnings_with_their_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(
        '{"op": "add_consumer", "consumer": "c1", "capacity": 1}\n{"op": "ack", "consumer": "c9", "offset": 0}\n'
        '{"op": "settle"}\n',
        encoding="utf-8",
    )
    assert main(["simulate", "--file", str(path)]) == 0
    captured = capsys.readouterr()
    assert f"{path}:2: op 'ack' refused (unknown_consumer)" in captured.err


def test_settle_without_a_member_for_every_key_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(
        '{"op": "add_consumer", "consumer": "eu", "capacity": 1, "filters": ["eu-*"]}\n'
        '{"op": "disconnect", "consumer": "eu"}\n{"op": "publish", "key": "eu-1"}\n{"op": "settle", "max_ticks": 5}\n',
        encoding="utf-8",
    )
    completed = _cli("simulate", "--file", str(path), "--set", "evict_after=0")
    assert completed.returncode == 65 and "settle: no quiescence within 5 ticks" in completed.stderr
