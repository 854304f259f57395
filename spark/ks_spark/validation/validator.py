"""Spark replay validation: judge a trace with Spark jobs, never collecting it to the driver.

Every trace goes through the sequence pass (`ks_spark.validation.sequence`): the format rules over the physical
order, and the small timeline (membership, restarts, quiescent points, the configuration). Then either

- by default, the Python checker itself (check-trace's code, the one implementation of the rules) judges every kind,
  fed the whole trace in seq order inside one task (`ks_spark.validation.sequential`), or with `shards` > 1 in
  shards of keys, one Spark task each (`ks_spark.validation.sharded`, check-trace --jobs' functions), the trace
  going to one task where the shards do not cover it yet; the result says which and why (`judged`); or
- with `partial`, the parallel passes alone: the per-key pass (`ks_spark.validation.keystate`: events partitioned by
  key and sorted by seq, judged per key) and the global checks (`ks_spark.validation.globalchecks`: capacity per
  incarnation, the window and the cursor), which compute the kinds of `ks_spark.validation.catalogue.CHECKS` on every
  core, a fast screen held to the checker by the differential tests; the verdict then names the kinds it did not
  check.

What reaches the driver: per-split summaries, the timeline, counts per anomaly and exercised check,
and the first few anomalies of each kind with their witness events; in shards, also the op table and each shard's
predicted changes (arrays: about 11 bytes an op, 21 a change).

Long because it drives the Spark stages and checks their inputs, with the one-line errors bad Parquet or JSON
lines get; each stage's own logic lives in its module.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ks_conformance import explain, rules
from ks_conformance.anomalies import Anomaly, Explanation
from ks_conformance.rules import rule
from ks_conformance.tracefile import config_problem
from ks_spec.errors import MissingInput, UserError
from ks_spec.trace import JSON_BLANK, is_parquet, line_problem

from ks_spark.schema import spark_schema
from ks_spark.session import cache_level, default_parallelism
from ks_spark.validation import catalogue
from ks_spark.validation.globalchecks import (
    UNIFIED_COLUMNS,
    capacity_findings,
    lost_held_back,
    members_without_room,
    window_and_cursor,
)
from ks_spark.validation.keypass import run_key_pass
from ks_spark.validation.keystate import (
    QUIESCENT_MARK,
    RETURN_MARK,
    ROW_ANOMALY,
    ROW_CONTRADICTION,
    ROW_ERA,
    ROW_EXERCISED,
    ROW_INTERVAL,
)
from ks_spark.validation.reader import TraceSource, read, resolve
from ks_spark.validation.sequence import (
    META,
    OUTPUT_DDL,
    PERSIST,
    PROBLEM,
    REGRESS,
    RUN,
    kind_rules,
    sequence_function,
    sequence_input,
)
from ks_spark.validation.sequential import SequentialOutcome, sequential_pass
from ks_spark.validation.sharded import ShardedOutcome, sharded_pass
from ks_spark.validation.timeline import MalformedTrace, Timeline, build_timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Stage = Callable[[str], None]
"""Called with a short description before each Spark stage (progress display)."""

DEFAULT_WITNESSES = 3
MAX_WITNESSES = 8


class Verdict(StrEnum):
    """The validator's verdict: checking.md section 4's, plus `valid-partial` (no MUST anomaly among the
    kinds computed, but some applicable kinds were not computed), so a verdict claims only what was checked."""

    VALID = "valid"
    VALID_PARTIAL = "valid-partial"
    INVALID = "invalid"
    UNKNOWN = "unknown"


_RANK = {Verdict.VALID: 0, Verdict.VALID_PARTIAL: 1, Verdict.UNKNOWN: 2, Verdict.INVALID: 3}


def merge_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """The merged verdict of several traces: invalid > unknown > valid-partial > valid (valid when there are none)."""
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
    not_computed: list[str] = field(default_factory=list)
    """The anomaly kinds that apply to the trace's configuration but were not computed (empty until the
    configuration has been read, and after the sequential pass computed them), in catalogue order."""
    sequential: list[str] = field(default_factory=list)
    """The kinds the Python checker computed (in shards of keys or in one task), in catalogue order."""
    judged: str = ""
    """How the Python checker judged it: `in N shards of keys`, `in one task`, or `in one task: <why not in shards>`
    (empty when it did not run: --partial, or a trace not judged at all)."""

    @property
    def total(self) -> int:
        """How many anomalies in all."""
        return sum(self.counts.values())

    def coverage(self) -> str:
        """What a verdict rests on, `16 of 47 checks; not checked: a, b`: the applicable kinds computed and the rest."""
        computed = len(self.exercised)
        text = f"{computed} of {computed + len(self.not_computed)} checks"
        return text + (f"; not checked: {', '.join(self.not_computed)}" if self.not_computed else "")


def validate(
    session: SparkSession,
    trace: str,
    witnesses: int = DEFAULT_WITNESSES,
    stage: Stage | None = None,
    everything: bool = False,
    partial: bool = False,
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
        _judge(session, source, result, witnesses, say, everything, partial, shards)
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


def unsupported_semantics(config: Mapping[str, Any], declared: Mapping[str, Any]) -> str | None:
    """Why the parallel passes cannot judge this trace (what it declares or configures changes rules they compute),
    or None. Such a trace is judged wholly by the one-task pass (the Python checker)."""
    what = [f"'{name}' (adapter protocol v2)" for name in sorted(declared)]
    if config.get("selector") == "any":
        what.append("selector 'any' (adapter protocol v2)")
    if config.get("checkpoint_resume"):
        what.append("'checkpoint_resume' (KS-BKT-9: a restart resumes below each bucket's checkpoint)")
    if not what:
        return None
    return (
        f"the trace declares {', '.join(what)}, which changes rules the parallel passes compute: judge it without "
        "--partial (the one-task pass honours it) or with keyshared check-trace"
    )


PARTIAL_PREDATES = ("zombie_ack", "zombie_nack", "publish_delayed", "seek", "extend", "extended", "extend_ignored")
"""Event kinds of spec 1.7 (zombie results, delayed messages, seeks, lease extensions) that the parallel passes
predate: they would misname or invent findings on a trace that has them."""


def newer_vocabulary(events: DataFrame, config: Mapping[str, Any]) -> str | None:
    """Why the parallel passes cannot judge this trace because it uses spec 1.7 vocabulary they predate (the kinds
    of PARTIAL_PREDATES, or key-based batches outside the `buckets` selector), or None. One scan of the event
    column."""
    from pyspark.sql import functions as F

    kinds = [*PARTIAL_PREDATES, *(() if config.get("selector") == "buckets" else ("publish_entry",))]
    found = sorted(row[0] for row in events.where(F.col("event").isin(kinds)).select("event").distinct().collect())
    if not found:
        return None
    return (
        f"the trace has {', '.join(repr(kind) for kind in found)} events (spec 1.7), which the parallel passes "
        "predate: judge it without --partial (the one-task pass judges them) or with keyshared check-trace"
    )


def _judge(
    session: SparkSession,
    source: TraceSource,
    result: ValidationResult,
    witnesses: int,
    say: Stage,
    everything: bool,
    partial: bool = False,
    shards: int = 1,
) -> None:
    from pyspark.sql import functions as F

    parallelism = default_parallelism(session)
    events = raw_events = read(session, source)
    say("checking the format and reading the timeline")
    sequence = sequence_input(events).mapInArrow(sequence_function(kind_rules()), OUTPUT_DDL)
    if partial:  # the parallel passes read it again; the default one-task pass needs only the timeline
        sequence = sequence.persist(cache_level())
    small = sequence.where(F.col("rtype").isin(RUN, PROBLEM, META)).collect()
    timeline = build_timeline(small, list(source.files), source.format)
    result.events = timeline.events
    result.profile = timeline.profile
    result.config = timeline.config
    result.not_computed = catalogue.not_computed(timeline.config)
    refused = config_problem(timeline.config)
    if refused is not None:  # a configuration the spec refuses: nothing is judged (spec/trace.md section 6)
        result.problems = [(0, refused)]
        result.verdict = Verdict.UNKNOWN
        sequence.unpersist()
        return
    if not partial:  # every kind, judged by the Python checker in one task: exactly what check-trace judges
        sequence.unpersist()
        kinds = catalogue.applicable(timeline.config)
        _judge_every_kind(session, raw_events, result, kinds, witnesses, say, everything, shards, timeline.published)
        return
    unsupported = unsupported_semantics(timeline.config, timeline.declared) or newer_vocabulary(
        raw_events, timeline.config
    )
    if unsupported is not None:  # the parallel passes would judge it by other rules: no verdict
        result.problems = [(0, unsupported)]
        result.verdict = Verdict.UNKNOWN
        sequence.unpersist()
        return
    result.problems = list(timeline.contradictions)
    context = timeline.context
    if timeline.keyless_ignored:
        events = _fill_ignored_keys(events)
    # About four tasks per slot, but never more than ~2M events a task: a task's memory stays flat as traces grow.
    partitions = max(1, min(4 * parallelism, -(-timeline.events // 400_000)), -(-timeline.events // 2_000_000))
    say(f"judging every key ({partitions} partitions)")
    broadcast = session.sparkContext.broadcast(context)
    key_rows = run_key_pass(events, broadcast, partitions).persist(cache_level())
    small_rows = key_rows.where(F.col("r").isin(ROW_EXERCISED, ROW_CONTRADICTION)).select(
        "r", "name", "seq", "a", "text"
    )
    exercised: dict[str, int] = {}
    unresolved_at: dict[int, int] = {}
    returns: set[int] = set()
    for row in small_rows.collect():
        if row.r == ROW_CONTRADICTION:
            result.problems.append((int(row.seq), str(row.text)))
        elif row.name.startswith(QUIESCENT_MARK):
            point = int(row.name.removeprefix(QUIESCENT_MARK))
            unresolved_at[point] = unresolved_at.get(point, 0) + int(row.a)
        elif row.name.startswith(RETURN_MARK):
            returns.add(int(row.name.removeprefix(RETURN_MARK)))
        else:
            exercised[row.name] = exercised.get(row.name, 0) + int(row.a)
    exercised["lost"] = len(returns)
    exercised["stale-ack-accepted"] = exercised.get("stale-ack-accepted", 0) + timeline.unknown_acks
    result.problems.sort()
    say("checking capacity, the window and the persisted cursor")
    window = timeline.window if "window-overrun" in context.active else 0
    if window > timeline.published:
        window = 0  # fewer messages than the window: it cannot be overrun, nor nearly
    persists = sequence.where(F.col("rtype") == PERSIST)
    sweep, holes, cached = window_and_cursor(
        session, key_rows, persists, timeline.pub_bases(), context, timeline.published, window, parallelism
    )
    without_room: dict[int, list[tuple[str, ...]]] = {}
    if "lost" in context.active:  # only the quiescent points where the key pass found a message lost
        lost = key_rows.where((F.col("r") == ROW_ANOMALY) & (F.col("name") == "lost")).select("seq").distinct()
        seqs = {int(row.seq) for row in lost.collect()}
        judged = [point for point in timeline.quiescents if point.seq in seqs]
        permits = timeline.config.get("flow_control") == "permits"
        without_room = members_without_room(session, key_rows, judged, permits)
    findings = _findings(session, key_rows, sequence, persists, sweep, holes, context, cached, without_room)
    limit = witnesses if not everything else None
    # After a contradiction the state is not trustworthy: as the Python checker, report nothing from it on.
    cutoff = min((seq for seq, _ in result.problems), default=None)
    if cutoff is not None:
        findings = findings.where((F.col("bad") == 0) | (F.col("seq") < cutoff))
    findings = findings.persist(cache_level())
    say("counting anomalies")
    counts: dict[str, int] = {}
    for row in findings.groupBy("name").agg(F.sum("bad").alias("bad"), F.sum("ex").alias("ex")).collect():
        if row.bad:
            counts[row.name] = int(row.bad)
        if row.ex:
            exercised[row.name] = exercised.get(row.name, 0) + int(row.ex)
    exercised["cursor-regress"] = max(0, timeline.persists - 1)
    exercised["cursor-stall"] = len(timeline.quiescents)
    exercised["stuck-key"] = sum(1 for q in timeline.quiescents if q.published > 0)
    driver_found = [a for a in _driver_anomalies(timeline, unresolved_at) if cutoff is None or a.seq < cutoff]
    for anomaly in driver_found:
        counts[anomaly.name] = counts.get(anomaly.name, 0) + 1
    counted_by_spark = sum(counts.values())
    active = context.active
    result.counts = dict(sorted(counts.items()))
    result.exercised = {
        check.anomaly: exercised.get(check.anomaly, 0) for check in catalogue.CHECKS if check.anomaly in active
    }
    anomalies = findings.where(F.col("bad") == 1)
    say("explaining the witnesses")
    chosen = _first_per_name(anomalies, limit) if counted_by_spark > len(driver_found) else []
    rows = [row.asDict() for row in chosen]
    found = _complete(session, rows, key_rows, timeline, window) + [
        a for a in driver_found if limit is None or _rank(driver_found, a) < limit
    ]
    _conclude(result, events, found, witnesses, everything)
    for frame in (sequence, key_rows, findings, *cached):
        frame.unpersist()
    broadcast.unpersist()


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
    result.sequential, result.not_computed = wanted, []
    _conclude(result, events, outcome.anomalies, witnesses, everything)


def _conclude(
    result: ValidationResult, events: DataFrame, found: list[Anomaly], witnesses: int, everything: bool
) -> None:
    """The findings shown (the first `witnesses` of each kind, with their events) and the verdict from the counts,
    the contradictions and the kinds not computed."""
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
    else:  # a bare valid only when every applicable kind was computed
        result.verdict = Verdict.VALID_PARTIAL if result.not_computed else Verdict.VALID


def _findings(
    session: SparkSession,
    key_rows: DataFrame,
    sequence: DataFrame,
    persists: DataFrame,
    sweep: DataFrame,
    holes: DataFrame,
    context: Any,
    cached: list[DataFrame],
    without_room: dict[int, list[tuple[str, ...]]],
) -> DataFrame:
    """Every anomaly and exercised check the Spark passes found, in one frame of UNIFIED_COLUMNS.

    Frames a check keeps for its own use are added to `cached`, for the caller to unpersist. `without_room` (per
    quiescent point, the filters of its members without room) turns a returned message held back by one into
    stuck-key, not lost.
    """
    from pyspark.sql import functions as F

    none_s, none_l = F.lit(None).cast("string"), F.lit(None).cast("long")
    key_anomalies = key_rows.where(F.col("r") == ROW_ANOMALY).select(
        "name",
        "seq",
        "w",
        "key",
        F.col("a").alias("offset"),
        "text",
        none_s.alias("consumer"),
        none_l.alias("x"),
        none_l.alias("y"),
        none_l.alias("era"),
        F.lit(1).alias("bad"),
        F.lit(0).alias("ex"),
        F.col("b").alias("pub"),
        F.col("c").alias("last"),
    )
    stuck = "stuck-key" in context.active
    key_anomalies = lost_held_back(key_anomalies, without_room, stuck).select(*UNIFIED_COLUMNS)
    window_rows = sweep.where(F.col("name").isin("window-overrun", "window-overrun:exercised")).select(
        F.lit("window-overrun").alias("name"),
        "seq",
        F.array(F.col("seq")).alias("w"),
        none_s.alias("key"),
        F.col("a").alias("offset"),
        none_s.alias("text"),
        none_s.alias("consumer"),
        none_l.alias("x"),
        none_l.alias("y"),
        "era",
        (F.col("name") == "window-overrun").cast("int").alias("bad"),
        (F.col("name") == "window-overrun:exercised").cast("int").alias("ex"),
    )
    skip_exercised = sweep.where(F.col("name") == "cursor-skip:exercised").select(
        F.lit("cursor-skip").alias("name"),
        "seq",
        F.array().cast("array<bigint>").alias("w"),
        none_s.alias("key"),
        none_l.alias("offset"),
        none_s.alias("text"),
        none_s.alias("consumer"),
        none_l.alias("x"),
        none_l.alias("y"),
        "era",
        F.lit(0).alias("bad"),
        F.lit(1).alias("ex"),
    )
    passed = sweep.where(F.col("name") == "cursor-skip").select(
        "era",
        F.col("seq").alias("pseq"),
        F.col("q").alias("cursor"),
        none_l.alias("offset"),
        F.lit(1).alias("passes"),
    )
    # req: KS-CUR-1
    skip = (
        passed.unionByName(holes.withColumn("passes", F.lit(0)))
        .groupBy("era", "pseq")
        .agg(F.max("cursor").alias("cursor"), F.max("passes").alias("passes"), F.min("offset").alias("offset"))
        .select(
            F.lit("cursor-skip").alias("name"),
            F.col("pseq").alias("seq"),
            F.array(F.col("pseq")).alias("w"),
            none_s.alias("key"),
            F.when(F.col("passes") == 0, F.col("offset")).alias("offset"),
            none_s.alias("text"),
            none_s.alias("consumer"),
            F.col("cursor").alias("x"),
            F.col("passes").cast("long").alias("y"),
            "era",
            F.lit(1).alias("bad"),
            F.lit(0).alias("ex"),
        )
    )
    # req: KS-CUR-2
    regress = sequence.where(F.col("rtype") == REGRESS).select(
        F.lit("cursor-regress").alias("name"),
        "seq",
        F.array(F.col("b"), F.col("seq")).alias("w"),
        none_s.alias("key"),
        none_l.alias("offset"),
        none_s.alias("text"),
        none_s.alias("consumer"),
        F.col("a").alias("x"),
        F.col("d").alias("y"),
        none_l.alias("era"),
        F.lit(1).alias("bad"),
        F.lit(0).alias("ex"),
    )
    parts = [key_anomalies, window_rows]
    if "capacity-overrun" in context.active:
        parts.append(capacity_findings(session, key_rows, context, cached))
    if "cursor-skip" in context.active:
        parts += [skip, skip_exercised]
    if "cursor-regress" in context.active:
        parts.append(regress)
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.unionByName(part.select(*UNIFIED_COLUMNS))
    return frame


def _fill_ignored_keys(events: DataFrame) -> DataFrame:
    """Give ack_ignored/nack_ignored events without a key their message's key (the checker places them)."""
    from pyspark.sql import functions as F

    keys = events.where(F.col("event") == "publish").select(F.col("offset").alias("_o"), F.col("key").alias("_k"))
    ignored = F.col("event").isin("ack_ignored", "nack_ignored") & F.col("key").isNull()
    needing = events.where(ignored).join(keys, F.col("offset") == F.col("_o"), "left")
    fixed = needing.withColumn("key", F.col("_k")).drop("_o", "_k")
    return events.where(~ignored | F.col("key").isNotNull()).unionByName(fixed)


