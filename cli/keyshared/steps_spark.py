"""The Spark step of `keyshared verify`: replay validation of a reference trace, and of its fault-injected twin."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from keyshared.cmd_verify import Step, StepResult


def _spark_validation_step(args: argparse.Namespace) -> StepResult:
    from ks_reference.store import MemoryStore
    from ks_reference.workloads import run_named
    from ks_spark.session import SessionOptions, get_session
    from ks_spark.twins import TWIN_ANOMALIES, fault_twin
    from ks_spark.validator import validate
    from ks_spec.trace import write_trace

    session = get_session(SessionOptions(master="local[2]", shuffle_partitions=4, quick=True))
    events = run_named("churn", size=1500, seed=7, store=MemoryStore()).events
    with tempfile.TemporaryDirectory(prefix="ks-verify-spark-") as folder:
        good, bad = Path(folder) / "reference.parquet", Path(folder) / "twin.parquet"
        write_trace(events, good)
        write_trace(fault_twin(events), bad)
        clean = validate(session, str(good), witnesses=0)
        faulty = validate(session, str(bad), witnesses=0)
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
    exercised = sum(1 for count in clean.exercised.values() if count)
    found = ", ".join(f"{name} {count}" for name, count in faulty.counts.items())
    return StepResult(
        True,
        f"reference trace of {clean.events} events valid ({exercised} of {len(clean.exercised)} checks exercised); "
        f"fault-injected twin invalid: {found}",
    )


def steps() -> list[Step]:
    """The Spark steps: after the conformance kit (40)."""
    return [
        Step(
            "spark validation",
            "Spark replay validation judges a reference trace valid and its fault-injected twin invalid",
            _spark_validation_step,
            needs_java=True,
            order=50,
        ),
    ]
