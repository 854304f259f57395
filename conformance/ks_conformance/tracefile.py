"""Judge recorded trace files: validate each event (trace format v1) and feed it to the checker.

A malformed trace cannot be judged: its verdict is unknown, with the first problem as
`file:line: field 'x': problem`. Traces are streamed, never loaded whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_spec.config import config_problem as spec_config_problem
from ks_spec.errors import MissingInput, UserError
from ks_spec.trace import Event, SequenceRules, read_checked_events, read_events

from ks_conformance import report
from ks_conformance.anomalies import Anomaly, Verdict, listing_order, merge_verdicts, verdict_of
from ks_conformance.checker import Checker, Problem
from ks_conformance.pacing import fewer_collections


@dataclass
class TraceCheck:
    """The result of checking one trace file."""

    path: Path
    events: int = 0
    verdict: Verdict = Verdict.UNKNOWN
    anomalies: list[Anomaly] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    malformed: str | None = None
    exercised: dict[str, int] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)
    messages: int = 0
    """Messages published in the trace."""
    messages_kept: int = 0
    """Of those, the ones still on the checker's heap at the end (the rest were settled and archived)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Judged in shards: the seconds spent routing (in this process), in the shards' processes, merging."""
    workers_peak_rss: int = 0
    """Judged in shards: the peak memory of the largest worker process, in bytes."""
    judged: str = "in one process"
    """How it was judged: in one process, or in shards of keys (`check_trace(jobs=N)`), or in one process and why."""

    @property
    def warnings(self) -> list[Anomaly]:
        """Anomalies of SHOULD requirements."""
        return [a for a in self.anomalies if a.level != "MUST"]


def config_problem(config: Mapping[str, Any]) -> str | None:
    """Why the spec refuses a trace's configuration (KS-CFG-1, spec section 20), or None: nothing is judged then."""
    problem = spec_config_problem(config)
    if problem is None:
        return None
    field_name, why = problem
    return f"the configuration is one the spec refuses (KS-CFG-1): config field '{field_name}': {why}"


def _recorded_config(event: Event) -> dict[str, Any]:
    config = json.loads(event["detail"])["config"]  # well formed: SequenceRules checked the detail
    return dict(config)


def check_trace(path: Path, jobs: int = 1) -> TraceCheck:
    """Check one trace file or folder; raise MissingInput if it does not exist.

    Edge inputs are decided in spec/trace.md section 6: a malformed trace is unknown with no anomalies, a
    configuration the spec refuses is a contradiction at seq 0 and nothing is judged. With `jobs` > 1 a trace is
    judged in that many shards of keys in as many processes (ks_conformance.sharding: the same judgment), or, when
    the shards do not cover it, in one process (`judged` says which, and why).
    """
    if not path.exists():
        raise MissingInput(f"{path}: no such file or folder")
    with fewer_collections():
        if jobs > 1:
            from ks_conformance.sharding.run import Sharded, check_in_shards

            sharded = check_in_shards(path, jobs)
            if isinstance(sharded, Sharded):
                return TraceCheck(
                    path,
                    events=sharded.events,
                    verdict=verdict_of(sharded.anomalies, undecidable=False),
                    anomalies=sharded.anomalies,
                    exercised=sharded.exercised,
                    config=sharded.config,
                    messages=sharded.messages,
                    seconds=sharded.seconds,
                    workers_peak_rss=sharded.workers_peak_rss,
                    judged=f"in {jobs} shards of keys",
                )
            result = _check_trace(path)
            result.judged = f"in one process: {sharded.reason}"
            return result
        return _check_trace(path)


