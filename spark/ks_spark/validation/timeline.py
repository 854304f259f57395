"""The driver's half of the sequence pass: chain the runs, find the first format problem, read the configuration.

The tasks report one summary per run (split) plus the config event; here they are put in physical order and
checked across run boundaries (spec/trace.md section 2), and the trace's size, message count and configuration
read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ks_spec.errors import UserError
from ks_spec.trace import schema_problem

from ks_spark.validation.sequence import CORRUPT_PREFIX, META, PROBLEM, RUN


class MalformedTrace(UserError):
    """The trace breaks the format (spec/trace.md): it cannot be judged, the verdict is unknown."""


@dataclass(frozen=True)
class Run:
    """One split of the trace in physical order, with what the driver derived for it."""

    file: str
    block: int
    rows: int
    first_row: int | None
    first_seq: int
    last_seq: int
    first_tick: int
    last_tick: int
    first_event: str
    publishes: int
    first_pub: int | None
    extra: dict[str, Any]
    line_base: int = 0  # rows of the same file before this run
    pub_base: int = 0  # publishes in the trace before this run


@dataclass
class Timeline:
    """Everything the driver knows about a trace after the sequence pass."""

    config: dict[str, Any]
    profile: str
    events: int
    published: int
    runs: list[Run]


def _display(file: str) -> str:
    return file.removeprefix("file://").removeprefix("file:")


def build_timeline(rows: Iterable[Any], file_order: list[str], source_format: str) -> Timeline:
    """Assemble the sequence pass's small rows; raise MalformedTrace with file:line for the first problem."""
    runs_raw, problems, metas = [], [], []
    for row in rows:
        if row.rtype == RUN:
            runs_raw.append(row)
        elif row.rtype == PROBLEM:
            problems.append(row)
        elif row.rtype == META:
            metas.append(row)
    order = {_display(f): i for i, f in enumerate(file_order)}

    def file_rank(file: str) -> int:
        return order.get(_display(file), len(order))

    runs_raw.sort(key=lambda r: (file_rank(r.file), r.block))
    if not runs_raw:
        raise MalformedTrace(f"{_display(file_order[0]) if file_order else 'trace'}: the trace is empty")
    runs: list[Run] = []
    line_base: dict[str, int] = {}
    pub_base = 0
    for raw in runs_raw:
        extra = json.loads(raw.text)
        base = line_base.get(raw.file, 0)
        runs.append(
            Run(
                raw.file,
                raw.block,
                raw.idx,
                raw.row,
                raw.seq,
                raw.a,
                raw.tick,
                raw.b,
                raw.event,
                raw.c,
                raw.d,
                extra,
                base,
                pub_base,
            )
        )
        line_base[raw.file] = base + raw.idx
        pub_base += raw.c
    run_at = {(run.file, run.block): run for run in runs}

    def where(file: str, block: int, index: int) -> tuple[int, int, str]:
        run = run_at[(file, block)]
        line = run.line_base + index + 1
        if source_format == "parquet" and run.first_row is not None:
            line = run.first_row + index + 1
        return (file_rank(file), line, f"{_display(file)}:{line}")

    found: list[tuple[int, int, str, str]] = []
    for problem in problems:
        rank, line, place = where(problem.file, problem.block, problem.idx)
        found.append((rank, line, place, _describe_problem(problem.text)))
    # Rules across run boundaries (spec/trace.md section 2).
    previous: Run | None = None
    for run in runs:
        rank, line, place = where(run.file, run.block, 0)
        if previous is None:
            if run.first_event != "config":
                found.append(
                    (rank, line, place, f"field 'event': the first event must be 'config', got '{run.first_event}'")
                )
            if run.first_seq != 0:
                found.append((rank, line, place, f"field 'seq': expected 0, got {run.first_seq}"))
        else:
            if run.first_seq != previous.last_seq + 1:
                found.append((rank, line, place, f"field 'seq': expected {previous.last_seq + 1}, got {run.first_seq}"))
            step = 1 if run.first_event == "tick" else 0
            if run.first_tick != previous.last_tick + step:
                why = "a 'tick' event advances time by exactly 1" if step else "time advances only at 'tick' events"
                found.append(
                    (
                        rank,
                        line,
                        place,
                        f"field 'tick': expected {previous.last_tick + step}, got {run.first_tick} ({why})",
                    )
                )
        if run.publishes and run.first_pub != run.pub_base:
            rank_p, line_p, place_p = where(run.file, run.block, int(run.extra.get("first_pub_idx", 0)))
            expected = run.pub_base
            found.append(
                (
                    rank_p,
                    line_p,
                    place_p,
                    f"field 'offset': publish offsets are dense from 0; expected {expected}, got {run.first_pub}",
                )
            )
        excess = run.extra.get("excess")
        if excess is not None and excess >= run.pub_base:
            rank_e, line_e, place_e = where(run.file, run.block, int(run.extra["excess_idx"]))
            offset = run.extra["excess_offset"]
            found.append((rank_e, line_e, place_e, f"field 'offset': {offset} has not been published"))
        previous = run
    if found:
        found.sort(key=lambda problem: (problem[0], problem[1]))  # stable: a task's own finding wins a tie
        raise MalformedTrace(f"{found[0][2]}: {found[0][3]}")
    metas.sort(key=lambda m: m.seq)
    config_rows = [m for m in metas if m.event == "config"]
    if not config_rows:
        raise MalformedTrace(f"{_display(runs[0].file)}:1: field 'event': the first event must be 'config'")
    config = _parse_config(config_rows[0].text, _display(runs[0].file))
    profile = str(config.get("profile", "strict"))
    return Timeline(config, profile, runs[-1].last_seq + 1, pub_base, runs)


def _describe_problem(text: str) -> str:
    """A task's problem text; for a line Spark could not parse, name the field as `trace validate` would."""
    if not text.startswith(CORRUPT_PREFIX):
        return text
    raw = text.removeprefix(CORRUPT_PREFIX)
    try:
        event = json.loads(raw)
    except json.JSONDecodeError as error:
        return f"field '(line)': not valid JSON ({error.msg})"
    return schema_problem(event) or "field '(line)': a value Spark cannot read with the trace schema"


def _parse_config(detail: str, file: str) -> dict[str, Any]:
    try:
        parsed = json.loads(detail)
    except json.JSONDecodeError as error:
        raise MalformedTrace(f"{file}:1: field 'detail': not valid JSON ({error.msg})") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("config"), dict):
        raise MalformedTrace(f"{file}:1: field 'detail': must be a JSON object with a 'config' object")
    if parsed.get("trace_version") != 1:
        raise MalformedTrace(f"{file}:1: field 'detail': trace_version must be 1, got {parsed.get('trace_version')!r}")
    config: dict[str, Any] = parsed["config"]
    return config