def _rank(found: list[Anomaly], anomaly: Anomaly) -> int:
    same = [a for a in found if a.name == anomaly.name]
    return same.index(anomaly)


def _select(found: list[Anomaly], per_name: int) -> list[Anomaly]:
    seen: dict[str, int] = {}
    chosen = []
    for anomaly in found:
        if per_name and seen.get(anomaly.name, 0) >= per_name:
            continue
        seen[anomaly.name] = seen.get(anomaly.name, 0) + 1
        chosen.append(anomaly)
    return chosen


def _first_per_name(anomalies: DataFrame, limit: int | None) -> list[Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if limit is None:
        return anomalies.orderBy("seq", "name", "offset").collect()
    if limit == 0:
        return []
    ranked = anomalies.withColumn(
        "_rank", F.row_number().over(Window.partitionBy("name").orderBy("seq", "offset"))
    ).where(F.col("_rank") <= limit)
    return ranked.drop("_rank").collect()


def _driver_anomalies(timeline: Timeline, unresolved_at: dict[int, int]) -> list[Anomaly]:
    """cursor-regress across splits and cursor-stall: found from the timeline alone."""
    found: list[Anomaly] = []
    active = timeline.context.active
    if "cursor-regress" in active:
        for regression in timeline.regressions:
            let, then, details = rules.cursor.cursor_regress(
                regression.cursor, regression.previous_cursor, regression.previous_seq, regression.seq
            )
            found.append(
                Anomaly(
                    "cursor-regress",
                    regression.seq,
                    (regression.previous_seq, regression.seq),
                    Explanation(tuple(let), then),
                    details,
                )
            )
    if "cursor-stall" in active:
        for point in timeline.quiescents:
            if unresolved_at.get(point.seq, 0) == 0 and point.persist_cursor != point.published:
                persist_seq = point.persist_seq if point.persist_seq >= 0 else None
                # req: KS-LIV-2
                let, then, details = rules.liveness.cursor_stall(
                    point.published, point.persist_cursor, persist_seq, point.seq
                )
                witness = tuple(s for s in (persist_seq, point.seq) if s is not None)
                found.append(Anomaly("cursor-stall", point.seq, witness, Explanation(tuple(let), then), details))
    return found


def _complete(
    session: SparkSession, rows: list[dict[str, Any]], key_rows: DataFrame, timeline: Timeline, window: int
) -> list[Anomaly]:
    """Turn the chosen anomaly rows into Anomaly records, fetching the facts the global ones need."""
    from pyspark.sql import functions as F

    found: list[Anomaly] = []
    eras = key_rows.where(F.col("r") == ROW_ERA).select(
        F.col("a").alias("era"),
        F.col("b").alias("offset"),
        F.col("c").alias("end"),
        F.col("seq").alias("pub"),
        "key",
    )
    # Facts about messages: key and publish seq of every offset a global anomaly names.
    wanted_offsets = {int(r["offset"]) for r in rows if r["offset"] is not None and r["text"] is None}
    skips = [r for r in rows if r["name"] == "cursor-skip"]
    windows = [r for r in rows if r["name"] == "window-overrun"]
    capacities = [r for r in rows if r["name"] == "capacity-overrun"]
    smallest: dict[int, int] = {}
    if skips:
        # The smallest offset unresolved at the persist (the checker's witness), for the persists that passed one.
        queries = session.createDataFrame(
            [(int(r["era"]), int(r["seq"])) for r in skips if r["y"] == 1] or [(-1, -1)], "qera long, qseq long"
        )
        for row in (
            eras.join(F.broadcast(queries), F.col("era") == F.col("qera"))
            .where((F.col("end") > F.col("qseq")) & (F.col("pub") < F.col("qseq")))
            .groupBy("qseq")
            .agg(F.min("offset").alias("offset"))
            .collect()
        ):
            smallest[int(row.qseq)] = int(row.offset)
        for r in skips:
            if r["y"] == 1 and int(r["seq"]) in smallest:
                r["offset"] = smallest[int(r["seq"])]
            wanted_offsets.add(int(r["offset"]))
    below: dict[tuple[int, int], int] = {}
    if windows and window > 0:
        queries = session.createDataFrame(
            [(int(r["era"]), int(r["offset"]), int(r["seq"])) for r in windows], "qera long, qoffset long, qseq long"
        )
        for row in (
            eras.join(F.broadcast(queries), F.col("era") == F.col("qera"))
            .where((F.col("offset") < F.col("qoffset")) & (F.col("end") > F.col("qseq")))
            .groupBy("qoffset", "qseq")
            .agg(F.count("*").alias("n"))
            .collect()
        ):
            below[(int(row.qoffset), int(row.qseq))] = int(row.n)
    outstanding: dict[tuple[int, int], list[int]] = {}
    if capacities:
        queries = session.createDataFrame([(int(r["x"]), int(r["seq"])) for r in capacities], "qinc long, qseq long")
        intervals = key_rows.where(F.col("r") == ROW_INTERVAL)
        for row in (
            intervals.join(F.broadcast(queries), F.col("a") == F.col("qinc"))
            # held at the delivery: ended after it, or by it (a redelivery of the same message replaces it)
            .where((F.col("b") < F.col("qseq")) & (F.col("c").isNull() | (F.col("c") >= F.col("qseq"))))
            .groupBy("qinc", "qseq")
            .agg(F.sort_array(F.collect_list("b")).alias("held"))
            .collect()
        ):
            outstanding[(int(row.qinc), int(row.qseq))] = [int(s) for s in row.held]
    facts: dict[int, tuple[str, int]] = {}
    if wanted_offsets:
        for row in (
            eras.where(F.col("offset").isin(sorted(wanted_offsets)))
            .groupBy("offset")
            .agg(F.first("key").alias("key"), F.min("pub").alias("pub"))
            .collect()
        ):
            facts[int(row.offset)] = (str(row.key), int(row.pub))
    incs = {inc.inc_id: inc for incs in timeline.context.incarnations.values() for inc in incs}
    for r in rows:
        name, seq = str(r["name"]), int(r["seq"])
        witness = tuple(int(w) for w in r["w"] or ())
        if r["text"] is not None:
            parsed = json.loads(r["text"])
            found.append(
                Anomaly(name, seq, witness, Explanation(tuple(parsed["let"]), parsed["then"]), parsed["details"])
            )
            continue
        offset = int(r["offset"]) if r["offset"] is not None else -1
        key, pub = facts.get(offset, ("", -1))
        explained: explain.Explained
        if name == "cursor-skip":
            explained = rules.cursor.cursor_skip(key, offset, pub, int(r["x"]), r["y"] == 1, seq)
            witness = tuple(sorted({pub, seq}))
        elif name == "window-overrun":
            explained = rules.flow.window_overrun(key, offset, pub, window, below.get((offset, seq), window), seq)
        elif name == "capacity-overrun":
            inc = incs[int(r["x"])]
            held = outstanding.get((inc.inc_id, seq), [])
            explained = rules.flow.capacity_overrun(offset, inc.name, inc.capacity, inc.added, held, seq)
            witness = tuple(sorted({inc.added, *held, seq}))
        elif name == "cursor-regress":
            explained = rules.cursor.cursor_regress(int(r["x"]), int(r["y"]), witness[0], seq)
        else:  # a key anomaly beyond the ones its task explained: name, seq and witness are exact
            explained = ([], "(explained only for the first anomalies of each kind)", {})
        let, then, details = explained
        found.append(Anomaly(name, seq, witness, Explanation(tuple(let), then), details))
    return found


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