def _check_trace(path: Path) -> TraceCheck:
    """What `check_trace` does, for a path that exists."""
    result = TraceCheck(path)
    checker = Checker()
    rules = SequenceRules()
    refused: str | None = None
    try:
        for where, event, schema_issue in read_checked_events(path):
            problem = schema_issue or rules.check(event)
            if problem:
                result.malformed = f"{where}: {problem}"
                break
            result.events += 1
            if event["event"] == "config":
                result.config = _recorded_config(event)
                refused = config_problem(result.config)
            if refused is None:
                checker.feed(event)
    except UserError as error:
        result.malformed = str(error)
    if result.events == 0 and result.malformed is None:
        result.malformed = f"{path}: the trace is empty (it needs at least a 'config' event)"
    if refused is not None:
        result.problems = [Problem(0, refused)]
        result.verdict = Verdict.UNKNOWN
        return result
    if result.malformed is None:
        checker.finish()
    else:
        checker.abandon()
    result.problems = list(checker.problems)
    result.config = dict(checker.config)
    result.messages, result.messages_kept = len(checker.messages), checker.messages.live_count
    checker.messages.close()
    if result.malformed is not None:  # not judged: a reader in parallel (Spark) finds it before judging anything
        result.verdict = Verdict.UNKNOWN
        return result
    result.anomalies = sorted(checker.anomalies, key=listing_order)
    result.exercised = {name: count for name, count in checker.exercised.items() if checker.applies(name)}
    result.verdict = checker.verdict
    return result


def witness_events(path: Path, seqs: set[int]) -> dict[int, Event]:
    """The events with these seqs, read again from the trace (witnesses are printed with their events)."""
    found: dict[int, Event] = {}
    if not seqs:
        return found
    last = max(seqs)
    try:
        for _, event in read_events(path):
            seq = event.get("seq")
            if isinstance(seq, int) and seq in seqs:
                found[seq] = event
            if isinstance(seq, int) and seq >= last:
                break
    except UserError:
        pass
    return found


def report_lines(results: list[TraceCheck], max_witnesses: int) -> list[dict[str, Any]]:
    """A check-trace report (spec/report-format.md): header, a line per trace, its violations, a footer."""
    lines: list[dict[str, Any]] = [report.header("check-trace")]
    observed: dict[str, None] = {}
    for result in results:
        counts: dict[str, int] = {}
        for anomaly in result.anomalies:
            counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
            observed[anomaly.name] = None
        lines.append(
            {
                "type": "trace",
                "path": str(result.path),
                "events": result.events,
                "verdict": result.verdict.value,
                "anomalies": counts,
                "exercised": result.exercised,
                "malformed": result.malformed,
                "problems": [{"seq": p.seq, "message": p.message} for p in result.problems],
                "profile": str(result.config.get("profile", "strict")),
                "judged": result.judged,
            }
        )
        shown = select_witnesses(result.anomalies, max_witnesses)
        events = witness_events(result.path, {s for a in shown for s in a.witness})
        for anomaly in shown:
            line = {"type": "violation", **anomaly.to_json(), "trace": str(result.path)}
            line["events"] = [events[s] for s in anomaly.witness if s in events]
            lines.append(line)
    verdict = merge_verdicts(r.verdict for r in results)
    sheet = report.trace_departure_lines(r.config for r in results if r.malformed is None)
    lines += sheet
    lines.append(
        {
            "type": "footer",
            "verdict": verdict.value,
            "departures": [line["choice"] for line in sheet],
            "counts": {v.value: sum(1 for r in results if r.verdict is v) for v in Verdict},
            "observed_anomalies": list(observed),
            "violated": sorted({a.requirement for r in results for a in r.anomalies if a.level == "MUST"}),
            "warnings": sorted({a.requirement for r in results for a in r.anomalies if a.level != "MUST"}),
            "finished": report.now_iso(),
        }
    )
    return lines


def select_witnesses(anomalies: list[Anomaly], per_anomaly: int) -> list[Anomaly]:
    """The first `per_anomaly` anomalies of each name, in the order found (0: all of them)."""
    if per_anomaly <= 0:
        return list(anomalies)
    seen: dict[str, int] = {}
    chosen: list[Anomaly] = []
    for anomaly in anomalies:
        if seen.get(anomaly.name, 0) < per_anomaly:
            seen[anomaly.name] = seen.get(anomaly.name, 0) + 1
            chosen.append(anomaly)
    return chosen


def events_signature(trace: Sequence[Mapping[str, Any]]) -> list[str]:
    """A trace as comparable lines (for the determinism check, KS-GEN-5)."""
    return [json.dumps(event, sort_keys=True) for event in trace if event.get("event") != "config"]
