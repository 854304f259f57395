"""The TLA+ models: TLC runs the quick manifest, and the reference's traces replay in KeySharedOrdering.

One module-scoped run of the quick tier's light entries (every broken variant, the models' own traces, each passing
configuration recorded under HEAVY_SECONDS and each model's cheapest: about 1.5 min of CPU time) feeds most tests; the
heavier passing configurations (KeySharedOrdering's Strict, Owner, Restart and Liveness, CursorSafety's base and
Debounced, BucketHandoff's Rollover and Liveness) and the spec's example traces run in the slow tier, as does
`keyshared verify --full`'s models step.
Everything that needs Java skips, with the reason, where Java is missing.
"""

from __future__ import annotations

import copy
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from keyshared.cli import main
from ks_models import MANIFEST
from ks_models.counterexample import steps
from ks_models.coverage import requirement_coverage, stale_sections
from ks_models.manifest import ModelEntry, Result, TraceEntry, entries, load_manifest, run_entries, uncovered_actions
from ks_models.tlc import TlcRun, find_jar, parse_output, run_tlc
from ks_models.traces import validate_trace
from ks_models.values import TlaFunction, TlaRecord, TlaSeq, TlaSet, parse_value
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spec.errors import MissingInput
from ks_spec.trace import write_trace

pytestmark = pytest.mark.tlc

Event = dict[str, Any]


def _java() -> Path:
    java = shutil.which("java")
    if java is None:
        pytest.skip("Java 17+ is not installed: TLC cannot run")
    return Path(java)


@pytest.fixture(scope="module")
def tools() -> tuple[Path, Path]:
    """java and tla2tools.jar."""
    return _java(), find_jar()


HEAVY_SECONDS = 10
"""A passing quick configuration whose recorded runtime reaches this many seconds runs in the slow tier, unless it is
its model's cheapest passing configuration (every model keeps one in the default suite)."""


def _seconds(runtime: str) -> int:
    hours, minutes, seconds = (int(part) for part in runtime.split(":"))
    return 3600 * hours + 60 * minutes + seconds


def _spec_example(trace: TraceEntry) -> bool:
    """A trace of spec/examples (the spec's own examples, also judged by the checker's tests), not one of the models'
    targeted traces (models/traces: each a behaviour a rule is about, accepted or rejected)."""
    return str(trace.data["path"]).startswith("../spec/")


def _quick_entries(heavy: bool) -> tuple[list[ModelEntry], list[TraceEntry]]:
    """The quick tier's light entries (heavy=False) or its heavy ones (heavy=True): the passing configurations of
    HEAVY_SECONDS or more that are not their model's cheapest, and the spec's example traces."""
    models, traces = entries(load_manifest())
    cheapest: dict[str, ModelEntry] = {}
    for entry in sorted((m for m in models if m.kind == "check"), key=lambda m: _seconds(m.data["runtime"])):
        cheapest.setdefault(entry.module, entry)
    chosen = [
        m
        for m in models
        if (m.kind == "check" and _seconds(m.data["runtime"]) >= HEAVY_SECONDS and cheapest[m.module] is not m) == heavy
    ]
    return chosen, [t for t in traces if _spec_example(t) == heavy]


@pytest.fixture(scope="module")
def quick(tools: tuple[Path, Path]) -> list[Result]:
    """The quick tier's light configurations and every quick trace, run once for the whole module."""
    return run_entries(*_quick_entries(heavy=False), *tools, jobs=2, timeout=300)


# --- the manifest -------------------------------------------------------------------------------------


