"""The conformance suite can fail: every deliberately broken dispatcher is caught on its requirements.

Each mutant of `tests/conformance_mutants` is run with the `ci` profile (two worker processes share the
matrix) and must be reported failed on every requirement it must break and on no requirement outside
must | may; its saved scenarios are replayed against it (same anomalies) and against the reference (none:
the bug is the mutant's, not the scenario's). Double mutants (a cheap bug with a deep one) prove that one
run reports both. The default suite runs a quick sample and two double mutants; the whole matrix
(about twelve minutes on two cores) runs with `make test-mutants`.
"""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest
from conformance_mutants import DOUBLE_MUTANTS, MUTANTS, Mutant
from conformance_mutants.judge import Judgement, judge
from ks_conformance.anomalies import requirement_levels
from ks_conformance.rules import RULES
from selected import selected_names

SUBSUMED_IN_LIVE_RUNS = {
    "KS-LIV-2": "KS-CUR-5",
}
"""Requirements whose own check (`cursor-stall`) is judged at a quiescent point, which a live run never reaches
with the violation unseen: a cursor left behind is `persist-late` when its persistence was due. Its own check is
proven on traces by tests/test_checker.py (every anomaly kind has a failing case there). KS-DRN-2 was here until
`unjustified-hold` judged a needless drain at its `held` event (mutant drain_unmoved_hash)."""


QUICK = {
    "newest_first",
    "filter_when_empty",
    "persist_on_tick_only",
    "start_seeded_pass",
    "lenient_config",
    "stats_now_lags+no_draining",
    "stats_now_lags+blocked_leak",
}
"""The mutants of the default suite (about 50 s of CPU time): a sample across the spec (order, filters, the
cursor, determinism, configuration), each caught within seconds, and two double mutants whose cheap bug (stats
a tick behind) used to hide the deep one from the whole run (the suite before this matrix missed KS-DRN-1 and
KS-LIV-1/KS-MEM-1 behind it). They are judged on `QUICK_EXAMPLES`; the others are marked `mutants` and judged on the
whole `ci` budget; every mutant's vectors are replayed in the default suite by tests/test_vectors.py."""

QUICK_EXAMPLES = 90
"""The default suite's mutants run the `ci` profile's rounds on 90 examples instead of 210: each is caught well
within it (the slow tier judges every mutant on the whole budget)."""

ALL = (*MUTANTS, *DOUBLE_MUTANTS)
CASES = [
    pytest.param(m, id=m.name, marks=() if m.name in QUICK else (pytest.mark.mutants, pytest.mark.slow)) for m in ALL
]


@pytest.fixture(scope="module")
def judgements(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Judgement]:
    """Every mutant this session's selected tests need, judged once, two at a time."""
    wanted = selected_names(request, "mutant", Mutant)
    folder = tmp_path_factory.mktemp("mutant-scenarios")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context, initializer=_extend_path, initargs=(sys.path,)) as pool:
        futures = {
            name: pool.submit(
                judge, name, str(folder / name.replace("+", "_and_")), 0, QUICK_EXAMPLES if name in QUICK else None
            )
            for name in wanted
        }
        return {name: future.result() for name, future in futures.items()}


def _extend_path(path: list[str]) -> None:
    for entry in path:
        if entry not in sys.path:
            sys.path.append(entry)


@pytest.mark.parametrize("mutant", CASES)
def test_mutant_is_caught_on_its_requirements(mutant: Mutant, judgements: dict[str, Judgement]) -> None:
    judged = judgements[mutant.name]
    assert judged.faults == [], f"{mutant.name}: the run had adapter faults"
    missed = mutant.catches - judged.failed
    assert not missed, f"{mutant.name} ({mutant.bug}): {sorted(missed)} not reported; failed {sorted(judged.failed)}"
    beyond = judged.failed - mutant.catches - mutant.may
    assert not beyond, f"{mutant.name} ({mutant.bug}): {sorted(beyond)} reported failed, outside must and may"
    assert mutant.warns <= judged.warnings <= mutant.warns | mutant.may, f"{mutant.name}: warnings {judged.warnings}"
    if mutant.catches:
        assert judged.verdict == "not-conformant"
    else:
        assert judged.verdict != "not-conformant", "SHOULD failures are warnings, never a failed verdict"


