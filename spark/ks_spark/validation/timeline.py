"""The driver's half of the sequence pass: chain the runs, find the first format problem, build the timeline.

The tasks report one summary per run (split) plus the few timeline events; here they are put in
physical order, checked across run boundaries, and turned into the `keystate.Context` every key
needs and the facts the global checks need (published counts, persisted cursors at restarts and at
quiescent points, cursor regressions across runs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ks_spec.errors import UserError
from ks_spec.trace import schema_problem

from ks_spark.validation import catalogue
from ks_spark.validation.keystate import (
    END_EVICTED,
    END_REMOVED,
    END_RESTART,
    NEVER,
    Context,
    Incarnation,
    Restart,
)
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
    last_persist_ranges: list[list[int]] | None
    line_base: int = 0  # rows of the same file before this run
    pub_base: int = 0  # publishes in the trace before this run


@dataclass(frozen=True)
class MemberAt:
    """A member at a quiescent point: what decides whether it has room for a returned message (KS-MEM-1)."""

    inc_id: int
    capacity: int
    connected: bool
    filters: tuple[str, ...]
    granted: int  # permits granted since it joined (flow_control "permits"), its capacity not included


@dataclass(frozen=True)
class QuiescentPoint:
    """A `quiescent` event with the published count and the persisted cursor at that point."""

    seq: int
    published: int
    persist_seq: int
    persist_cursor: int
    members: tuple[MemberAt, ...] = ()


@dataclass(frozen=True)
class Regression:
    """A persisted cursor below the previous one, found across two runs."""

    seq: int
    cursor: int
    previous_seq: int
    previous_cursor: int


@dataclass
class Timeline:
    """Everything the driver knows about a trace after the sequence pass."""

    config: dict[str, Any]
    profile: str
    events: int
    published: int
    persists: int
    runs: list[Run]
    context: Context
    quiescents: list[QuiescentPoint] = field(default_factory=list)
    regressions: list[Regression] = field(default_factory=list)
    contradictions: list[tuple[int, str]] = field(default_factory=list)
    keyless_ignored: int = 0
    unknown_acks: int = 0
    declared: dict[str, Any] = field(default_factory=dict)
    """The config event's `declared` (adapter protocol v2: cursor, terminal outcomes, durable attempts)."""

    @property
    def window(self) -> int:
        """The configured look-ahead bound (spec section 20 default: 10000)."""
        return int(self.config.get("window", 10000))

    def pub_bases(self) -> dict[tuple[str, int], int]:
        """Publishes before each run, keyed by (file, split start): turns a run-local count into a global one."""
        return {(run.file, run.block): run.pub_base for run in self.runs}


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
                raw.ranges,
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
    declared = _parse_declared(config_rows[0].text)
    profile = str(config.get("profile", "strict"))
    context, quiescents, contradictions = _context(metas, runs, config)
    regressions = _cross_run_regressions(runs)
    events = runs[-1].last_seq + 1
    persists = sum(int(run.extra.get("persists", 0)) for run in runs)
    keyless = sum(int(run.extra.get("keyless_ignored", 0)) for run in runs)
    unknown_acks = sum(int(run.extra.get("unknown_acks", 0)) for run in runs)
    return Timeline(
        config,
        profile,
        events,
        pub_base,
        persists,
        runs,
        context,
        quiescents,
        regressions,
        contradictions,
        keyless,
        unknown_acks,
        declared,
    )


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


def _parse_declared(detail: str) -> dict[str, Any]:
    """The config detail's `declared` object (empty when absent); `_parse_config` has checked the detail."""
    declared = json.loads(detail).get("declared", {})
    return dict(declared) if isinstance(declared, dict) else {"(malformed)": declared}


SLOTS = 65536
MEMBER_VERBS = {
    "consumer_removed": "left",
    "consumer_disconnected": "disconnected",
    "consumer_reconnected": "reconnected",
    "permits_granted": "granted permits",
}
"""The membership ops that must name a member, and the verb a contradiction uses for each."""


def _covers_every_slot(ranges: list[tuple[int, int]]) -> bool:
    covered = 0
    for lo, hi in sorted(ranges):
        if lo > covered:
            return False
        covered = max(covered, hi + 1)
    return covered >= SLOTS


