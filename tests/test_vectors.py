"""The frozen conformance vectors (spec/vectors/) judge what they claim to: the reference passes every one, every
shipped mutant fails the vectors of the requirements it must break, and the recorded traces give their kinds.

The corpus is generated on demand by tests/vectors_generate.py; these tests only replay it (seconds).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conformance_mutants import DOUBLE_MUTANTS, MUTANTS, Mutant
from keyshared.cli import main
from ks_conformance.protocol import Connection, InProcessConnection
from ks_conformance.rules import RULES, checked_requirements, rules_of
from ks_conformance.tracefile import check_trace, events_signature
from ks_conformance.vectors import VECTORS_DIR, Vector, VectorResult, find_vectors, run_vectors
from ks_reference.adapter import create as create_reference
from ks_spec.trace import read_events

VECTORS = find_vectors(VECTORS_DIR)
ALL_MUTANTS = (*MUTANTS, *DOUBLE_MUTANTS)

UNREACHABLE: dict[tuple[str, str], str] = {}
"""(mutant, must requirement) pairs that no vector shows the mutant breaking, each with the reason."""


REGENERATE = "regenerate the corpus: tests/vectors_generate.py search --mutants NAME, then build (spec/vectors)"


def _reference() -> Connection:
    return InProcessConnection(create_reference(), "reference")


def _factory(mutant: Mutant) -> Callable[[], Connection]:
    return lambda: InProcessConnection(mutant.create(), f"py:conformance_mutants:{mutant.name}")


def allowed(mutant: Mutant) -> set[str]:
    """The anomaly kinds of the requirements the mutant must, may or should-warn break."""
    requirements = mutant.catches | mutant.may | mutant.warns
    return {kind.name for kind in RULES if kind.requirement in requirements}


@pytest.fixture(scope="module")
def on_reference() -> dict[str, VectorResult]:
    """Every vector replayed once against the reference."""
    return {result.vector.name: result for result in run_vectors(VECTORS, _reference)}


def test_every_requirement_with_a_check_has_a_vector_and_a_mutant_that_fails_it() -> None:
    targeted = {target for vector in VECTORS for target in vector.targets}
    assert set(checked_requirements()) - targeted == set()
    for requirement in checked_requirements():
        own = {kind.name for kind in rules_of(requirement)}
        failing = [v for v in VECTORS if requirement in v.targets and any(set(c.anomalies) & own for c in v.caught)]
        assert failing, f"{requirement}: no vector that a mutant fails with one of its kinds {sorted(own)}"


def test_every_vector_passes_on_the_reference(on_reference: dict[str, VectorResult]) -> None:
    for name, result in on_reference.items():
        assert result.status == "passed", f"{name}: {result.status} {result.reason} {result.kinds}"


def test_every_vector_is_failed_by_a_mutant_on_its_target_unless_it_is_a_probe() -> None:
    for vector in VECTORS:
        on_target = [c for c in vector.caught if set(c.anomalies) & set(vector.kinds)]
        if not on_target:
            # Configuration probes are the suite's own (KS-CFG-1): one of them is failed by lenient_config.
            assert vector.refused_config is not None, f"{vector.name}: no mutant fails it with {vector.kinds}"


@pytest.mark.parametrize("mutant", ALL_MUTANTS, ids=lambda m: m.name)
def test_mutant_fails_the_vectors_of_its_requirements(mutant: Mutant) -> None:
    listed = {v.name: c for v in VECTORS for c in v.caught if c.mutant == mutant.name}
    assert listed, f"{mutant.name}: fails no vector (a new mutant? {REGENERATE})"
    mine = [v for v in VECTORS if v.name in listed]
    for requirement in sorted(mutant.catches):
        if (mutant.name, requirement) in UNREACHABLE:
            continue
        own = {kind.name for kind in rules_of(requirement)}
        assert any(requirement in v.targets and set(listed[v.name].anomalies) & own for v in mine), (
            f"{mutant.name}: no vector of {requirement} that it fails with {sorted(own)}"
        )
    results = run_vectors(mine, _factory(mutant))
    for result in results:
        recorded = set(listed[result.vector.name].anomalies)
        assert result.status in ("failed", "warning"), f"{mutant.name} passes {result.vector.name}"
        assert set(result.kinds) <= allowed(mutant), f"{mutant.name} on {result.vector.name}: {result.kinds}"
        assert recorded <= set(result.kinds), f"{mutant.name} on {result.vector.name}: {result.kinds}, not {recorded}"
        for trace in result.vector.traces:
            if trace.implementation == f"mutant {mutant.name}":  # the failing trace is this replay's
                assert _same_events(trace.path, result.trace), f"{mutant.name}: {trace.path} differs from its replay"


def test_the_exceptions_are_exactly_the_requirements_no_vector_catches() -> None:
    """Every (mutant, must requirement) pair without a vector the mutant fails on its kinds is listed, with why."""
    unreached = set()
    for mutant in ALL_MUTANTS:
        for requirement in mutant.catches:
            own = {kind.name for kind in rules_of(requirement)}
            if not any(
                requirement in v.targets and c.mutant == mutant.name and set(c.anomalies) & own
                for v in VECTORS
                for c in v.caught
            ):
                unreached.add((mutant.name, requirement))
    assert unreached == set(UNREACHABLE), f"list each with its reason in UNREACHABLE, or {REGENERATE}"


def test_unreachable_exceptions_name_real_mutants_and_requirements() -> None:
    by_name = {m.name: m for m in ALL_MUTANTS}
    for (name, requirement), reason in UNREACHABLE.items():
        assert name in by_name and requirement in by_name[name].catches and reason, (
            f"UNREACHABLE lists ({name}, {requirement}), no longer a must requirement of a shipped mutant: remove it"
        )


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.traces], ids=lambda v: v.name)
def test_recorded_traces_give_their_anomaly_kinds(vector: Vector) -> None:
    for trace in vector.traces:
        result = check_trace(trace.path)
        assert result.malformed is None and not result.problems, trace.path
        assert sorted({a.name for a in result.anomalies}) == sorted(trace.anomalies), trace.path
        if trace.implementation == "reference":
            assert trace.anomalies == ()
        else:
            source = trace.implementation.removeprefix("mutant ")
            caught = {c.mutant for c in vector.caught}
            assert trace.anomalies and source in caught, trace.path


def test_each_vector_has_a_passing_trace_and_most_a_failing_one() -> None:
    with_steps = [v for v in VECTORS if v.scenario.steps]
    assert all(any(t.implementation == "reference" for t in v.traces) for v in with_steps)
    failing = [v for v in with_steps if any(t.anomalies for t in v.traces)]
    assert len(failing) >= len(with_steps) // 2


def test_check_trace_cli_on_a_vector_pair(capsys: pytest.CaptureFixture[str]) -> None:
    vector = next(v for v in VECTORS if len(v.traces) == 2)
    passing, failing = sorted(vector.traces, key=lambda t: bool(t.anomalies))
    assert main(["check-trace", "--quiet", str(passing.path)]) == 0
    assert main(["check-trace", "--quiet", str(failing.path)]) == 1
    assert all(kind in capsys.readouterr().out for kind in failing.anomalies)


def _same_events(path: Path, replayed: list[dict[str, Any]]) -> bool:
    """Whether a recorded trace has the events of a replay (the config event, naming the version, aside)."""
    return events_signature([event for _, event in read_events(path)]) == events_signature(replayed)


def test_traces_are_the_reference_replay(on_reference: dict[str, VectorResult]) -> None:
    """The recorded passing trace is what replaying the vector on the reference gives now."""
    for vector in VECTORS:
        for trace in vector.traces:
            if trace.implementation == "reference":
                assert _same_events(trace.path, on_reference[vector.name].trace), vector.name


# --- the CLI -------------------------------------------------------------------------------------------


def test_cli_replays_vectors_against_the_reference_and_a_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "vectors", "--adapter", "reference", "--only", "KS-ORD-1,KS-DRN-1"]) == 0
    out = capsys.readouterr().out
    assert "KS-ORD-1" in out and "KS-DRN-1" in out and "passed" in out and "KS-ASN-1" not in out
    code = main(["conformance", "vectors", "--adapter", "py:conformance_mutants:newest_first", "--only", "KS-ORD-1"])
    out = capsys.readouterr().out
    assert code == 1 and "key-reorder" in out and "failed" in out


def test_cli_skips_what_the_adapter_does_not_declare(capsys: pytest.CaptureFixture[str]) -> None:
    strict = next(v for v in VECTORS if v.scenario.config.get("profile") == "strict")
    only = ",".join(strict.targets)
    adapter = "py:conformance_mutants:no_draining"
    code = main(["conformance", "vectors", "--adapter", adapter, "--only", only, "--verbose"])
    out = capsys.readouterr().out
    assert "skipped" in out and "needs profile strict" in out
    assert code in (0, 1)


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["conformance", "vectors", "--adapter", "reference", "--only", "-".join(("KS", "NOPE", "1"))]) == 64
    assert main(["conformance", "vectors", "--adapter", "reference", "--vectors", str(tmp_path)]) == 66
    assert main(["conformance", "vectors", "--adapter", "reference", "--vectors", str(tmp_path / "none")]) == 66
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("keyshared: error: ") for line in errors)


def _corrupt(tmp_path: Path, change: Callable[[list[str]], list[str]]) -> tuple[int, str, Path]:
    vector = next(v for v in VECTORS if len(v.traces) == 2)
    folder = tmp_path / "vectors"
    shutil.copytree(vector.path.parent, folder)
    path = folder / vector.path.name
    path.write_text("\n".join(change(path.read_text(encoding="utf-8").splitlines())) + "\n", encoding="utf-8")
    return main(["conformance", "vectors", "--adapter", "reference", "--vectors", str(folder)]), path.name, folder


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda lines: [lines[0].replace('"targets":["', '"targets":["X'), *lines[1:]], "vector.targets.0"),
        (lambda lines: [lines[0].replace('"vector":{', '"vector":{"extra":1,'), *lines[1:]], "vector"),
        (lambda lines: [lines[0].replace('"kinds":["', '"kinds":["no-such-'), *lines[1:]], "vector.kinds.0"),
        (lambda lines: [lines[0].replace(".trace.jsonl", ".trace.jsonl.gone", 1), *lines[1:]], "vector.traces"),
        (lambda lines: [*lines, '{"op": {"op": "publish"}}'], "op"),
        (lambda lines: [*lines, '{"settle": {"order": "sideways"}}'], "settle.order"),
        (lambda lines: [*lines, "{not json"], "(line)"),
    ],
)
def test_a_corrupted_vector_is_one_line_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Callable[[list[str]], list[str]], field: str
) -> None:
    code, name, _ = _corrupt(tmp_path, change)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 65
    assert len(err) == 1 and name in err[0] and f"field '{field}" in err[0], err


def test_cli_replays_vectors_over_stdio(capsys: pytest.CaptureFixture[str]) -> None:
    """A `cmd:` adapter takes the same vectors; the determinism vector restarts it as a new process."""
    from ks_conformance.adapters import stdio_command

    adapter = stdio_command("reference")
    assert main(["conformance", "vectors", "--adapter", adapter, "--only", "KS-GEN-5,KS-ORD-1"]) == 0
    out = capsys.readouterr().out
    assert "KS-GEN-5" in out and "failed" not in out
