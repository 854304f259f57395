"""The trace format: samples validate, malformed traces are rejected naming line and field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ks_spec import paths
from ks_spec.errors import UserError
from ks_spec.examples import EXAMPLES_DIR, PROBLEM_RE, check_trace_examples, expected_rejections
from ks_spec.trace import (
    arrow_schema,
    batch_events,
    columns,
    event_kinds,
    load_trace,
    read_checked_events,
    read_events,
    schema,
    schema_problem,
    schema_vouched_kinds,
    validate_trace,
    write_jsonl,
    write_parquet,
)

GOOD = sorted((EXAMPLES_DIR / "good").glob("*.jsonl"))
BAD = sorted((EXAMPLES_DIR / "bad").glob("*.jsonl"))


def test_schema_is_a_valid_draft7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(schema())


def test_columns_match_the_schema_and_the_doc() -> None:
    doc = (paths.SPEC_DIR / "trace.md").read_text(encoding="utf-8")
    section = doc.split("## 1 Columns")[1].split("## 2")[0]
    documented = re.findall(r"^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \|", section, flags=re.MULTILINE)
    names = [name.strip("` ") for row in documented for name in row.split(",")]
    assert names == list(columns())
    assert arrow_schema().names == list(columns())


def test_every_event_kind_is_documented() -> None:
    doc = (paths.SPEC_DIR / "trace.md").read_text(encoding="utf-8")
    for kind in event_kinds():
        assert f"| `{kind}` |" in doc, kind
    assert len(event_kinds()) == len(schema()["allOf"])


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_samples_validate(path: Path) -> None:
    count, problem = validate_trace(path)
    assert problem is None
    assert count == sum(1 for line in path.read_text().splitlines() if line.strip())


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_samples_are_rejected_at_the_expected_line_and_field(path: Path) -> None:
    _, problem = validate_trace(path)
    assert problem is not None
    match = PROBLEM_RE.match(problem)
    assert match, problem
    want = expected_rejections()[path.name]
    assert (int(match["line"]), match["field"]) == (want["line"], want["field"])
    assert "\n" not in problem


def test_examples_check_agrees() -> None:
    good, bad, problems = check_trace_examples()
    assert (good, bad, problems) == (len(GOOD), len(BAD), [])


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_fast_and_reference_validators_agree(path: Path) -> None:
    """fastjsonschema (the fast path) and jsonschema (the full schema) accept the same events."""
    full = jsonschema.Draft7Validator(schema())
    for _, event in read_events(path):
        assert schema_problem(event) is None
        assert full.is_valid(event)
        broken = dict(event, seq=-1)
        assert schema_problem(broken) is not None and not full.is_valid(broken)


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_parquet_round_trip(path: Path, tmp_path: Path) -> None:
    events = load_trace(path)
    target = tmp_path / "trace.parquet"
    assert write_parquet(events, target) == len(events)
    assert pq.read_schema(target).names == list(columns())
    assert validate_trace(target) == (len(events), None)
    assert load_trace(target) == events
    # A folder of Parquet files is one trace, read in file-name order.
    folder = tmp_path / "parts"
    folder.mkdir()
    half = len(events) // 2
    write_parquet(events[:half], folder / "part-0.parquet")
    write_parquet(events[half:], folder / "part-1.parquet")
    assert load_trace(folder) == events


def test_jsonl_round_trip_drops_nulls(tmp_path: Path) -> None:
    events = load_trace(GOOD[0])
    target = tmp_path / "t.jsonl"
    write_jsonl([dict(e, cursor=e.get("cursor")) for e in events], target)
    assert all("null" not in line for line in target.read_text().splitlines())
    assert load_trace(target) == events


def test_truncated_parquet_is_rejected_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "t.parquet"
    write_parquet(load_trace(GOOD[0]), target)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    _, problem = validate_trace(target)
    assert problem is not None and problem.startswith(f"{target}:") and "\n" not in problem


def _parquet_with(tmp_path: Path, table: pa.Table) -> Path:
    target = tmp_path / "t.parquet"
    pq.write_table(table, target)
    return target


def test_parquet_missing_column_wrong_type_and_unknown_column(tmp_path: Path) -> None:
    base = pa.table({"seq": [0], "tick": [0], "event": ["config"], "detail": ['{"trace_version":1,"config":{}}']})
    assert validate_trace(_parquet_with(tmp_path, base)) == (1, None)
    missing = base.drop_columns(["tick"])
    assert "field 'tick': required column is missing" in (validate_trace(_parquet_with(tmp_path, missing))[1] or "")
    wrong = base.set_column(0, "seq", pa.array(["0"]))
    assert "field 'seq': column type string" in (validate_trace(_parquet_with(tmp_path, wrong))[1] or "")
    unknown = base.append_column("colour", pa.array(["red"]))
    assert "field 'colour': not a column" in (validate_trace(_parquet_with(tmp_path, unknown))[1] or "")


def test_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "t.jsonl"
    target.write_text("previous content\n")

    def events():  # type: ignore[no-untyped-def]
        yield from load_trace(GOOD[0])
        raise RuntimeError("interrupted")

    for writer in (write_jsonl, write_parquet):
        with pytest.raises(RuntimeError):
            writer(events(), target)
        assert target.read_text() == "previous content\n"
        assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_load_trace_raises_one_line_user_error() -> None:
    with pytest.raises(UserError) as caught:
        load_trace(BAD[0])
    assert "\n" not in str(caught.value) and str(BAD[0]) in str(caught.value)


def test_empty_trace_and_missing_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert validate_trace(empty) == (0, f"{empty}: the trace is empty (it needs at least a 'config' event)")
    with pytest.raises(UserError, match="no such file"):
        list(read_events(tmp_path / "absent.jsonl"))


def test_config_detail_must_carry_version_1(tmp_path: Path) -> None:
    target = tmp_path / "t.jsonl"
    target.write_text(
        json.dumps({"seq": 0, "tick": 0, "event": "config", "detail": json.dumps({"trace_version": 2, "config": {}})})
        + "\n"
    )
    assert "trace_version must be 1" in (validate_trace(target)[1] or "")


INT_COLUMNS = {f.name for f in arrow_schema() if pa.types.is_int64(f.type)}
"""The format's integer columns (each kind leaves some unused: filling one must make the row invalid)."""


