"""The Spark steps of `keyshared verify`: a reference trace and its fault-injected twin judged by both judges,
check-trace and Spark's validate-replay (in one task and, in --full, in two shards of keys too); the Spark dispatcher
(--full only)."""

from __future__ import annotations

import argparse
import functools
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from keyshared.cmd_verify import Quick, Step, StepResult

if TYPE_CHECKING:
    from ks_spark.validation.validator import ValidationResult


def _spark_validation_step(args: argparse.Namespace, shards: bool = True) -> StepResult:
    """Both judges on a reference trace (valid) and its fault-injected twin (invalid, the same anomalies from both);
    `shards` also judges the twin with validate-replay --shards 2 (a dozen seconds of Spark jobs)."""
    from ks_conformance.tracefile import check_trace
    from ks_reference.store import MemoryStore
    from ks_reference.workloads import run_named
    from ks_spark.session import SessionOptions, get_session
    from ks_spark.validation.twins import TWIN_ANOMALIES, fault_twin
    from ks_spark.validation.validator import validate
    from ks_spec.trace import write_trace

    session = get_session(SessionOptions(master="local[2]", shuffle_partitions=4, quick=True))
    events = run_named("churn", size=1500, seed=7, store=MemoryStore()).events
    with tempfile.TemporaryDirectory(prefix="ks-verify-spark-") as folder:
        good, bad = Path(folder) / "reference.parquet", Path(folder) / "twin.parquet"
        write_trace(events, good)
        write_trace(fault_twin(events), bad)
        checked, checked_twin = check_trace(good), check_trace(bad)  # the judge of `keyshared check-trace`
        clean = validate(session, str(good), witnesses=0)
        faulty = validate(session, str(bad), witnesses=0)
        in_shards = validate(session, str(bad), witnesses=0, shards=2) if shards else None
    if checked.verdict.value != "valid":
        found = ", ".join(sorted({a.name for a in checked.anomalies})) or checked.malformed or "problems"
        return StepResult(False, f"check-trace judged the reference trace {checked.verdict.value}: {found}")
    by_checker: dict[str, int] = {}
    for anomaly in checked_twin.anomalies:
        by_checker[anomaly.name] = by_checker.get(anomaly.name, 0) + 1
    missing = [name for name in TWIN_ANOMALIES if name not in by_checker]
    if checked_twin.verdict.value != "invalid" or missing:
        return StepResult(
            False, f"check-trace judged the fault-injected twin {checked_twin.verdict.value}; missed {missing}"
        )
    # Every kind that applies is computed (the Python checker in one task): the reference is valid.
    if clean.verdict.value != "valid":
        found = ", ".join(clean.counts) or clean.malformed or "problems"
        return StepResult(
            False, f"the reference trace ({clean.events} events) was judged {clean.verdict.value}: {found}"
        )
    missing = [name for name in TWIN_ANOMALIES if name not in faulty.counts]
    if faulty.verdict.value != "invalid" or missing:
        return StepResult(
            False, f"the fault-injected twin was judged {faulty.verdict.value}; missed {', '.join(missing)}"
        )
    if dict(faulty.counts) != by_checker:
        return StepResult(False, f"on the twin the judges disagree: check-trace {by_checker}, Spark {faulty.counts}")
    if in_shards is not None and (in_shards.judged, in_shards.counts) != ("in 2 shards of keys", faulty.counts):
        return StepResult(
            False, f"with --shards 2 the twin was judged {in_shards.judged or 'not at all'}: {in_shards.counts}"
        )
    exercised = sum(1 for count in clean.exercised.values() if count)
    found = ", ".join(f"{name} {count}" for name, count in faulty.counts.items())
    also = "in 2 shards of keys alike" if in_shards is not None else "--shards 2 runs in --full"
    return StepResult(
        True,
        f"reference trace of {clean.events} events {_checks(clean)} by validate-replay, valid by check-trace too; "
        f"{exercised} of the {len(clean.exercised)} exercised; fault-injected twin invalid by both judges, with the "
        f"same anomalies: {found} ({also})",
    )


