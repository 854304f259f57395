"""The JSON lines reader (ks_spec.trace `_read_jsonl`): Arrow reads a stretch of lines at a time, and from the first
stretch it may not read exactly, the line reader takes over. Whatever the file, the events, their places, their
schema problems and the error that ends the file are the line reader's own."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import ks_spec.trace as trace
import pytest
from ks_conformance.checker import Checker
from ks_spec.errors import UserError
from ks_spec.trace import columns, compact, read_checked_events, write_jsonl
from test_checker import ALL_CASES
from test_sharding_jsonl import ACCEPTED, REFUSED, _write, churn


def read_all(reader: Any) -> tuple[list[tuple[str, Any, str | None]], str | None]:
    """Every (place, event, problem) a reader yields, and the error it ends with (None if none); a field written null
    left out of its event (Arrow reads it absent, test_a_field_written_null_is_judged_as_one_left_out)."""
    events: list[tuple[str, Any, str | None]] = []
    try:
        for where, event, problem in reader:
            if isinstance(event, dict):
                event = {name: value for name, value in event.items() if value is not None}
            events.append((where, event, problem))
    except UserError as error:
        return events, str(error)
    return events, None


def line_reader(path: Path) -> tuple[list[tuple[str, Any, str | None]], str | None]:
    return read_all(trace._read_json_lines(path, 0, 0, checked=True))


@pytest.mark.parametrize("edit", sorted({**REFUSED, **ACCEPTED}))
def test_every_edit_reads_as_the_line_reader_reads_it(
    edit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sharded conversion's refused and accepted edits, in stretches of one line to the whole file."""
    path = tmp_path / "trace.jsonl"
    _write(path, churn()[:150], {**REFUSED, **ACCEPTED}[edit], final=True)
    expected = line_reader(path)
    for chunk in (1, 150, 1 << 20):
        monkeypatch.setattr(trace, "JSON_CHUNK", chunk)
        assert read_all(read_checked_events(path)) == expected, chunk


def test_random_damage_reads_as_the_line_reader_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random bytes that JSON, the format or the line reader care about, put anywhere in a trace: the reader's
    events, places, problems and error are the line reader's, in stretches of every size."""
    rng = random.Random(11)
    path = tmp_path / "trace.jsonl"
    write_jsonl(churn()[:60], path)
    clean = path.read_bytes()
    pieces = [
        b'"',
        b",",
        b".5",
        b"e3",
        b"1",
        b" ",
        b"\r",
        b"\n",
        b"\r\n",
        b"null",
        b"\xef\xbb\xbf",
        b"\xff",
        b"{",
        b"}",
    ]
    pieces += [b"[", b"]", b"\t", b"\\u00e9", b"\\ud800", b'"zz":1,', b'"seq":', b"99999999999999999999", b"-"]
    arrow_only = 0
    for _ in range(150):
        data = bytearray(clean)
        for _ in range(rng.randrange(1, 3)):
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.choice(pieces)
        path.write_bytes(bytes(data))
        expected = line_reader(path)
        monkeypatch.setattr(trace, "JSON_CHUNK", rng.choice((1, 64, 700, 1 << 20)))
        assert read_all(read_checked_events(path)) == expected
        arrow_only += trace.json_lines_table(bytes(data), True).__class__ is not str
    assert 5 <= arrow_only <= 145  # (both readers are exercised: some damage Arrow reads, most it refuses)


def test_a_clean_trace_is_read_by_arrow_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Left out or written null, the fields a kind does not use keep a trace on Arrow's path (when checked)."""
    compact_path, full_path = tmp_path / "compact.jsonl", tmp_path / "full.jsonl"
    write_jsonl(churn(), compact_path)
    full_path.write_text("".join(json.dumps({c: e.get(c) for c in columns()}) + "\n" for e in churn()))
    expected = line_reader(compact_path)
    monkeypatch.setattr(trace, "_read_json_lines", None)  # (calling it would fail)
    monkeypatch.setattr(trace, "JSON_CHUNK", 500)
    assert read_all(read_checked_events(compact_path)) == expected and expected[1] is None
    places = [(where.replace("compact", "full"), event, problem) for where, event, problem in expected[0]]
    assert read_all(read_checked_events(full_path)) == (places, None)


def judgment(events: list[dict[str, Any]]) -> tuple[Any, ...]:
    """The checker's findings and counts on events fed in memory."""
    checker = Checker()
    for event in events:
        checker.feed(event)
    checker.finish()
    anomalies = sorted((a.name, a.seq, a.witness, repr(a.explanation), repr(a.details)) for a in checker.anomalies)
    return anomalies, dict(checker.exercised), [(p.seq, p.message) for p in checker.problems]


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_a_field_written_null_is_judged_as_one_left_out(name: str, number: int, pair: Any) -> None:
    """What lets the reader read a null field absent: every catalogue case and its twin, each event with every column
    the format has (null where it has none, as a writer that leaves nothing out writes it), judged as the events
    without them."""
    for recipe in pair:
        events = recipe().events
        full = [{column: event.get(column) for column in columns()} for event in events]
        assert any(None in event.values() for event in full)
        assert judgment(full) == judgment([compact(event) for event in events])
