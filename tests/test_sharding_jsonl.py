"""`check-trace --jobs N` on JSON lines (ks_conformance.sharding.jsonl): the file converted to Parquet parts in
parallel must be the events the one-process reader reads, or be refused (then one process judges it and names the
line); the judgment of the parts is the Parquet path's (tests/test_sharding_parquet.py)."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ks_conformance.sharding.jsonl as jsonl
import ks_conformance.sharding.run as run
import pytest
from ks_conformance.anomalies import verdict_of
from ks_conformance.sharding.jsonl import byte_ranges, convert_jsonl
from ks_conformance.sharding.merge import Unsharded, anomaly_order
from ks_conformance.sharding.run import judge_in_shards_with
from ks_conformance.tracefile import TraceCheck, check_trace
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spec.trace import compact, read_events, write_jsonl
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES

Event = dict[str, Any]


def outcome(result: TraceCheck) -> tuple[Any, ...]:
    """What a user reads of a judgment: verdict, anomalies with their details, counts, why it is malformed."""
    anomalies = [(*anomaly_order(a), repr(a.details)) for a in sorted(result.anomalies, key=anomaly_order)]
    return result.verdict.value, anomalies, result.exercised, result.malformed


def churn(seed: int = 5) -> list[Event]:
    events = INJECTIONS["capacity-overrun"][1](run_named("churn", size=80, seed=seed, store=MemoryStore()).events)
    assert events is not None
    return events


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_the_parts_hold_the_events_the_reader_reads(
    name: str, number: int, pair: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every catalogue case and its twin, as JSON lines cut into parts of a few hundred bytes: the parts, read in
    order, are the trace's events exactly (the one-process reader's view of the file)."""
    monkeypatch.setattr(jsonl, "PART_BYTES", 300)
    for index, recipe in enumerate(pair):
        events = recipe().events
        path = tmp_path / f"trace-{index}.jsonl"
        write_jsonl(events, path)
        parts = tmp_path / f"parts-{index}"
        parts.mkdir()
        assert convert_jsonl(path, parts, 2) is None
        assert [event for _, event in read_events(parts)] == [event for _, event in read_events(path)]
        assert [event for _, event in read_events(parts)] == [compact(event) for event in events]


def test_byte_ranges_end_at_line_ends_and_cover_the_file(tmp_path: Path) -> None:
    rng = random.Random(3)
    for _ in range(60):
        lines = [b"x" * rng.randrange(0, 40) for _ in range(rng.randrange(1, 60))]
        data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        path = tmp_path / "lines.jsonl"
        path.write_bytes(data)
        parts, part_bytes = rng.randrange(1, 9), rng.randrange(1, 200)
        ranges = byte_ranges(path, parts, part_bytes)
        if not data:
            assert ranges == []
            continue
        assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
        assert all(high == next_low for (_, high), (next_low, _) in itertools.pairwise(ranges))
        assert all(low < high and data[high - 1 : high] == b"\n" for low, high in ranges[:-1])
    path.write_bytes(b"".join(b"%09d\n" % number for number in range(100)))  # lines of 10 bytes
    assert len(byte_ranges(path, 4, 1 << 20)) == 4 and len(byte_ranges(path, 1, 100)) == 10


def test_json_lines_are_judged_in_shards_as_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Injected faults written as JSON lines, cut into many parts, judged in 2 and 3 shards: one process's judgment
    of the file, and the time the conversion took is reported."""
    monkeypatch.setattr(jsonl, "PART_BYTES", 4096)
    for target in ("cursor-skip/holes", "key-reorder"):
        workload, inject = INJECTIONS[target]
        events = inject(run_named(workload, size=200, seed=4, store=MemoryStore()).events)
        assert events is not None
        path = tmp_path / f"{target.replace('/', '-')}.jsonl"
        write_jsonl(events, path)
        whole = check_trace(path)
        for shards, batch in ((2, 64), (3, 5)):
            judged = judge_in_shards_with(path, shards, map, batch)
            assert not isinstance(judged, Unsharded), judged.reason
            anomalies = [(*anomaly_order(a), repr(a.details)) for a in judged.anomalies]
            verdict = verdict_of(judged.anomalies, undecidable=False).value
            assert (verdict, anomalies, judged.exercised, None) == outcome(whole)
            assert judged.events == whole.events and "convert" in judged.seconds
        assert whole.anomalies, target


def _edit(line: int, change: Callable[[bytes], bytes]) -> Callable[[list[bytes]], list[bytes]]:
    def edit(lines: list[bytes]) -> list[bytes]:
        return [change(text) if number == line else text for number, text in enumerate(lines)]

    return edit


def _publish_line(lines: list[bytes]) -> int:
    return next(number for number, text in enumerate(lines) if b'"event":"publish"' in text)


def _publish(old: bytes, new: bytes) -> Callable[[list[bytes]], list[bytes]]:
    """Replace `old` by `new` in the first publish's line."""
    return lambda lines: _edit(_publish_line(lines), lambda text: text.replace(old, new, 1))(lines)