def test_every_light_quick_entry_ends_as_the_manifest_expects(quick: list[Result]) -> None:
    # compare_model also fails a passing run whose distinct-state count drifted from the manifest
    problems = [f"{r.entry.name}: {p}" for r in quick for p in r.problems]
    assert problems == []
    kinds = {getattr(r.entry, "kind", "trace") for r in quick}
    assert {"check", "broken", "trace"} <= kinds  # the tier really holds passing, broken and trace entries
    # every model keeps a passing configuration and a broken variant in the default suite
    for kind in ("check", "broken"):
        modules = {r.entry.module for r in quick if getattr(r.entry, "kind", "") == kind}
        assert modules == {module["module"] for module in load_manifest()["modules"]}, kind


@pytest.mark.slow
def test_every_heavy_quick_entry_ends_as_the_manifest_expects_and_covers_every_action(
    tools: tuple[Path, Path],
) -> None:
    heavy, examples = _quick_entries(heavy=True)
    assert heavy and examples, "no heavy entry: the slow test would check nothing"
    results = run_entries(heavy, examples, *tools, jobs=2, timeout=600)
    assert [f"{r.entry.name}: {p}" for r in results for p in r.problems] == []
    light = run_entries(*_quick_entries(heavy=False), *tools, jobs=2, timeout=300)
    uncovered = uncovered_actions([*results, *light])
    assert {module: actions for module, actions in uncovered.items() if actions} == {}


def test_passing_runs_match_their_recorded_state_counts(quick: list[Result]) -> None:
    checked = [r for r in quick if getattr(r.entry, "kind", "") == "check"]
    assert checked
    for result in checked:
        assert result.outcome is not None
        assert result.outcome.distinct_states == result.entry.data["distinctStates"], result.entry.name


def test_broken_variants_fail_on_their_property_with_a_counterexample(quick: list[Result]) -> None:
    broken = [r for r in quick if getattr(r.entry, "kind", "") == "broken"]
    assert len(broken) >= 8
    for result in broken:
        assert result.outcome is not None
        assert result.outcome.violated == result.entry.data["property"], result.entry.name
        assert len(result.outcome.counterexample) >= 2, f"{result.entry.name}: no counterexample parsed"
        table = steps(result.outcome.counterexample)
        assert table[0].action and all(step.changes for step in table)
        # after the initial state, every step names the action TLC took and what it changed
        assert all(step.changes != ("(nothing changed)",) for step in table[1:] if "Stutter" not in step.action)


def test_every_action_is_enabled_in_some_coverage_run(quick: list[Result]) -> None:
    """For the modules whose coverage runs are light; the slow tier checks KeySharedOrdering's heavy ones."""
    uncovered = uncovered_actions(quick)
    assert uncovered, "no coverage run: the check would be vacuous"
    assert {module: actions for module, actions in uncovered.items() if actions} == {}


def test_every_must_safety_requirement_is_modelled_or_says_why() -> None:
    rows, problems = requirement_coverage(load_manifest())
    assert problems == []
    assert rows and all(row.modelled or row.why for row in rows)


def test_the_readme_tables_are_fresh() -> None:
    assert stale_sections() == [], "run: keyshared model-check --readme"


# --- TLC output parsing -------------------------------------------------------------------------------


def test_tlc_values_parse() -> None:
    value = parse_value('[st |-> (0 :> "pending" @@ 1 :> "resolved"), m |-> {"c1", "c2"}, q |-> <<1, 2>>]')
    assert isinstance(value, TlaRecord)
    assert isinstance(value["st"], TlaFunction) and value["st"][1] == "resolved"
    assert isinstance(value["m"], TlaSet) and set(value["m"]) == {"c1", "c2"}
    assert isinstance(value["q"], TlaSeq) and list(value["q"]) == [1, 2]
    assert parse_value('"a \\"quoted\\" key"') == 'a "quoted" key'


def test_a_real_counterexample_parses_into_steps(tools: tuple[Path, Path]) -> None:
    entry = entries(load_manifest(), ["CursorSafetyBugCursorAtHighestAck"])[0][0]
    outcome = run_tlc(TlcRun(entry.spec, entry.config, timeout=300), *tools)
    assert outcome.result == "safety failure" and outcome.violated == "KS_CUR_1_PersistedCursorSafe"
    rows = steps(outcome.counterexample)
    assert rows[0].number == 1 and len(rows) >= 3
    assert any(change.startswith("pcur") for row in rows[1:] for change in row.changes)  # the bad persist shows