def _valid_value(draw: st.DrawFn, name: str, spec: dict[str, Any]) -> Any:
    """A value the property's schema accepts, at one of its bounds when it has them."""
    types = spec.get("type", [])
    types = set(types if isinstance(types, list) else [types])
    if "enum" in spec:
        return draw(st.sampled_from(spec["enum"]))
    if "integer" in types:
        low, high = spec.get("minimum", 0), spec.get("maximum", 2**40)
        return draw(st.sampled_from([low, low + 1, high]))
    if "string" in types:
        return draw(st.sampled_from(["k", "consumer-1", "é"]))
    if name == "filters":
        return draw(st.lists(st.sampled_from(["a*", "k"]), max_size=2))
    return [[0, 1]] if name == "ranges" else None


@st.composite
def arrow_rows(draw: st.DrawFn, kinds: list[str]) -> dict[str, Any]:
    """A row of one of `kinds` that matches the schema, then, half the time, broken in one place: a required column
    null, an integer column the kind does not use filled, an integer past a bound, a string empty or outside its
    enum."""
    kind = draw(st.sampled_from(kinds))
    definition = schema()["definitions"][f"event_{kind}"]
    row: dict[str, Any] = {"seq": 0, "tick": 0, "event": kind}
    used = {n: spec for n, spec in definition["properties"].items() if spec != {"type": "null"} and n not in row}
    for name, spec in used.items():
        if name in definition["required"] or draw(st.booleans()):
            row[name] = _valid_value(draw, name, spec)
    required = [n for n in definition["required"] if n in used]
    unused = sorted(INT_COLUMNS - set(used) - set(row))
    breaks = [("null", n) for n in required] + [("fill", n) for n in unused]
    for name in (n for n in used if isinstance(row.get(n), int)):
        breaks += [("set", name, used[name].get("minimum", 0) - 1)]
        breaks += [("set", name, used[name]["maximum"] + 1)] if "maximum" in used[name] else []
    for name in (n for n in used if isinstance(row.get(n), str)):
        breaks += [("set", name, "")] if "minLength" in used[name] else []
        breaks += [("set", name, "bogus")] if "enum" in used[name] else []
    if draw(st.booleans()):
        how = draw(st.sampled_from(breaks))
        row[how[1]] = None if how[0] == "null" else 7 if how[0] == "fill" else how[2]
    return row


