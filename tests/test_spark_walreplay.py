"""Replaying a log on Spark: the reference's exact events, a valid trace, and a crash that loses nothing.

The log replay writes the whole run as a trace; turning that trace back into ops and running them
through the reference must give the same effects, op by op. The checker (Python) must find the trace
valid and the validator (Spark) valid too (every kind, the one-task pass included), including across a
crash, and both must reject a replay whose restart forgets what the store said was unresolved.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ks_conformance.tracefile import check_trace
from ks_reference.adapter import ReferenceAdapter
from ks_spark.dispatcher.engine import KeyItem, LaggedAckEngine
from ks_spark.dispatcher.walreplay import UNBOUNDED_CAPACITY, ControlOp, LogReplay, control_ops_from, replay_log
from ks_spark.validation.validator import validate
from ks_spec.trace import load_trace
from spark_support import spark_fixture

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ks_spark.dispatcher.engine import Emitted
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
spark = spark_fixture

Event = dict[str, Any]
OP_OF = {
    "publish": lambda e: {"op": "publish", "offset": e["offset"], "key": e["key"]},
    "consumer_added": lambda e: {
        "op": "add_consumer", "consumer": e["consumer"], "capacity": e["capacity"], "filters": list(e["filters"] or [])
    },
    "consumer_removed": lambda e: {"op": "remove_consumer", "consumer": e["consumer"]},
    "restart": lambda e: {"op": "restart"},
    "ack": lambda e: {"op": "ack", "consumer": e["consumer"], "offset": e["offset"]},
}  # fmt: skip


def write_log(path: Path, messages: int, keys: int, seed: int = 1) -> Path:
    rng = random.Random(seed)
    table = pa.table(
        {
            "offset": pa.array(range(messages), pa.int64()),
            "key": [f"k{rng.randrange(keys)}" for _ in range(messages)],
            "payload": [f"p{n}" for n in range(messages)],
        }
    )
    pq.write_table(table, path)
    return path


def ops_and_effects(events: list[Event]) -> tuple[dict[str, Any], list[dict[str, Any]], list[list[Event]]]:
    """A trace back into the ops that made it (acks included) and each op's effects."""
    config = json.loads(events[0]["detail"])["config"]
    ops: list[dict[str, Any]] = []
    effects: list[list[Event]] = []
    for event in events[1:]:
        kind = event["event"]
        if kind in OP_OF:
            ops.append(OP_OF[kind](event))
            effects.append([])
        if kind not in OP_OF or kind == "ack":
            if kind != "quiescent":
                effects[-1].append({k: v for k, v in event.items() if k not in ("seq", "tick") and v is not None})
    return config, ops, effects