def _context(
    metas: list[Any], runs: list[Run], config: dict[str, Any]
) -> tuple[Context, list[QuiescentPoint], list[tuple[int, str]]]:
    """Incarnations, epochs, restarts (with the cursor they resumed from), quiescent points, contradictions.

    Membership is read exactly as the Python checker reads it: a join of a current member, or a
    leave or disconnection of a non-member, contradicts the trace and changes nothing.
    """
    profile = str(config.get("profile", "strict"))
    sticky = config.get("selector", "ring") == "pulsar-sticky"
    run_at = {(run.file, run.block): run for run in runs}
    incarnations: dict[str, list[Incarnation]] = {}
    current: dict[str, int] = {}  # name -> index of its live incarnation in incarnations[name]
    ranges_of: dict[str, list[tuple[int, int]]] = {}
    epoch_changes: list[int] = []
    restarts: list[Restart] = []
    quiescents: list[QuiescentPoint] = []
    judged: set[int] = set()
    contradictions: list[tuple[int, str]] = []
    next_id = 0
    connected: dict[str, bool] = {}
    filters_of: dict[str, tuple[str, ...]] = {}
    granted: dict[str, int] = {}

    def end(name: str, seq: int, kind: int) -> None:
        index = current.pop(name)
        inc = incarnations[name][index]
        incarnations[name][index] = Incarnation(
            inc.inc_id, inc.name, inc.added, inc.capacity, seq, kind, inc.accepts_all
        )

    def persisted_before(meta: Any) -> tuple[int, int, list[list[int]] | None]:
        if meta.b is not None and meta.b >= 0:
            return int(meta.b), int(meta.d), meta.ranges
        run = run_at[(meta.file, meta.block)]
        earlier = [r for r in runs if r.last_seq < run.first_seq and r.extra.get("last_persist")]
        if not earlier:
            return -1, 0, None
        last = max(earlier, key=lambda r: r.last_seq)
        return int(last.extra["last_persist"][0]), int(last.extra["last_persist"][1]), last.last_persist_ranges

    for meta in metas:
        seq = int(meta.seq)
        if meta.event == "consumer_added":
            name = meta.text
            if name in current:
                contradictions.append((seq, f"consumer {name!r} joined while already a member"))
                continue
            accepts_all = not (meta.filters or [])
            incarnations.setdefault(name, []).append(
                Incarnation(next_id, name, seq, int(meta.a) if meta.a is not None else NEVER, accepts_all=accepts_all)
            )
            ranges_of[name] = [(int(lo), int(hi)) for lo, hi in meta.ranges or ()]
            connected[name], filters_of[name], granted[name] = True, tuple(meta.filters or ()), 0
            current[name] = len(incarnations[name]) - 1
            next_id += 1
            epoch_changes.append(seq)
        elif meta.event in MEMBER_VERBS:
            if meta.text not in current:
                what = MEMBER_VERBS[meta.event]
                contradictions.append((seq, f"consumer {meta.text!r} {what} but is not a member"))
            elif meta.event == "consumer_removed":
                end(meta.text, seq, END_REMOVED)
                epoch_changes.append(seq)
            elif meta.event == "permits_granted":
                granted[meta.text] += int(meta.a or 0)
            else:
                connected[meta.text] = meta.event == "consumer_reconnected"
        elif meta.event == "consumer_evicted":
            if meta.text in current:
                end(meta.text, seq, END_EVICTED)
                epoch_changes.append(seq)
        elif meta.event == "segment_created":
            if meta.a is not None:  # a layout change re-routes keys: a new epoch, as the Python checker counts it
                epoch_changes.append(seq)
        elif meta.event == "restart":
            for name in list(current):
                end(name, seq, END_RESTART)
            epoch_changes.append(seq)
            _, cursor, holes = persisted_before(meta)
            restarts.append(Restart(seq, max(cursor, 0), tuple((int(lo), int(hi)) for lo, hi in holes or ())))
        elif meta.event == "quiescent":
            run = run_at[(meta.file, meta.block)]
            persist_seq, cursor, _ = persisted_before(meta)
            members = [incarnations[name][index] for name, index in current.items()]
            at = tuple(
                MemberAt(inc.inc_id, inc.capacity, connected[inc.name], filters_of[inc.name], granted[inc.name])
                for inc in members
            )
            quiescents.append(QuiescentPoint(seq, run.pub_base + int(meta.c), persist_seq, max(cursor, 0), at))
            if sticky:
                accepts = _covers_every_slot([r for name in current for r in ranges_of.get(name, [])])
            else:
                accepts = any(inc.accepts_all for inc in members)
            if profile != "best-effort" and accepts:
                judged.add(seq)
    context = Context(
        profile=profile,
        active=catalogue.active_checks(config),
        incarnations=incarnations,
        epoch_changes=epoch_changes,
        restarts=restarts,
        quiescents=[q.seq for q in quiescents],
        judged=frozenset(judged),
    )
    return context, quiescents, contradictions


def _cross_run_regressions(runs: list[Run]) -> list[Regression]:
    """A run's first persisted cursor against the last one of the runs before it."""
    found: list[Regression] = []
    last: tuple[int, int] | None = None
    for run in runs:
        first = run.extra.get("first_persist")
        if first is not None and last is not None and first[1] < last[1]:
            found.append(Regression(int(first[0]), int(first[1]), int(last[0]), int(last[1])))
        if run.extra.get("last_persist") is not None:
            last = (int(run.extra["last_persist"][0]), int(run.extra["last_persist"][1]))
    return found
