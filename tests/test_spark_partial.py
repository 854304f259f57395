"""The Spark validator claims only what it checked: every kind, or with `--partial` `valid-partial` (exit 3) naming
the applicable kinds not computed.

By default the Python checker judges every anomaly kind of spec/checking.md in one task; with `--partial` the
parallel passes compute a subset (ks_spark.validation.catalogue). A fault of a kind the parallel passes do not compute
is `invalid` for check-trace and for validate-replay, and with `--partial` never a bare `valid`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ks_conformance.checker import check_events
from ks_conformance.rules import RULES, Stage
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spec.trace import write_trace
from spark_support import expected_not_computed, spark_fixture  # noqa: F401  (spark_fixture: `spark`)
from spark_support.faults import PYTHON_ONLY

Event = dict[str, Any]
TRACE_KINDS = [kind.name for kind in RULES if kind.stage is not Stage.HARNESS]


def _workload(name: str) -> list[Event]:
    events: list[Event] = run_named(name, size=300, seed=3, store=MemoryStore()).events
    return events


def test_computed_and_not_computed_kinds_are_trace_kinds_of_the_registry() -> None:
    """The parallel passes name only real trace kinds; a kind they do not compute is not computed whether or not it
    has a reason of its own (a new rule needs no entry here: it is judged by the Python checker)."""
    from ks_spark.validation.catalogue import CHECKS, NOT_COMPUTED, why

    computed = [check.anomaly for check in CHECKS]
    assert not set(computed) & set(NOT_COMPUTED)
    assert set(computed) | set(NOT_COMPUTED) <= set(TRACE_KINDS)
    assert all(why(name) for name in TRACE_KINDS if name not in computed)
    requirements = {kind.name: kind.requirement for kind in RULES}
    assert all(check.requirement == requirements[check.anomaly] for check in CHECKS)


def test_the_window_is_not_computed_under_parking() -> None:
    """Spark counts every unresolved offset below a first delivery; with parking the count leaves parked ones
    out (KS-ISO-4), so a Spark `window-overrun` would be a false alarm: it is named not computed instead."""
    from ks_spark.validation.catalogue import active_checks, not_computed

    plain, parked = {"profile": "owner"}, {"profile": "owner", "park_after": 1}
    assert "window-overrun" in active_checks(plain) and "window-overrun" not in not_computed(plain)
    assert "window-overrun" not in active_checks(parked) and "window-overrun" in not_computed(parked)


def test_capacity_and_the_window_are_left_to_the_one_task_pass_under_buckets() -> None:
    """A batch's later messages may exceed capacity and the window (KS-BKT-10), which the parallel passes do not
    know: under selector buckets they would report a correct batch (tests/test_spark_catalogue.py found it)."""
    from ks_spark.validation.catalogue import active_checks, not_computed

    buckets = {"profile": "owner", "selector": "buckets"}
    assert not {"capacity-overrun", "window-overrun"} & active_checks(buckets)
    assert {"capacity-overrun", "window-overrun"} <= set(not_computed(buckets))


def test_stale_acks_are_not_computed_under_ack_by_id() -> None:
    """With ack_by_id a late ack from a consumer that no longer holds the message may resolve it (KS-ACK-3); the
    per-key pass would call it `stale-ack-accepted`, a false alarm, so it is named not computed instead."""
    from ks_spark.validation.catalogue import active_checks, not_computed

    plain, by_id = {"profile": "owner"}, {"profile": "owner", "ack_by_id": True}
    assert "stale-ack-accepted" in active_checks(plain) and "stale-ack-accepted" not in not_computed(plain)
    assert "stale-ack-accepted" not in active_checks(by_id) and "stale-ack-accepted" in not_computed(by_id)


def test_verdicts_merge_invalid_over_unknown_over_partial_over_valid() -> None:
    from ks_spark.validation.validator import Verdict, merge_verdicts

    order = [Verdict.VALID, Verdict.VALID_PARTIAL, Verdict.UNKNOWN, Verdict.INVALID]
    for index, worst in enumerate(order):
        assert merge_verdicts(order[: index + 1]) is worst
        assert merge_verdicts(reversed(order[: index + 1])) is worst
    assert merge_verdicts([]) is Verdict.VALID


def test_list_checks_prints_the_catalogue_of_the_validator(capsys: pytest.CaptureFixture[str]) -> None:
    """`--list-checks` starts no Spark and says, per kind, its requirement and whether (and why not) it is computed."""
    from keyshared.cli import main
    from ks_spark.validation.catalogue import BY_NAME, why

    assert main(["validate-replay", "--list-checks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split(maxsplit=2) for line in lines[:-1]]
    assert [row[0] for row in rows] == TRACE_KINDS
    requirements = {kind.name: kind.requirement for kind in RULES}
    for name, requirement, status in rows:
        assert requirement == requirements[name]
        assert status == ("parallel" if name in BY_NAME else f"--partial skips it: {why(name)}")
    assert lines[-1] == (
        f"all {len(TRACE_KINDS)} kinds computed by the Python checker (in one task, or in shards with --shards); "
        f"with --partial, {len(BY_NAME)} in parallel and {len(TRACE_KINDS) - len(BY_NAME)} not checked"
    )


def test_no_trace_and_no_list_checks_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from keyshared.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["validate-replay"])
    assert exited.value.code == 64
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("required: TRACE (or --list-checks)")


@pytest.mark.spark
@pytest.mark.parametrize("workload", ["steady", "best-effort-saturation"])
def test_a_clean_trace_is_valid_on_every_kind_and_with_partial_valid_partial_naming_the_kinds_not_computed(
    spark: Any, tmp_path: Path, workload: str
) -> None:
    from ks_spark.validation.catalogue import BY_NAME
    from ks_spark.validation.validator import validate

    events = _workload(workload)
    python = check_events(events)
    assert python.verdict.value == "valid"
    applicable = [name for name in TRACE_KINDS if python.applies(name)]
    write_trace(events, tmp_path / "trace.parquet")
    complete = validate(spark, str(tmp_path / "trace.parquet"))
    assert complete.verdict.value == "valid" and complete.not_computed == []
    assert sorted(complete.exercised) == sorted(applicable)
    assert complete.sequential == applicable  # the Python checker judged every kind, in one task
    assert complete.exercised == {name: python.exercised[name] for name in applicable}
    result = validate(spark, str(tmp_path / "trace.parquet"), partial=True)
    assert result.verdict.value == "valid-partial"
    assert result.not_computed == [name for name in applicable if name not in BY_NAME]
    assert sorted([*result.exercised, *result.not_computed]) == sorted(applicable)
    assert result.coverage() == (
        f"{len(result.exercised)} of {len(applicable)} checks; not checked: {', '.join(result.not_computed)}"
    )


@pytest.mark.spark
# one such kind in the default suite (each is about 15 s of Spark jobs), every one in the slow tier
@pytest.mark.parametrize(
    "kind", [k if n == 0 else pytest.param(k, marks=pytest.mark.slow) for n, k in enumerate(sorted(PYTHON_ONLY))]
)
def test_a_fault_only_the_one_task_pass_computes_is_invalid_and_with_partial_never_valid(
    spark: Any, tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """check-trace says invalid; so does validate-replay, with the same witness; with --partial it says
    valid-partial, exit 3, naming the kind among the unchecked."""
    from keyshared.cli import main
    from ks_conformance.report import read_report
    from ks_spark.validation.catalogue import NOT_COMPUTED

    assert kind in NOT_COMPUTED
    workload, inject = PYTHON_ONLY[kind]
    events = inject(_workload(workload))
    assert events is not None
    python = check_events(events)
    assert {a.name for a in python.anomalies} == {kind}
    trace = tmp_path / "trace.jsonl"
    write_trace(events, trace)
    assert main(["check-trace", str(trace), "--quiet"]) == 1
    report = tmp_path / "report.jsonl"
    assert main(["validate-replay", str(trace), "--quiet", "--report", str(report)]) == 1
    (line,) = [line for line in read_report(report) if line["type"] == "trace"]
    assert line["verdict"] == "invalid" and line["not_computed"] == []
    assert line["anomalies"] == {kind: sum(1 for a in python.anomalies if a.name == kind)}
    (violation,) = [line for line in read_report(report) if line["type"] == "violation"][:1]
    first = python.anomalies[0]
    assert (violation["anomaly"], violation["seq"], violation["witness"]) == (
        first.name,
        first.seq,
        list(first.witness),
    )
    capsys.readouterr()
    assert main(["validate-replay", str(trace), "--quiet", "--partial", "--report", str(report)]) == 3
    out = capsys.readouterr().out
    assert "valid-partial" in out and "\n  valid on " in out
    unchecked = out.split("not checked: ", 1)[1].split("\n", 1)[0].split(", ")
    assert kind in unchecked and unchecked == expected_not_computed(python, partial=True)
    lines = read_report(report)  # validates against spec/schemas/report-v1.schema.json
    (line,) = [line for line in lines if line["type"] == "trace"]
    assert line["verdict"] == "valid-partial" and line["not_computed"] == unchecked
    assert lines[-1]["verdict"] == "valid-partial"


@pytest.mark.spark
def test_a_profile_the_python_checker_does_not_know_is_unknown_not_valid_on_no_checks(
    spark: Any, tmp_path: Path
) -> None:
    """No kind applies to an unknown profile: check-trace says unknown, so must Spark (it said valid, on 0 checks)."""
    import json

    from ks_spark.validation.validator import validate

    events = _workload("steady")
    config = json.loads(events[0]["detail"])
    config["config"]["profile"] = "bogus"
    events[0] = {**events[0], "detail": json.dumps(config)}
    python = check_events(events)
    assert python.verdict.value == "unknown"
    write_trace(events, tmp_path / "trace.jsonl")
    result = validate(spark, str(tmp_path / "trace.jsonl"))
    assert result.verdict.value == "unknown"
    assert (
        0,
        "the configuration is one the spec refuses (KS-CFG-1): config field 'profile': 'bogus' is not one of "
        "strict, owner, best-effort",
    ) in result.problems  # spec/trace.md section 6


def test_the_readme_names_exactly_the_kinds_spark_computes_in_parallel() -> None:
    """The README's Spark section lists the kinds computed in parallel and the counts: it must follow catalogue.py."""
    import re

    from ks_spark.validation.catalogue import CHECKS

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("**Replay validation.**", 1)[1].split("The other", 1)[0]
    text = " ".join(paragraph.split())
    assert f"{len(CHECKS)} kinds are computed by DataFrame passes" in text
    named = [name for name in re.findall(r"`([a-z]+(?:-[a-z]+)*)`", paragraph) if name in TRACE_KINDS]
    assert sorted(named) == sorted(check.anomaly for check in CHECKS)