def _message(code: int, severity: int, body: str) -> str:
    return f"@!@!@STARTMSG {code}:{severity} @!@!@\n{body}\n@!@!@ENDMSG {code} @!@!@\n"


def test_tool_output_and_exit_codes_map_to_results() -> None:
    assert parse_output("", 0).result == "success"
    assert parse_output("", 11).result == "deadlock failure"
    assert parse_output("", 75).result == "error"
    unexpected = parse_output("", 99)
    assert unexpected.result == "error" and "99" in unexpected.errors[0]
    deliver = '2: <Deliver line 10, col 1 to line 12, col 5 of module M>\n/\\ st = (0 :> "outstanding")'
    safety = parse_output(
        _message(2110, 1, "Invariant KS_ORD_1_FirstDeliveryOrder is violated.")
        + _message(2217, 4, '1: <Initial predicate>\n/\\ st = (0 :> "pending")')
        + _message(2217, 4, deliver)
        + _message(2199, 0, "40 states generated, 17 distinct states found, 0 states left on queue."),
        12,
    )
    assert safety.failure == "safety failure on KS_ORD_1_FirstDeliveryOrder"
    assert safety.distinct_states == 17 and safety.total_states == 40
    assert [s.action for s in safety.counterexample] == ["Initial predicate", "Deliver"]
    assert steps(safety.counterexample)[1].changes == ('st[0]: "pending" -> "outstanding"',)
    liveness = parse_output(_message(2116, 1, "Temporal properties were violated.") + _message(2218, 4, "x"), 13)
    assert liveness.result == "liveness failure" and liveness.stuttering


def test_a_missing_jar_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingInput, match=r"tla2tools\.jar not found"):
        find_jar(tmp_path / "nope.jar")
    monkeypatch.setenv("KEYSHARED_TLA2TOOLS", str(tmp_path / "also-nope.jar"))
    with pytest.raises(MissingInput, match=r"also-nope\.jar"):
        find_jar()


# --- the CLI ------------------------------------------------------------------------------------------


