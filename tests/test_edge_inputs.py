"""The edge inputs of spec/trace.md section 6: check-trace and validate-replay give the same verdict and exit code.

Each input is a small trace built here; both judges run on it (the Spark one on the shared session) and
must agree with each other and with the decision in the spec. The command-line runs check that no Java
stack trace or Python traceback reaches stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ks_conformance.tracefile import check_trace
from ks_spec.trace import arrow_schema, to_table
from spark_support import spark_fixture  # noqa: F401  (the `spark` fixture)

Event = dict[str, Any]
STACK_MARKERS = ("at org.apache", "at java.", "Traceback", "Caused by", "Exception in task")


def _config(**config: Any) -> Event:
    return {"seq": 0, "tick": 0, "event": "config", "detail": json.dumps({"trace_version": 1, "config": config})}


def _base(**config: Any) -> list[Event]:
    """A small valid strict trace: two keys, each published, delivered, acked and persisted, then quiescent."""
    return [
        _config(profile="strict", selector="ring", **config),
        {"seq": 1, "tick": 0, "event": "consumer_added", "consumer": "c1", "capacity": 10, "filters": []},
        {"seq": 2, "tick": 0, "event": "publish", "offset": 0, "key": "k1"},
        {"seq": 3, "tick": 0, "event": "deliver", "offset": 0, "key": "k1", "consumer": "c1", "attempt": 1},
        {"seq": 4, "tick": 0, "event": "publish", "offset": 1, "key": "k2"},
        {"seq": 5, "tick": 0, "event": "deliver", "offset": 1, "key": "k2", "consumer": "c1", "attempt": 1},
        {"seq": 6, "tick": 0, "event": "ack", "offset": 0, "key": "k1", "consumer": "c1"},
        {"seq": 7, "tick": 0, "event": "cursor_persisted", "cursor": 1},
        {"seq": 8, "tick": 0, "event": "ack", "offset": 1, "key": "k2", "consumer": "c1"},
        {"seq": 9, "tick": 0, "event": "cursor_persisted", "cursor": 2},
        {"seq": 10, "tick": 0, "event": "quiescent"},
    ]


def _lines(events: list[Event]) -> str:
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)


def _with(events: list[Event], seq: int, **changes: Any) -> list[Event]:
    return [{**e, **changes} if e["seq"] == seq else e for e in events]


@dataclass(frozen=True)
class Edge:
    """One edge input: how to write it, the verdict spec/trace.md section 6 gives it, and what the reason names."""

    write: Callable[[Path], None]
    verdict: str  # the Python verdict; the Spark one is the same
    reason: str = ""  # a fragment of the malformed line or of the first contradiction
    slow: bool = False  # the Spark side judges the whole trace (seconds), not just its format


def _text(text: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")

    return write


def _parquet(events: list[Event], types: dict[str, pa.DataType]) -> Callable[[Path], None]:
    schema = pa.schema([pa.field(f.name, types.get(f.name, f.type), f.nullable) for f in arrow_schema()])

    def write(path: Path) -> None:
        pq.write_table(to_table(events).cast(schema), path)

    return write


def _garbled_page(path: Path) -> None:
    """A Parquet file whose footer is intact but whose `event` column's page header is garbled."""
    pq.write_table(to_table(_base()), path, compression="none")
    column = pq.ParquetFile(path).metadata.row_group(0).column(2)
    data = bytearray(path.read_bytes())
    for i in range(column.data_page_offset + 2, column.data_page_offset + 40):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