@pytest.mark.parametrize("mutant", CASES)
def test_mutant_scenarios_replay_and_clear_the_reference(mutant: Mutant, judgements: dict[str, Judgement]) -> None:
    judged = judgements[mutant.name]
    assert judged.scenarios, f"{mutant.name}: no scenario was saved"
    assert all(path.is_file() for path in judged.scenarios)
    if mutant.catches - {"KS-CFG-1"}:  # a refused configuration has no steps to replay
        assert judged.replayed, f"{mutant.name}: no saved scenario could be replayed"
    allowed = {kind.name for kind in RULES if kind.requirement in mutant.catches | mutant.may | mutant.warns}
    for (recorded, again), on_reference in zip(judged.replayed, judged.on_reference, strict=True):
        # A replay shows at least what was recorded; a bug whose state diverges from its events may show more
        # in the replay's last op than the example that stopped at its first new kind, but only kinds of
        # requirements the mutant declares it breaks.
        assert set(recorded) <= set(again), f"{mutant.name}: replaying a scenario found {again}, not {recorded}"
        beyond = set(again) - set(recorded) - allowed
        assert not beyond, f"{mutant.name}: replaying a scenario found {sorted(beyond)} beyond its requirements"
        assert on_reference == [], f"{mutant.name}: the reference shows {on_reference} on the mutant's scenario"


def test_every_must_requirement_with_a_check_has_a_mutant() -> None:
    levels = requirement_levels()
    checked = {kind.requirement for kind in RULES if levels.get(kind.requirement) == "MUST"}
    caught = {requirement for mutant in MUTANTS for requirement in mutant.catches}
    assert len(DOUBLE_MUTANTS) >= 5 and len(QUICK & {m.name for m in DOUBLE_MUTANTS}) >= 2
    assert checked - caught == set(SUBSUMED_IN_LIVE_RUNS)
    assert caught <= checked
    for requirement, through in SUBSUMED_IN_LIVE_RUNS.items():
        assert through in caught, f"{requirement} is shown through {through}, which no mutant trips"
    should = {kind.requirement for kind in RULES if levels.get(kind.requirement) == "SHOULD"}
    assert should <= {requirement for mutant in MUTANTS for requirement in mutant.warns}


def test_the_real_bugs_of_issue_5_are_among_the_mutants() -> None:
    """The bugs brokers really ship, each caught on the requirement it breaks."""
    expected = {
        "no_draining": "KS-DRN-1",  # a new owner served before the old one acked
        "leave_counts_as_ack": "KS-ACK-2",  # a leaving consumer's messages treated as acked
        "held_overtaken": "KS-FLW-3",  # a held message overtaken by a later one of its key
        "stale_ack_accepted": "KS-ACK-2",  # a stale ack accepted
        "cursor_at_highest_ack": "KS-CUR-1",  # a cursor past an unacked offset
        "dropped_key_stranded": "KS-LIV-1",  # a dropped key's queued messages never resolved
        "retry_behind": "KS-ORD-3",  # a retried message sent after a later one of its key
    }
    by_name = {m.name: m for m in MUTANTS}
    for name, requirement in expected.items():
        assert requirement in by_name[name].catches, name


def test_mutants_are_adapter_factories() -> None:
    import conformance_mutants

    adapter = conformance_mutants.no_draining()
    info = adapter.start()
    assert info["implementation"]["name"] == "mutant-no_draining"
    assert info["capabilities"]["profiles"] == ["owner"]
    with pytest.raises(AttributeError):
        _ = conformance_mutants.no_such_mutant


def test_a_mutant_is_registered_beside_its_broken_class_under_one_name() -> None:
    """`@mutant(...)` in bugs.py is a mutant's whole registration: a name used twice would shadow one silently."""
    from conformance_mutants import bugs
    from conformance_mutants.registry import REGISTERED, mutant

    assert [m.name for m in MUTANTS] == [m.name for m in REGISTERED]
    with pytest.raises(ValueError, match="registered twice"):
        mutant("no_draining", "KS-DRN-1")(bugs.NoDraining)
    with pytest.raises(TypeError):
        mutant("both_halves", "KS-DRN-1", dispatcher=bugs.NoDraining)(bugs.NoDraining)
    assert len(REGISTERED) == len(MUTANTS)
