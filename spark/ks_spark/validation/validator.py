"""Spark replay validation: judge a trace with Spark jobs, never collecting it to the driver.

Every trace goes through the sequence pass (`ks_spark.validation.sequence`): the format rules over the physical
order, and the configuration. Then the Python checker itself (check-trace's code, the one implementation of the
rules) judges every kind: fed the whole trace in seq order inside one task (`ks_spark.validation.sequential`), or
with `shards` > 1 in shards of keys, one Spark task each (`ks_spark.validation.sharded`, check-trace --jobs'
functions), the trace going to one task where the shards do not cover it yet; the result says which and why
(`judged`).

What reaches the driver: per-split summaries, counts per anomaly and exercised check, and the first few anomalies of
each kind with their witness events; in shards, also each message's shard (two bytes a message).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ks_conformance.anomalies import Anomaly
from ks_conformance.rules import rule
from ks_conformance.tracefile import config_problem
from ks_spec.errors import MissingInput, UserError
from ks_spec.trace import JSON_BLANK, is_parquet, line_problem

from ks_spark.schema import spark_schema
from ks_spark.validation import catalogue
from ks_spark.validation.reader import TraceSource, read, resolve
from ks_spark.validation.sequence import (
    META,
    OUTPUT_DDL,
    PROBLEM,
    RUN,
    kind_rules,
    sequence_function,
    sequence_input,
)
from ks_spark.validation.sequential import SequentialOutcome, sequential_pass
from ks_spark.validation.sharded import ShardedOutcome, sharded_pass
from ks_spark.validation.timeline import MalformedTrace, build_timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Stage = Callable[[str], None]
"""Called with a short description before each Spark stage (progress display)."""

DEFAULT_WITNESSES = 3
MAX_WITNESSES = 8


class Verdict(StrEnum):
    """The validator's verdict: checking.md section 4's (every kind that applies is judged, as check-trace does)."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"


_RANK = {Verdict.VALID: 0, Verdict.UNKNOWN: 1, Verdict.INVALID: 2}


def merge_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """The merged verdict of several traces: invalid > unknown > valid (valid when there are none)."""
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.VALID)


@dataclass
class Finding:
    """One anomaly found by the Spark validator, with the witness events themselves."""

    anomaly: Anomaly
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ValidationResult:
    """The verdict on one trace and what supports it."""

    trace: str
    verdict: Verdict
    events: int = 0
    profile: str = "strict"
    config: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    exercised: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    malformed: str | None = None
    problems: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0
    all_anomalies: list[tuple[str, int, tuple[int, ...]]] | None = None
    """With `everything=True`: every anomaly as (name, seq, witness), for the differential tests."""
    sequential: list[str] = field(default_factory=list)
    """The kinds the Python checker computed (in shards of keys or in one task), in catalogue order."""
    judged: str = ""
    """How the Python checker judged it: `in N shards of keys`, `in one task`, or `in one task: <why not in shards>`
    (empty for a trace not judged at all)."""

    @property
    def total(self) -> int:
        """How many anomalies in all."""
        return sum(self.counts.values())


def validate(
    session: SparkSession,
    trace: str,
    witnesses: int = DEFAULT_WITNESSES,
    stage: Stage | None = None,
    everything: bool = False,
    shards: int = 1,
) -> ValidationResult:
    """Judge one trace (a .jsonl or .parquet file, a folder of .parquet files, or a URL Spark can read).

    Raises MissingInput for a trace that does not exist. A malformed or unreadable trace gives the
    verdict unknown with `malformed` set to one line naming the file, the line and the problem. The Python checker
    judges in one task, or in `shards` shards of keys, one task each (sharded.py: on two cores it did not pay,
    benchmarks/README.md).
    """
    started = time.perf_counter()
    say = stage or (lambda _: None)
    if not 0 <= witnesses <= MAX_WITNESSES:
        raise UserError(f"--witnesses: between 0 and {MAX_WITNESSES}", exit_code=64)
    result = ValidationResult(trace, Verdict.UNKNOWN)
    try:
        source = resolve(trace)
        _judge(session, source, result, witnesses, say, everything, shards)
    except MissingInput:
        raise
    except MalformedTrace as error:
        result.malformed = _as_check_trace_says(str(error))
        result.verdict = Verdict.UNKNOWN
    except UserError as error:
        result.malformed = str(error)
        result.verdict = Verdict.UNKNOWN
    except Exception as error:
        problem = _read_failure(trace, str(error))
        if problem is None:
            raise
        result.malformed = problem
        result.verdict = Verdict.UNKNOWN
    result.seconds = time.perf_counter() - started
    return result


SPARK_PLACE = re.compile(r"^(?P<file>.+?):(?P<line>[0-9]+): (?P<problem>.*)$")
UNREADABLE_VALUE = "field '(line)': a value Spark cannot read with the trace schema"


def _as_check_trace_says(message: str) -> str:
    """A malformed local JSON line's message with check-trace's line number and, where Spark could only say the
    value was unreadable (96.0, beyond int64, bad UTF-8), its field and problem; read again (an error path only).

    Spark numbers the lines it read, without the blank ones; check-trace counts every line of the file.
    """
    match = SPARK_PLACE.match(message)
    path = Path(match.group("file")) if match else None
    if match is None or path is None or not path.is_file() or is_parquet(path):
        return message
    wanted, seen = int(match.group("line")), 0
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip(JSON_BLANK):
                continue
            seen += 1
            if seen == wanted:
                problem = match.group("problem")
                if problem == UNREADABLE_VALUE:
                    problem = line_problem(line) or problem
                return f"{match.group('file')}:{number}: {problem}"
    return message