def churn(messages: int) -> list[ControlOp]:
    return [
        *control_ops_from(["c1", "c2"]),
        ControlOp(
            messages // 4, {"op": "add_consumer", "consumer": "c3", "capacity": UNBOUNDED_CAPACITY, "filters": ["k1*"]}
        ),
        ControlOp(messages // 2, {"op": "remove_consumer", "consumer": "c1"}),
    ]  # fmt: skip


@pytest.mark.parametrize("profile", ["owner", pytest.param("strict", marks=pytest.mark.slow)])  # strict: slow tier
def test_a_log_replay_is_the_references_run_and_a_valid_trace(
    spark: SparkSession, tmp_path: Path, profile: str
) -> None:
    log = write_log(tmp_path / "log.parquet", 300, 20)
    replay = LogReplay(str(log), profile=profile, lag=4, controls=churn(300), crashes=[220])
    summary = replay_log(spark, replay, str(tmp_path / "trace"), partitions=3)
    events = load_trace(tmp_path / "trace")
    assert [e["seq"] for e in events] == list(range(len(events))) == list(range(summary.events))
    config, ops, effects = ops_and_effects(events)
    reference = ReferenceAdapter(durable=False)
    assert reference.reset(config)["ok"]
    for number, (op, expected) in enumerate(zip(ops, effects, strict=True)):
        assert reference.op(op)["events"] == expected, (number, op)
    assert summary.acks >= 300 - summary.filtered and summary.cursor == 300  # acks before a crash may come twice
    assert summary.duplicates > 0, "the crash came with deliveries outstanding: they are delivered again"
    python = check_trace(tmp_path / "trace")
    assert python.verdict.value == "valid", [a.name for a in python.anomalies]
    judged = validate(spark, str(tmp_path / "trace"))
    assert judged.verdict.value == "valid" and judged.total == 0


class ForgetsOnRestart(LaggedAckEngine):
    """A restart that keeps the read position: what was unresolved below it is never read again."""

    def run(self, items: Iterable[KeyItem], start: int) -> Iterator[Emitted]:
        return super().run([item for item in items if item.kind != "reread"], start)


def test_a_crash_loses_nothing_and_a_restart_that_forgets_is_caught(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = write_log(tmp_path / "log.parquet", 400, 12, seed=2)
    replay = LogReplay(str(log), profile="owner", lag=6, controls=control_ops_from(["c1", "c2"]), crashes=[300])
    replay_log(spark, replay, str(tmp_path / "good"), partitions=2)
    events = load_trace(tmp_path / "good")
    restart = next(e["seq"] for e in events if e["event"] == "restart")
    persisted = max(e["cursor"] for e in events if e["event"] == "cursor_persisted" and e["seq"] < restart)
    redelivered = {e["offset"] for e in events if e["event"] == "deliver" and e["seq"] > restart and e["offset"] < 300}
    # req: KS-CUR-3 — everything at or above the persisted cursor, published before the crash, comes again
    assert redelivered == set(range(persisted, 300))
    assert persisted < 300, "the crash came with deliveries outstanding"
    assert check_trace(tmp_path / "good").verdict.value == "valid"  # Spark's judge of a valid replay: the test above

    import ks_spark.dispatcher.walreplay as walreplay
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Spark's workers cannot import tests/
    monkeypatch.setattr(walreplay, "LaggedAckEngine", ForgetsOnRestart)
    replay_log(spark, replay, str(tmp_path / "bad"), partitions=2)
    judged = validate(spark, str(tmp_path / "bad"))
    assert judged.verdict.value == "invalid"
    assert "stuck-key" in judged.counts
    assert check_trace(tmp_path / "bad").verdict.value == "invalid"


def test_bad_input_is_one_line_with_the_place(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused in one line, in process on the run's Spark session (a fresh process and JVM per case cost 30 s)."""
    from keyshared.cli import main

    def keyshared(*args: str) -> tuple[int, str]:
        code = main(list(args))
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return code, err.strip()

    out = str(tmp_path / "t")
    code, err = keyshared("spark-dispatch", str(tmp_path / "none.parquet"), "--out", out, "--consumers", "a")
    assert code == 66 and "no such log" in err
    code, err = keyshared("spark-dispatch", str(tmp_path / "none.parquet"), "--out", out, "--ack-lag", "0")
    assert code == 64 and "--ack-lag" in err
    membership = tmp_path / "members.jsonl"
    membership.write_text('{"at": 0, "op": "add_consumer", "consumer": "c1"}\n{"at": -3, "op": "add_consumer"}\n')
    log = write_log(tmp_path / "log.parquet", 10, 2)
    code, err = keyshared("spark-dispatch", str(log), "--out", out, "--membership", str(membership))
    assert code == 65
    assert err.endswith(f"{membership}:2: field 'at': expected an offset (an integer >= 0), got -3")
    gap = tmp_path / "gap.parquet"
    pq.write_table(pa.table({"offset": pa.array([0, 1, 3], pa.int64()), "key": ["a", "b", "c"]}), gap)
    code, err = keyshared("spark-dispatch", str(gap), "--out", out, "--consumers", "a")
    assert code == 65 and "no gap or repeat" in err.splitlines()[-1]
    assert not (tmp_path / "t").exists(), "nothing is written when the input is refused"


def test_a_failed_replay_leaves_the_previous_trace_and_nothing_half_written(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace is written beside --out and moved there only on success; a Spark failure is one line, exit 70."""
    from keyshared.cli import main
    from ks_spark.dispatcher import walreplay
    from pyspark.errors import PySparkException

    log = write_log(tmp_path / "log.parquet", 10, 2)
    out = tmp_path / "trace"
    out.mkdir()
    (out / "part-0.parquet").write_text("the previous run's trace")

    def dies_midway(session: Any, replay: Any, staging: str, **kwargs: Any) -> Any:
        Path(staging).mkdir()
        (Path(staging) / "part-0.parquet").write_text("half")
        raise PySparkException(message="java.lang.OutOfMemoryError: Java heap space")

    monkeypatch.setattr(walreplay, "replay_log", dies_midway)
    assert main(["spark-dispatch", str(log), "--out", str(out), "--consumers", "a"]) == 70
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"keyshared: error: {log}: the Spark job failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet", "trace"]
    assert (out / "part-0.parquet").read_text() == "the previous run's trace"
    monkeypatch.undo()
    assert main(["spark-dispatch", str(log), "--out", str(out), "--consumers", "a"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet", "trace"]
    assert check_trace(out).verdict.value == "valid"