def _checks(result: ValidationResult) -> str:
    """`valid on 46 checks (the Python checker, in one Spark task)`: what a verdict of this step rests on."""
    return f"valid on {len(result.exercised)} checks (the Python checker, {result.judged} of Spark)"


def _spark_dispatcher_step(args: argparse.Namespace) -> StepResult:
    """The Spark dispatcher: the reference's responses, conformance in batch mode, a log replay with a crash."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq
    from ks_conformance.protocol import InProcessConnection
    from ks_conformance.results import settings_for
    from ks_conformance.suite import run_suite
    from ks_spark.dispatcher.adapter import create
    from ks_spark.dispatcher.walreplay import ControlOp, LogReplay, control_ops_from, replay_log
    from ks_spark.session import SessionOptions, get_session
    from ks_spark.validation.validator import validate

    session = get_session(SessionOptions(master="local[2]", shuffle_partitions=4, quick=True))
    settings = settings_for(
        "ci", seed=2, max_examples=12, examples_total=0, rounds=1
    )  # as tests/test_spark_dispatcher.py BATCH_SEED
    result = run_suite(lambda: InProcessConnection(create(), "spark"), settings)
    if result.verdict != "conformant":
        failed = [r["id"] for r in result.requirements if r["status"] in ("failed", "vacuous")]
        fault = f"; fault: {result.faults[0][0].message}" if result.faults else ""
        return StepResult(False, f"the Spark dispatcher in batch mode: {result.verdict} ({', '.join(failed)}){fault}")
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="ks-verify-dispatch-") as folder:
        log = Path(folder) / "log.parquet"
        keys = [f"key-{rng.randrange(40)}" for _ in range(2000)]
        pq.write_table(pa.table({"offset": pa.array(range(2000), pa.int64()), "key": keys}), log)
        join = {"op": "add_consumer", "consumer": "c3", "capacity": 1_000_000_000, "filters": []}
        controls = [
            *control_ops_from(["c1", "c2"]),
            ControlOp(600, join),
            ControlOp(1200, {"op": "remove_consumer", "consumer": "c1"}),
        ]
        replay = LogReplay(str(log), profile="owner", lag=5, controls=controls, crashes=[1500])
        summary = replay_log(session, replay, str(Path(folder) / "trace"), partitions=4)
        judged = validate(session, str(Path(folder) / "trace"), witnesses=0)
    if judged.verdict.value != "valid" or summary.cursor != 2000:
        return StepResult(
            False, f"the log replay's trace was judged {judged.verdict.value}: {', '.join(judged.counts)}"
        )
    return StepResult(
        True,
        f"conformant in batch mode ({result.examples} examples); a 2,000-message log replay with churn and a crash: "
        f"{summary.events:,} events, {summary.duplicates} delivered again after the crash, {judged.verdict.value}: "
        f"{_checks(judged)}",
    )


def steps() -> list[Step]:
    """The Spark steps: after the conformance kit (40) and the example adapter (45); the dispatcher's is --full only
    (minutes of Spark jobs: the quick job exercises Spark by validate-replay)."""
    return [
        Step(
            "trace (both judges)",
            "check-trace and Spark's validate-replay judge a reference trace valid and its fault-injected twin "
            "invalid, with the same anomalies; validate-replay --shards 2 finds the same on the twin",
            _spark_validation_step,
            part="trace",
            quick=Quick(
                functools.partial(_spark_validation_step, shards=False),
                "check-trace and Spark's validate-replay judge a reference trace valid and its fault-injected twin "
                "invalid, with the same anomalies",
            ),
            needs_java=True,
            order=50,
        ),
        Step(
            "spark dispatcher",
            "the Spark-backed dispatcher is conformant in batch mode, and its log replay across a crash is valid "
            "on the checks Spark computes",
            _spark_dispatcher_step,
            part="conformance",
            needs_java=True,
            order=51,
        ),
    ]