def _line(number: int, change: Callable[[bytes], bytes]) -> Callable[[list[bytes]], list[bytes]]:
    return lambda lines: _edit(number, change)(lines)


REFUSED: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "an offset with a fraction": _publish(b'"offset":0', b'"offset":0.0'),
    "an offset with an exponent": _publish(b'"offset":0', b'"offset":0e0'),
    "a seq beyond int64": _line(3, lambda text: text.replace(b'"seq":3', b'"seq":9223372036854775811')),
    "a key that is a number": _line(5, lambda text: re.sub(rb'"(key|consumer)":"[^"]*"', b'"\\1":7', text)),
    "a field the format has not": _line(4, lambda text: text[:-1] + b',"colour":"red"}'),
    "a field given twice": _line(4, lambda text: text[:-1] + b',"tick":0}'),
    "two events on one line": lambda lines: [*lines[:5], lines[5] + lines[6], *lines[7:]],
    "a line that is an array": lambda lines: [*lines[:5], b"[1, 2]", *lines[5:]],
    "bytes that are not UTF-8": _publish(b'"key":"', b'"key":"\xff'),
    "a lone surrogate": _publish(b'"key":"', b'"key":"\\ud800'),
    "a byte order mark after the first line": _line(9, lambda text: b"\xef\xbb\xbf" + text),
    "a carriage return ending a line": lambda lines: [*lines[:3], lines[3] + b"\r" + lines[4], *lines[5:]],
    "a form feed line": lambda lines: [*lines[:3], b"\x0c", *lines[3:]],
    "a raw tab in a string": _publish(b'"key":"', b'"key":"\t'),
    "a trailing comma": _line(4, lambda text: text[:-1] + b",}"),
    "a required field written as null": lambda lines: _edit(
        _publish_line(lines), lambda text: re.sub(rb'"key":"[^"]*"', b'"key":null', text)
    )(lines),
}
"""Lines the converter must not turn into events the one-process reader would not read (it reads some of them,
differently or not at all), or that the shards find malformed (a required field written null, which the converter
reads absent): the trace is judged in one process, which names the line."""

ACCEPTED: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "null fields the kinds do not use": lambda lines: [
        text[:-1] + b',"predecessor":null,"range_lo" : null}' for text in lines
    ],
    "blank lines of JSON whitespace": lambda lines: [*lines[:4], b"", b" \t ", b"\r", *lines[4:]],
    "a byte order mark opening the file": _line(0, lambda text: b"\xef\xbb\xbf" + text),
    "lines ended by CR LF": lambda lines: [line + b"\r" for line in lines],
    "spaces around a line": _line(4, lambda text: b"  " + text + b" "),
}
"""Edits the one-process reader reads as the same events: the trace is still judged in shards."""


def _write(path: Path, events: Sequence[Event], edit: Callable[[list[bytes]], list[bytes]], final: bool) -> None:
    write_jsonl(events, path)
    lines = edit(path.read_bytes().split(b"\n")[:-1])
    path.write_bytes(b"\n".join(lines) + (b"\n" if final else b""))


@pytest.mark.parametrize("edit", sorted(REFUSED))
def test_what_the_conversion_cannot_keep_is_judged_in_one_process(
    edit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wherever the edited line falls (the parts are cut at every line end in turn), the trace is not judged in
    shards, and the judgment is one process's, naming the line."""
    path = tmp_path / "trace.jsonl"
    _write(path, churn(), REFUSED[edit], final=True)
    whole = check_trace(path)
    for part_bytes in (1500, 1 << 20):  # (a part's start, where Arrow skips a byte order mark: test_trace_jsonl_reader)
        monkeypatch.setattr(jsonl, "PART_BYTES", part_bytes)
        assert isinstance(judge_in_shards_with(path, 2, map, 64), Unsharded), part_bytes
    monkeypatch.setattr(run, "check_in_shards", lambda path, jobs: judge_in_shards_with(path, jobs, map, 64))
    result = check_trace(path, jobs=2)  # (in this process: tests/test_sharding_parquet.py runs the real workers)
    assert result.judged.startswith("in one process: ") and outcome(result) == outcome(whole)


@pytest.mark.parametrize("edit", sorted(ACCEPTED))
def test_what_the_reader_reads_alike_is_judged_in_shards(edit: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    for final in (True, False):
        _write(path, churn(), ACCEPTED[edit], final=final)
        whole = check_trace(path)
        assert whole.malformed is None and whole.anomalies
        judged = judge_in_shards_with(path, 2, map, 64)
        assert not isinstance(judged, Unsharded), judged.reason
        anomalies = [(*anomaly_order(a), repr(a.details)) for a in judged.anomalies]
        assert (anomalies, judged.exercised) == outcome(whole)[1:3]


def test_an_empty_json_lines_trace_is_judged_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n  \n")
    monkeypatch.setattr(run, "check_in_shards", lambda path, jobs: judge_in_shards_with(path, jobs, map, 64))
    result = check_trace(path, jobs=2)
    assert result.judged == "in one process: the trace is empty" and result.verdict.value == "unknown"