@pytest.mark.slow
@pytest.mark.spark
def test_the_verify_step_reports_the_reference_trace_as_valid_on_every_kind(spark: Any) -> None:
    """`keyshared verify` passes on the complete verdict and says how many kinds each pass computed."""
    import argparse

    from keyshared.steps_spark import _spark_validation_step

    result = _spark_validation_step(argparse.Namespace())
    assert result.ok, result.summary
    assert " events valid on " in result.summary and " in one Spark task" in result.summary


def test_semantics_the_parallel_passes_do_not_honour_are_named_with_the_reason() -> None:
    """A trace declaring no cursor, outcomes, durable attempts, selector any, or configuring checkpoint_resume changes
    rules the parallel passes compute: the default one-task pass (the Python checker) honours it, and with --partial
    its verdict is unknown with this reason (never a valid or invalid judged by the wrong rules)."""
    from ks_spark.validation.validator import unsupported_semantics

    assert unsupported_semantics({"profile": "strict", "selector": "ring"}, {}) is None
    said = unsupported_semantics({"selector": "any"}, {"cursor": False})
    assert said is not None and "'cursor'" in said and "selector 'any'" in said and "check-trace" in said
    assert unsupported_semantics({}, {"durable_attempts": True}) is not None
    assert "checkpoint_resume" in (unsupported_semantics({"checkpoint_resume": True}, {}) or "")