READ_FAILURE = re.compile(r"(?:FAILED_READ_FILE|Encountered error while reading file|Could not read footer)")
FAILED_FILE = re.compile(r"reading file (\S+?)\.?(?:\s|$)")
CAUSE = re.compile(r"^\s*(?::\s*)?Caused by: (?:[\w.$]+(?:Exception|Error)): (.+)$", re.MULTILINE)


def _read_failure(trace: str, text: str) -> str | None:
    """One line naming the file, when a Spark job failed because a trace file could not be read (else None).

    A Parquet file whose footer is intact but a page is garbled passes the footer check and fails inside a
    task: the job's error names the file and, in its causes, what could not be decoded.
    """
    if not READ_FAILURE.search(text):
        return None
    named = FAILED_FILE.search(text)
    file = named.group(1).removeprefix("file://") if named else trace
    causes = CAUSE.findall(text)
    cause = causes[0].strip() if causes else "a page could not be decoded"
    return f"{file}: not a readable trace file, corrupt ({cause[:300]})"


def _judge(
    session: SparkSession,
    source: TraceSource,
    result: ValidationResult,
    witnesses: int,
    say: Stage,
    everything: bool,
    shards: int = 1,
) -> None:
    from pyspark.sql import functions as F

    events = read(session, source)
    say("checking the format and reading the configuration")
    sequence = sequence_input(events).mapInArrow(sequence_function(kind_rules()), OUTPUT_DDL)
    small = sequence.where(F.col("rtype").isin(RUN, PROBLEM, META)).collect()
    timeline = build_timeline(small, list(source.files), source.format)
    result.events = timeline.events
    result.profile = timeline.profile
    result.config = timeline.config
    refused = config_problem(timeline.config)
    if refused is not None:  # a configuration the spec refuses: nothing is judged (spec/trace.md section 6)
        result.problems = [(0, refused)]
        result.verdict = Verdict.UNKNOWN
        return
    kinds = catalogue.applicable(timeline.config)
    _judge_every_kind(session, events, result, kinds, witnesses, say, everything, shards, timeline.published)


def _judge_every_kind(
    session: SparkSession,
    events: DataFrame,
    result: ValidationResult,
    kinds: Iterable[str],
    witnesses: int,
    say: Stage,
    everything: bool,
    shards: int,
    published: int,
) -> None:
    """Judge every kind in `kinds` with the Python checker (no parallel pass runs, so every rule has one
    implementation): in `shards` shards of keys (sharded.py), or in one task (sequential.py) when the shards do not
    cover the trace; the verdict, counts, exercised checks, contradictions and witnesses are the checker's."""
    wanted = list(kinds)
    limit = None if everything else witnesses
    trace = events.select(*spark_schema().fieldNames())
    why = "asked for one task"
    if shards > 1:
        say(f"judging all {len(wanted)} kinds in {shards} shards of keys (the Python checker)")
        judged = sharded_pass(session, trace, result.config, result.events, published, shards, wanted, limit)
        if isinstance(judged, ShardedOutcome):
            result.judged = f"in {shards} shards of keys"
            _take(result, judged, wanted, events, witnesses, everything)
            return
        why = judged.reason
    say(f"judging all {len(wanted)} kinds in one task (the Python checker)")
    outcome = sequential_pass(trace, list(spark_schema().fieldNames()), wanted, limit, rows=result.events)
    result.judged = "in one task" if shards == 1 else f"in one task: {why}"
    _take(result, outcome, wanted, events, witnesses, everything)


def _take(
    result: ValidationResult,
    outcome: SequentialOutcome,
    wanted: list[str],
    events: DataFrame,
    witnesses: int,
    everything: bool,
) -> None:
    """The checker's outcome as the trace's result."""
    result.problems = list(outcome.problems)
    result.counts = dict(sorted(outcome.counts.items()))
    result.exercised = dict(outcome.exercised)
    result.sequential = wanted
    _conclude(result, events, outcome.anomalies, witnesses, everything)


def _conclude(
    result: ValidationResult, events: DataFrame, found: list[Anomaly], witnesses: int, everything: bool
) -> None:
    """The findings shown (the first `witnesses` of each kind, with their events) and the verdict from the counts and
    the contradictions."""
    found.sort(key=lambda a: (a.seq, a.name))
    if everything:
        result.all_anomalies = [(a.name, a.seq, a.witness) for a in found]
    shown = _select(found, witnesses)
    witness_events = _events_by_seq(events, sorted({s for a in shown for s in a.witness}))
    result.findings = [Finding(a, [witness_events[s] for s in a.witness if s in witness_events]) for a in shown]
    if any(rule(name).level == "MUST" for name in result.counts):
        result.verdict = Verdict.INVALID
    elif result.problems:
        result.verdict = Verdict.UNKNOWN
    else:
        result.verdict = Verdict.VALID


def _select(found: list[Anomaly], per_name: int) -> list[Anomaly]:
    seen: dict[str, int] = {}
    chosen = []
    for anomaly in found:
        if per_name and seen.get(anomaly.name, 0) >= per_name:
            continue
        seen[anomaly.name] = seen.get(anomaly.name, 0) + 1
        chosen.append(anomaly)
    return chosen


def _events_by_seq(events: DataFrame, seqs: list[int]) -> dict[int, dict[str, Any]]:
    from ks_spec.trace import columns
    from pyspark.sql import functions as F

    if not seqs:
        return {}
    rows = events.where(F.col("seq").isin(seqs)).select(*columns()).collect()
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        event = {k: v for k, v in row.asDict(recursive=True).items() if v is not None}
        found[int(event["seq"])] = event
    return found
