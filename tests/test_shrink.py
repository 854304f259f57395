"""The kit's own shrinker (conformance/ks_conformance/shrink.py): counted, deterministic, kind-preserving.

Driven by a fake replay (a pure function of the steps), so each property is checked exactly; the suite
tests (test_conformance_kit.py, test_conformance_mutants.py) check it against real dispatchers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ks_conformance.harness import Step
from ks_conformance.scenario import Scenario
from ks_conformance.shrink import shrink, without

ROOT = Path(__file__).resolve().parent.parent


def publish(offset: int, key: str = "a") -> Step:
    return Step(op={"op": "publish", "offset": offset, "key": key})


def ack(offset: int, consumer: str = "c1") -> Step:
    return Step(op={"op": "ack", "consumer": consumer, "offset": offset})


def join(consumer: str) -> Step:
    return Step(op={"op": "add_consumer", "consumer": consumer, "capacity": 1, "filters": []})


def fake_replay(
    judge: Callable[[Sequence[Step]], list[str]], calls: list[list[dict[str, Any]]]
) -> Callable[[Scenario], Any]:
    """A replay whose anomalies are `judge(steps)`; every call's steps are kept in `calls`."""

    def replay(scenario: Scenario) -> Any:
        calls.append([step.to_json() for step in scenario.steps])
        anomalies = [SimpleNamespace(name=name) for name in judge(scenario.steps)]
        return SimpleNamespace(anomalies=anomalies, steps=list(scenario.steps))

    return replay


def ops(steps: Sequence[Step]) -> list[str]:
    return [str(step.op["op"]) if step.op is not None else f"settle:{step.settle}" for step in steps]


def shows_after_join_and_tick(steps: Sequence[Step]) -> list[str]:
    """'late' when a tick follows a join of c2; 'noise' whenever c3 joins."""
    found = []
    joined = False
    for step in steps:
        if step.op == join("c3").op:
            found.append("noise")
        if step.op == join("c2").op:
            joined = True
        if joined and step.op == {"op": "tick"}:
            found.append("late")
    return found


EXAMPLE = [
    join("c1"),
    publish(0),
    publish(1, "b"),
    ack(0),
    Step(settle="newest"),
    join("c2"),
    publish(2),
    Step(op={"op": "tick"}),
    ack(2),
    Step(op={"op": "tick"}),
]


def test_a_witness_keeps_only_what_its_kind_needs_and_the_same_input_gives_the_same_witness() -> None:
    results = []
    for _ in range(2):
        calls: list[list[dict[str, Any]]] = []
        witness = shrink(Scenario({}, list(EXAMPLE)), "late", fake_replay(shows_after_join_and_tick, calls), 200)
        results.append((calls, [step.to_json() for step in witness.scenario.steps], witness.attempts))
        assert ops(witness.scenario.steps) == ["add_consumer", "tick"]
        assert witness.scenario.steps[0].op == join("c2").op
        assert witness.attempts == len(calls) and witness.stopped == ""
    assert results[0] == results[1]


def test_shrinking_stops_at_its_budget_of_replays() -> None:
    calls: list[list[dict[str, Any]]] = []
    witness = shrink(Scenario({}, list(EXAMPLE)), "late", fake_replay(shows_after_join_and_tick, calls), 4)
    assert witness.attempts == len(calls) == 4 and witness.stopped == "budget"
    assert witness.session is not None and "late" in {a.name for a in witness.session.anomalies}


def test_the_wall_clock_cap_is_reported_when_it_ends_shrinking() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    calls: list[list[dict[str, Any]]] = []
    witness = shrink(
        Scenario({}, list(EXAMPLE)),
        "late",
        fake_replay(shows_after_join_and_tick, calls),
        200,
        cap_seconds=3.5,
        clock=clock,
    )
    assert witness.stopped == "cap" and witness.attempts < 200


def test_a_candidate_showing_a_new_kind_before_the_witnessed_one_is_not_kept() -> None:
    """Deleting the join of c2 while c3 joins instead would show 'noise' first: a candidate may not trade the
    kind for a consequence of another."""

    def judge(steps: Sequence[Step]) -> list[str]:
        found = []
        for step in steps:
            if step.op == join("c3").op:
                found.append("noise")
            if step.op == {"op": "tick"} and found == ["noise"]:
                found.append("late")
            if step.op == {"op": "tick"} and any(s.op == join("c2").op for s in steps) and "late" not in found:
                found.append("late")
        return found

    example = [join("c2"), Step(op={"op": "tick"}), join("c3"), Step(op={"op": "tick"})]
    calls: list[list[dict[str, Any]]] = []
    witness = shrink(Scenario({}, example), "late", fake_replay(judge, calls), 100)
    assert witness.session is not None
    assert "noise" not in {a.name for a in witness.session.anomalies}
    assert ops(witness.scenario.steps) == ["add_consumer", "tick"]
    without_c2 = [{"op": {"op": "tick"}}, join("c3").to_json(), {"op": {"op": "tick"}}]
    assert without_c2 in calls, "the candidate was tried, and shows 'late' only after 'noise'"


def test_a_kind_its_example_no_longer_shows_is_left_unshrunk() -> None:
    calls: list[list[dict[str, Any]]] = []
    witness = shrink(Scenario({}, list(EXAMPLE)), "never", fake_replay(shows_after_join_and_tick, calls), 100)
    assert witness.session is None and witness.attempts == 1 and witness.scenario.steps == EXAMPLE


def test_deleting_a_publish_keeps_offsets_contiguous_and_drops_the_answers_to_it() -> None:
    steps = [
        publish(0),
        publish(1, "b"),
        ack(0),
        ack(1),
        publish(2),
        Step(op={"op": "nack", "consumer": "c1", "offset": 2}),
    ]
    left = without(steps, {0})
    assert [step.to_json() for step in left] == [
        publish(0, "b").to_json(),
        ack(0).to_json(),
        publish(1).to_json(),
        {"op": {"op": "nack", "consumer": "c1", "offset": 1}},
    ]
    refused = Step(op={"op": "publish", "offset": 7, "key": "a"}, expect="wrong_offset")
    assert without([publish(0), refused], {0})[0].op == {"op": "publish", "offset": 6, "key": "a"}
    assert without([refused, publish(0)], {0}) == [publish(0)], "a refused publish published nothing to renumber"


INTERNALS_ALLOWED = {
    "conformance/ks_conformance/determinism.py": "Hypothesis has no setting to keep the literals of loaded modules "
    "out of its draws, and without it a seed does not decide a run (issue 13); "
    "test_a_seed_decides_the_run_whatever_the_process_imported fails if an upgrade moves the mechanism",
}
"""The one module that touches Hypothesis internals, and why."""


def test_nothing_imports_hypothesis_internals() -> None:
    """Budgets go through Hypothesis's public settings; its internals change between releases."""
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("cli", "conformance", "spec", "models", "reference", "spark", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if "hypothesis.internal" in path.read_text(encoding="utf-8")
    ]
    assert sorted(offenders) == sorted(INTERNALS_ALLOWED)