@st.composite
def arrow_batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows of one or two kinds (so that a kind has several rows, some broken, some not)."""
    kinds = draw(st.lists(st.sampled_from(sorted(event_kinds())), min_size=1, max_size=2, unique=True))
    return draw(st.lists(arrow_rows(kinds), min_size=1, max_size=5))


@settings(max_examples=500, deadline=None, database=None)
@given(arrow_batches())
def test_a_kind_proven_for_a_batch_is_one_whose_every_row_validates(rows: list[dict[str, Any]]) -> None:
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema())
    vouched = schema_vouched_kinds(batch)
    events = list(batch_events(batch))
    for kind in {event["event"] for event in events}:
        problems = [schema_problem(event) for event in events if event["event"] == kind]
        if kind in vouched:  # sound: never proves a row the validator refuses
            assert problems == [None] * len(problems)
        elif all(p is None for p in problems):  # complete, but for list columns (left to the row validator)
            assert any(
                e.get("filters") is not None or e.get("ranges") is not None for e in events if e["event"] == kind
            )


def test_reading_with_the_batch_proof_reports_the_row_validators_problem(tmp_path: Path) -> None:
    """A Parquet trace whose bad row sits among rows the proof would accept: the same line and message as per row."""
    events = load_trace(GOOD[0])
    bad = next(i for i, e in enumerate(events) if e.get("attempt") is not None)
    events[bad] = {**events[bad], "attempt": 0}
    write_parquet(events, tmp_path / "trace.parquet")
    found = [(where, problem) for where, _, problem in read_checked_events(tmp_path / "trace.parquet") if problem]
    expected = [(where, schema_problem(e)) for where, e in read_events(tmp_path / "trace.parquet") if schema_problem(e)]
    assert found == expected and len(found) == 1 and found[0][0].endswith(f":{bad + 1}")


def test_the_batch_proof_leaves_a_keyword_it_does_not_know_to_the_row_validator() -> None:
    """A schema keyword the proof does not handle (here `pattern`) makes it prove nothing, never pass unchecked."""
    from ks_spec.trace import _values_match

    values = pa.array(["k"], pa.string())
    assert _values_match({"type": "string", "minLength": 1}, values)
    assert not _values_match({"type": "string", "minLength": 1, "pattern": "^x"}, values)
    assert not _values_match({"type": "integer"}, values)


@pytest.mark.parametrize(
    ("spec", "fits", "breaks"),
    [
        ({"type": "integer", "minimum": 0, "maximum": 65535}, [0, 65535], [65536]),
        ({"type": "integer", "minimum": 1}, [1], [0]),
        ({"type": "string", "minLength": 1}, ["k"], [""]),
        ({"type": "string", "enum": ["nack", "timeout"]}, ["nack"], ["bogus"]),
        ({"const": "deliver"}, ["deliver"], ["ack"]),
    ],
)
def test_the_batch_proof_holds_each_bound_the_schema_sets(
    spec: dict[str, Any], fits: list[Any], breaks: list[Any]
) -> None:
    """Each bound on its own, at its edge (the property test above meets the rare ones, such as maxima, by chance)."""
    from ks_spec.trace import _values_match

    assert _values_match(spec, pa.array(fits))
    assert not _values_match(spec, pa.array(fits + breaks))