def test_model_check_reports_a_mismatch_with_exit_1(
    tools: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A manifest that (wrongly) expects a broken variant to succeed: the run must not match it.
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    lying = copy.deepcopy(data)
    for module in lying["modules"]:
        for model in module["models"]:
            if model["config"] == "CursorSafetyBugHolesCapped.cfg":
                model.update(result="success", kind="check")
                model.pop("property", None)
    import ks_models.manifest as manifest_module

    original = manifest_module.load_manifest
    monkeypatch.setattr(manifest_module, "load_manifest", lambda path=MANIFEST: _validated(original, lying, tmp_path))
    assert main(["model-check", "CursorSafetyBugHolesCapped"]) == 1
    out = capsys.readouterr().out
    assert "CursorSafetyBugHolesCapped" in out and "KS_CUR_6_AllHolesPersisted" in out


def _validated(original: Any, data: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = MANIFEST.parent / f".test-manifest-{tmp_path.name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    try:
        loaded: dict[str, Any] = original(path)
        return loaded
    finally:
        path.unlink()


def test_model_check_of_an_unknown_model_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model-check", "NoSuchModel"]) != 0
    err = capsys.readouterr().err
    assert "NoSuchModel" in err and len(err.strip().splitlines()) == 1


# --- trace validation of the reference's runs ---------------------------------------------------------

WORKLOADS = (pytest.param("steady", marks=pytest.mark.slow), "churn", "poison-block", "crash-restart")
"""The reference's workloads whose traces the model must accept (steady, which the others' traces contain: slow)."""


def _reference_trace(workload: str, size: int = 30) -> list[Event]:
    events: list[Event] = run_named(workload, size=size, seed=11, store=MemoryStore()).events
    return events


@pytest.mark.parametrize("workload", WORKLOADS)
def test_reference_traces_are_behaviours_of_the_model(tools: tuple[Path, Path], tmp_path: Path, workload: str) -> None:
    path = tmp_path / f"{workload}.jsonl"
    write_trace(_reference_trace(workload), path)
    verdict = validate_trace(path, *tools, timeout=300)
    assert verdict.accepted is True, verdict.summary


def _renumbered(events: list[Event]) -> list[Event]:
    """Dense seqs; each event's tick is the number of tick events up to it (trace format rules)."""
    ticks = 0
    fixed = []
    for seq, event in enumerate(events):
        ticks += event["event"] == "tick"
        fixed.append(dict(event, seq=seq, tick=ticks))
    return fixed


def _reordered(events: list[Event]) -> tuple[list[Event], int]:
    """Swap the first deliveries of two consecutive messages of one key; the seq of the one moved ahead."""
    first: dict[int, int] = {}
    for index, event in enumerate(events):
        if event["event"] == "deliver":
            first.setdefault(event["offset"], index)
    by_key: dict[str, list[int]] = {}
    for event in events:
        if event["event"] == "publish":
            by_key.setdefault(event["key"], []).append(event["offset"])
    for offsets in by_key.values():
        for earlier, later in itertools.pairwise(offsets):
            if earlier in first and later in first and first[earlier] < first[later]:
                i, j = first[earlier], first[later]
                publish_later = next(
                    k for k, e in enumerate(events) if e["event"] == "publish" and e["offset"] == later
                )
                if publish_later < i:
                    moved = list(events)
                    delivery = moved.pop(j)
                    moved.insert(i, delivery)
                    return _renumbered(moved), i
    raise AssertionError("no two delivered messages of one key to reorder")


def test_an_injected_reordering_is_rejected_at_the_moved_delivery(tools: tuple[Path, Path], tmp_path: Path) -> None:
    events, moved_seq = _reordered(_reference_trace("steady"))
    path = tmp_path / "reordered.jsonl"
    write_trace(events, path)
    verdict = validate_trace(path, *tools, timeout=300)
    assert verdict.accepted is False
    assert verdict.first_unfit is not None and verdict.first_unfit["seq"] == moved_seq
    assert verdict.first_unfit["event"] == "deliver"
    assert "KS-ORD-1" in verdict.reasons


def test_model_check_trace_names_the_first_unfit_event(
    tools: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, moved_seq = _reordered(_reference_trace("steady"))
    path = tmp_path / "reordered.jsonl"
    write_trace(events, path)
    assert main(["model-check", "--trace", str(path)]) == 1
    assert f"seq {moved_seq}" in capsys.readouterr().out


# --- the deep tier (on demand) ------------------------------------------------------------------------


@pytest.mark.slow
def test_deep_configurations_end_as_the_manifest_expects(tools: tuple[Path, Path]) -> None:
    models, _ = entries(load_manifest(), deep=True)
    deep = [m for m in models if m.tier == "deep"]
    assert deep
    results = run_entries(deep, [], *tools, workers=2, timeout=3600)
    assert [f"{r.entry.name}: {p}" for r in results for p in r.problems] == []


def test_each_tlc_run_unpacks_the_standard_modules_in_its_own_folder(tmp_path: Path) -> None:
    """TLC writes Naturals.tla, Sequences.tla, ... under java.io.tmpdir and deletes them at exit: runs that
    shared /tmp parsed each other's half-written copies (quick tier, two jobs: about one run in two)."""
    from ks_models.tlc import build_command

    spec = Path(MANIFEST).parent / "MCKeySharedOrdering.tla"
    run = TlcRun(spec=spec, config=spec.with_suffix(".cfg"))
    first, second = (build_command(Path("java"), Path("tla2tools.jar"), run, tmp_path / name) for name in "ab")
    folders = [
        {a.split("=", 1)[1] for a in command if a.startswith("-Djava.io.tmpdir=")} for command in (first, second)
    ]
    assert folders == [{str(tmp_path / "a")}, {str(tmp_path / "b")}]


def test_short_runs_start_a_cheap_jvm_and_searches_keep_the_parallel_collector(
    tools: tuple[Path, Path], tmp_path: Path
) -> None:
    """Trace replays and broken variants end within seconds: their JVM has no optimising JIT nor parallel GC."""
    from ks_models.tlc import SHORT_RUN_JVM, build_command

    spec = Path(MANIFEST).parent / "MCKeySharedOrdering.tla"
    search = build_command(Path("java"), Path("tla2tools.jar"), TlcRun(spec, spec.with_suffix(".cfg")), tmp_path)
    assert "-XX:+UseParallelGC" in search and not set(SHORT_RUN_JVM) & set(search)
    models, _ = entries(load_manifest())
    broken = next(m for m in models if m.kind == "broken" and m.module == "BucketHandoff")  # about a second
    results = run_entries([broken], [], *tools, timeout=120)
    assert results[0].outcome is not None and results[0].problems == []
    assert results[0].outcome.command[1 : 1 + len(SHORT_RUN_JVM)] == SHORT_RUN_JVM
    trace = Path(MANIFEST).parent.parent / "spec" / "examples" / "traces" / "good" / "strict-basic.jsonl"
    verdict = validate_trace(trace, *tools, timeout=120)
    assert verdict.accepted is True and verdict.outcome.command[1 : 1 + len(SHORT_RUN_JVM)] == SHORT_RUN_JVM


# --- the quick tier reaches the hard states (issue 16) ------------------------------------------------


def _constants(config: Path) -> dict[str, str]:
    """The CONSTANTS of a .cfg: name -> the text after '=' or '<-'."""
    found: dict[str, str] = {}
    for line in config.read_text(encoding="utf-8").splitlines():
        name, sep, value = line.strip().partition(" = ") if " = " in line else line.strip().partition(" <- ")
        if sep and name.isidentifier():
            found[name] = value.strip()
    return found


def test_the_quick_tier_reaches_the_hard_states() -> None:
    models, _ = entries(load_manifest())
    checks = [(m, _constants(m.config), m.config.read_text(encoding="utf-8")) for m in models if m.kind == "check"]
    ordering = [c for m, c, _ in checks if m.module == "KeySharedOrdering"]
    assert any(int(c["Window"]) < int(c["MaxMsgs"]) for c in ordering), "no binding window"
    assert any(int(c["Capacity"]) < int(c["MaxMsgs"]) and c["Profile"] == '"owner"' for c in ordering)
    assert any(int(c["MaxRedeliveries"]) >= 1 and int(c["MaxFailures"]) >= 1 for c in ordering), "no redelivery"
    assert any(int(c["MaxRestarts"]) >= 1 and int(c["MaxFailures"]) >= 1 for c in ordering), "no restart after failures"
    assert any(c["Consumers"].count(",") >= 2 for c in ordering), "never three consumers"
    live = [c for m, c, text in checks if m.module == "KeySharedOrdering" and "SPECIFICATION LiveSpec" in text]
    assert any(c["FilterChoices"] == "AcceptAllOrOne" and int(c["MaxRestarts"]) >= 1 for c in live)
    buckets = [c for m, c, _ in checks if m.module == "BucketHandoff"]
    assert any(c["MaxLayoutChanges"] == "2" for c in buckets), "no chain of two layout changes"
    cursor = [c for m, c, _ in checks if m.module == "CursorSafety"]
    assert any(int(c["Window"]) < int(c["N"]) and int(c["MaxCrashes"]) >= 1 for c in cursor)