GOOD = _lines(_base())
INT32 = {c: pa.int32() for c in ("seq", "tick", "offset", "attempt", "capacity", "cursor")}
NARROW = {"seq": pa.uint32(), "tick": pa.int8(), "offset": pa.uint16(), "attempt": pa.uint8(), "capacity": pa.int16()}
EDGES: dict[str, Edge] = {
    "bom.jsonl": Edge(_text(b"\xef\xbb\xbf" + GOOD.encode()), "valid", slow=True),
    "bom-mid-file.jsonl": Edge(_text(GOOD.replace('\n{"seq":3', '\n\ufeff{"seq":3')), "unknown", ":4: field '(line)'"),
    "unknown-field.jsonl": Edge(
        _text(_lines(_with(_base(), 2, colour="red"))), "unknown", ":3: field '(event)': Additional properties"
    ),
    "null-column.jsonl": Edge(
        _text(_lines(_with(_base(), 2, consumer="c1"))), "unknown", ":3: field 'consumer': not used by a 'publish'"
    ),
    "float-offset.jsonl": Edge(
        _text(GOOD.replace('"offset":1,"key":"k2","consumer"', '"offset":1.0,"key":"k2","consumer"')),
        "unknown",
        ":6: field 'offset': 1.0 is not an int64",
    ),
    "blank-lines.jsonl": Edge(
        _text(
            GOOD.replace('\n{"seq":3', '\n\n\t \n{"seq":3').replace(
                '"offset":1,"key":"k2","consumer"', '"offset":1.0,"key":"k2","consumer"'
            )
        ),
        "unknown",
        ":8: field 'offset': 1.0 is not an int64",
    ),
    "exponent.jsonl": Edge(
        _text(GOOD.replace('"capacity":10', '"capacity":1e1')), "unknown", ":2: field 'capacity': 1e1 is not an int64"
    ),
    "beyond-int64.jsonl": Edge(
        _text(GOOD.replace('"attempt":1}', '"attempt":18446744073709551617}', 1)),
        "unknown",
        ":4: field 'attempt': 18446744073709551617 is not an int64",
    ),
    "bad-utf8.jsonl": Edge(
        _text(GOOD.encode().replace(b'"key":"k2"', b'"key":"k\xff2"', 1)),
        "unknown",
        ":5: field '(line)': not valid UTF-8",
    ),
    "truncated.jsonl": Edge(_text(GOOD[:-15]), "unknown", ":11: field '(line)': not valid JSON"),
    "wrong-key.jsonl": Edge(_text(_lines(_with(_base(), 5, key="k1"))), "unknown", "offset 1", slow=True),
    "anomaly-then-wrong-key.jsonl": Edge(
        _text(
            _lines(
                _with(
                    _with(_base(), 9, cursor=0),
                    10,
                    event="ack_ignored",
                    offset=1,
                    key="k1",
                    consumer="c1",
                    reason="resolved",
                )
            )
        ),
        "invalid",
        "offset 1",
        slow=True,
    ),
    "unknown-profile.jsonl": Edge(_text(_lines([_config(profile="fast"), *_base()[1:]])), "unknown", "'profile'"),
    "window-0.jsonl": Edge(_text(_lines(_base(window=0))), "unknown", "config field 'window': must be >= 1, got 0"),
    "backoff.jsonl": Edge(
        _text(_lines(_base(backoff_base=5, backoff_max=2))), "unknown", "config field 'backoff_base'"
    ),
    "int32.parquet": Edge(_parquet(_base(), INT32), "valid", slow=True),
    "narrow-ints.parquet": Edge(_parquet(_base(), NARROW), "valid", slow=True),
    "uint64.parquet": Edge(_parquet(_base(), {"seq": pa.uint64()}), "unknown", "field 'seq': column type uint64"),
    "garbled-page.parquet": Edge(_garbled_page, "unknown", "garbled-page.parquet"),
}
EXIT = {"valid": 0, "invalid": 1, "unknown": 2}


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every edge input, written once into one folder."""
    folder = tmp_path_factory.mktemp("edges")
    for name, edge in EDGES.items():
        edge.write(folder / name)
    return folder


def _reason(malformed: str | None, problems: list[tuple[int, str]]) -> str:
    return malformed or (f"seq {problems[0][0]}: {problems[0][1]}" if problems else "")


def _judge_both(spark: Any, path: Path) -> tuple[tuple[str, str, Counter[str]], tuple[str, str, Counter[str]]]:
    """(verdict, reason, anomaly counts) from check-trace's and validate-replay's judges."""
    from ks_spark.validation.validator import validate

    python = check_trace(path)
    python_reason = _reason(python.malformed, [(p.seq, p.message) for p in python.problems])
    python_counts = Counter(a.name for a in python.anomalies)
    result = validate(spark, str(path))
    spark_side = (result.verdict.value, _reason(result.malformed, result.problems), Counter(result.counts))
    return (python.verdict.value, python_reason, python_counts), spark_side


def _check(spark: Any, edges: Path, name: str) -> None:
    edge = EDGES[name]
    (verdict, reason, counts), (spark_verdict, spark_reason, spark_counts) = _judge_both(spark, edges / name)
    assert verdict == edge.verdict, reason
    assert spark_verdict == verdict, spark_reason
    assert spark_counts == counts
    for said in (reason, spark_reason):
        assert edge.reason in said and "\n" not in said
    if verdict == "unknown":
        assert counts == Counter(), "an unknown trace reports no anomaly"


FAST = sorted(name for name, edge in EDGES.items() if not edge.slow)
JUDGED = ["wrong-key.jsonl"]  # the contradiction of issue 14, judged whole in the default suite
SLOW = sorted(name for name, edge in EDGES.items() if edge.slow and name not in JUDGED)


@pytest.mark.spark
@pytest.mark.parametrize("name", FAST + JUDGED)
def test_both_judges_decide_the_edge_input_as_the_spec_does(spark: Any, edges: Path, name: str) -> None:
    _check(spark, edges, name)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_both_judges_decide_the_judged_edge_input_as_the_spec_does(spark: Any, edges: Path, name: str) -> None:
    """Inputs Spark accepts and judges whole (a few seconds each): a BOM, narrower Parquet integers."""
    _check(spark, edges, name)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "keyshared", *args], capture_output=True, text=True, env=env, check=False
    )


def _no_stack(stderr: str) -> None:
    for marker in STACK_MARKERS:
        assert marker not in stderr, stderr


CLI_CASES = ("garbled-page.parquet", "unknown-field.jsonl", "window-0.jsonl", "uint64.parquet")


def test_check_trace_says_each_edge_input_in_one_line_without_a_traceback(edges: Path) -> None:
    completed = _run("check-trace", "--quiet", *(str(edges / name) for name in CLI_CASES))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr == ""
    for name in CLI_CASES:
        verdict = next(line for line in completed.stdout.splitlines() if name in line)
        assert verdict.startswith("unknown") and EDGES[name].reason in completed.stdout, completed.stdout


@pytest.mark.spark
def test_validate_replay_says_each_edge_input_in_one_line_without_a_java_stack(spark: Any, edges: Path) -> None:
    """A fresh JVM, as a user gets: a garbled Parquet page used to print about 100 lines of Spark errors. An empty
    stderr also shows that our log4j2 settings silence Spark's "Setting default log level" banner."""
    completed = _run("validate-replay", "--quiet", "--master", "local[1]", *(str(edges / n) for n in CLI_CASES))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    _no_stack(completed.stderr)
    assert completed.stderr == ""  # not even the JVM's incubator-module warning, nor Spark's task-failure errors
    for name in CLI_CASES:
        verdict = next(line for line in completed.stdout.splitlines() if name in line)
        assert verdict.startswith("unknown") and EDGES[name].reason in completed.stdout, completed.stdout
