"""The conformance kit end to end: exit codes, reports, faults, both transports, replays and the pytest plugin."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ks_conformance.adapters import connect, stdio_command
from ks_conformance.report import read_report, schema_problem
from ks_conformance.results import settings_for
from ks_conformance.suite import run_suite
from ks_spec.requirements import load_index

TESTS = Path(__file__).resolve().parent
FAULTS = TESTS / "conformance_faults.py"


def keyshared(*args: str, timeout: float = 600, temp: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with tests/ importable (for the mutants and the faulty adapter).

    `temp` becomes TMPDIR for the run and the adapters it starts, so a test can see what they leave behind.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    if temp is not None:
        env["TMPDIR"] = str(temp)
    return subprocess.run(
        [sys.executable, "-m", "keyshared", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def faulty(mode: str, at: int = 25) -> str:
    return "cmd:" + shlex.join([sys.executable, str(FAULTS), mode, str(at)])


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    folder = tmp_path_factory.mktemp("reference-run")
    done = keyshared(
        "conformance", "run", "--adapter", "reference",
        "--report", str(folder / "report.jsonl"),
        "--junit", str(folder / "junit.xml"),
        "--markdown", str(folder / "summary.md"),
        "--scenarios", str(folder / "scenarios"),
    )  # fmt: skip
    return done, folder


def test_the_reference_is_conformant_with_a_valid_report(
    reference_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, folder = reference_run
    assert done.returncode == 0, done.stdout + done.stderr
    lines = read_report(folder / "report.jsonl")
    assert [schema_problem(line) for line in lines if schema_problem(line)] == []
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "footer"
    assert lines[-1]["verdict"] == "conformant"
    requirements = [line for line in lines if line["type"] == "requirement"]
    assert [line["id"] for line in requirements] == [str(entry["id"]) for entry in load_index()]
    assert not [line for line in lines if line["type"] in ("violation", "error")]
    assert not (folder / "scenarios").exists() or not list((folder / "scenarios").iterdir())


def test_junit_and_markdown_renderings(reference_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, folder = reference_run
    suite = ElementTree.parse(folder / "junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) == len(load_index())
    skipped = [case for case in cases if case.find("skipped") is not None]
    assert not [case for case in cases if case.find("failure") is not None]
    statuses = [line["status"] for line in read_report(folder / "report.jsonl") if line["type"] == "requirement"]
    assert len(skipped) == sum(1 for status in statuses if status in ("skipped", "untested", "vacuous"))
    assert "conformant" in (folder / "summary.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("crash", "crash"),
        ("garbage", "malformed"),
        ("wrong-seq", "wrong-seq"),
        ("hang", "timeout"),
        ("errored", "errored"),
    ],
)
def test_a_faulty_adapter_makes_the_run_unknown(mode: str, kind: str, tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    temp = tmp_path / "temp"
    temp.mkdir()
    done = keyshared(
        "conformance", "run", "--adapter", faulty(mode), "--timeout", "2", "--report", str(report),
        "--scenarios", str(tmp_path / "scenarios"), temp=temp,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = read_report(report)
    assert lines[-1]["verdict"] == "unknown"
    errors = [line for line in lines if line["type"] == "error"]
    assert errors and errors[0]["kind"] == kind, errors
    # Even the hung adapter, ended by the kit, removes the reference's temporary store.
    assert not list(temp.glob("ks-reference-*"))


class _FailsFromOp:
    """The reference, except that every op from the `at`-th on raises; counts the ops asked after the first."""

    def __init__(self, at: int) -> None:
        from ks_reference.adapter import create

        self.inner, self.at, self.ops, self.after_fault = create(), at, 0, 0

    def start(self) -> dict[str, object]:
        return dict(self.inner.start())

    def reset(self, config: dict[str, object]) -> dict[str, object]:
        return dict(self.inner.reset(config))

    def op(self, op: dict[str, object]) -> dict[str, object]:
        self.ops += 1
        if self.ops > self.at:
            self.after_fault += 1
        if self.ops >= self.at:
            raise RuntimeError("injected failure")
        return dict(self.inner.op(op))

    def stats(self) -> dict[str, object]:
        return dict(self.inner.stats())

    def stop(self) -> None:
        self.inner.stop()


def test_the_first_fault_ends_the_run_without_shrinking() -> None:
    """Shrinking a fault keeps nothing and meets the fault again at every step (a hang: the whole timeout)."""
    from ks_conformance.protocol import InProcessConnection

    target = _FailsFromOp(25)
    result = run_suite(
        lambda: InProcessConnection(target, "fails-from-op-25"),
        settings_for("ci", seed=0, max_examples=10, examples_total=0, rounds=1, coverage_rounds=0, shrinks=50),
    )
    assert [fault.kind for fault, _ in result.faults] == ["crash"]
    assert target.after_fault == 0, f"{target.after_fault} ops were sent after the first fault"


def test_the_determinism_check_keeps_the_passing_examples_with_the_most_events() -> None:
    """Hypothesis tries tiny examples first; replaying those twice shows no order that depends on the run."""
    from types import SimpleNamespace

    from ks_conformance.search import RunContext

    def session(events: int, anomalies: list[str] | None = None) -> Any:
        checker = SimpleNamespace(exercised={}, applies=lambda name: True)
        return SimpleNamespace(
            config={"events": events},
            steps=[object()],
            trace=[None] * events,
            anomalies=anomalies or [],
            checker=checker,
            harness_exercised={},
            skipped_ops={},
        )

    context = RunContext(connect=lambda: None, capabilities=None, implementation={}, keep=3)  # type: ignore[arg-type]
    for events in (1, 9, 2, 30, 9, 4, 50):
        context.collect(session(events))
    context.collect(session(99, ["order-violated"]))  # a failing example is shrunk, not replayed for determinism
    assert [config["events"] for config, _ in context.kept] == [50, 30, 9]


def test_a_terminated_stdio_adapter_still_releases_its_store(tmp_path: Path) -> None:
    command = shlex.split(stdio_command("reference")[4:])
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        for request in ({"cmd": "start", "version": 1}, {"cmd": "reset", "seq": 1, "config": {}}):
            process.stdin.write((json.dumps(request) + "\n").encode())
            process.stdin.flush()
            process.stdout.readline()
        assert list(tmp_path.glob("ks-reference-*"))  # the store exists while the adapter serves
        process.terminate()
        assert process.wait(timeout=30) == 143
    assert not list(tmp_path.glob("ks-reference-*"))


@pytest.mark.parametrize("mode", ["bad-version", "no-start"])
def test_an_adapter_that_does_not_start_exits_78_with_one_line(mode: str, tmp_path: Path) -> None:
    done = keyshared("conformance", "run", "--adapter", faulty(mode), "--timeout", "5")
    assert done.returncode == 78
    assert len(done.stderr.strip().splitlines()) == 1 and "failed to start" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("adapter", ["nonsense", "py:no_module_part", "cmd:"])
def test_a_malformed_adapter_name_is_a_usage_error(adapter: str) -> None:
    done = keyshared("conformance", "run", "--adapter", adapter)
    assert done.returncode == 64
    assert len(done.stderr.strip().splitlines()) == 1 and "--adapter" in done.stderr


def test_a_mutant_fails_and_its_saved_scenario_replays_against_any_adapter(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    report = tmp_path / "report.jsonl"
    adapter = "py:conformance_mutants:no_draining"
    done = keyshared(
        "conformance", "run", "--adapter", adapter, "--examples", "8",
        "--scenarios", str(scenarios), "--report", str(report),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = read_report(report)
    violations = [line for line in lines if line["type"] == "violation"]
    assert {line["id"] for line in violations} == {"KS-DRN-1"}
    assert all(line["text"].startswith("Let ") and line["explanation"]["let"] for line in violations)
    assert all(line["events"] for line in violations), "every violation carries its witness events"
    saved = sorted(scenarios.glob("*.jsonl"))
    assert saved and all(Path(line["scenario"]) in saved for line in violations)
    again = keyshared("conformance", "replay", str(saved[0]), "--adapter", adapter)
    assert again.returncode == 1 and "split-owner" in again.stdout
    clean = keyshared("conformance", "replay", str(saved[0]), "--adapter", "reference")
    assert clean.returncode == 0, clean.stdout
    over_stdio = keyshared("conformance", "replay", str(saved[0]), "--adapter", stdio_command(adapter))
    assert over_stdio.returncode == 1


def test_both_transports_give_the_same_verdict_on_every_requirement() -> None:
    settings = settings_for("ci", seed=3, max_examples=6, examples_total=0, rounds=1, coverage_rounds=0)
    local = run_suite(lambda: connect("reference"), settings)
    remote = run_suite(lambda: connect(stdio_command("reference")), settings)
    assert local.verdict == remote.verdict
    assert [(r["id"], r["status"]) for r in local.requirements] == [(r["id"], r["status"]) for r in remote.requirements]
    assert local.examples == remote.examples and local.steps == remote.steps


@pytest.mark.parametrize("transport", ["in-process", "stdio"])
def test_an_order_seeded_at_each_start_is_a_determinism_warning(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reset agrees with the last, so only replaying on a newly started adapter (or process) shows it."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    adapter = "py:conformance_mutants:start_seeded_pass"
    settings = settings_for("ci", seed=0, max_examples=20, examples_total=0, rounds=1, coverage_rounds=0)
    result = run_suite(lambda: connect(adapter if transport == "in-process" else stdio_command(adapter)), settings)
    assert result.faults == []
    statuses = {r["id"]: r["status"] for r in result.requirements}
    assert statuses["KS-GEN-5"] == "warning", statuses["KS-GEN-5"]
    assert "failed" not in statuses.values(), "nothing but the order is wrong with it"


def _check_determinism_of_start_seeded(
    monkeypatch: pytest.MonkeyPatch, kept: Callable[[Any], list[tuple[dict[str, Any], list[Any]]]]
) -> tuple[Any, Any]:
    """The determinism check alone on the start_seeded_pass mutant, with the kept examples `kept(capabilities)`
    builds: the run's context and result."""
    from conformance_mutants import BY_NAME
    from ks_conformance.protocol import InProcessConnection
    from ks_conformance.results import RunResult
    from ks_conformance.search import RunContext
    from ks_conformance.suite import _check_determinism

    monkeypatch.syspath_prepend(str(TESTS))
    mutant = BY_NAME["start_seeded_pass"]

    def connect() -> InProcessConnection:
        return InProcessConnection(mutant.create(), "start_seeded_pass")

    connection = connect()
    info = connection.start()
    context = RunContext(connect, info.capabilities, info.implementation, connection=connection)
    context.kept = kept(info.capabilities)
    result = RunResult("start_seeded_pass", "in-process", info, info.capabilities, settings_for("ci", seed=0))
    _check_determinism(context, result)
    return context, result


def _one_key_example() -> list[Any]:
    """One message, then a consumer that takes it."""
    from ks_conformance.scenario import Step

    return [
        Step(op={"op": "publish", "offset": 0, "key": "a"}),
        Step(op={"op": "add_consumer", "consumer": "c1", "capacity": 1, "filters": []}),
    ]


def test_an_example_the_determinism_check_cannot_replay_does_not_end_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check used to end, silently and with nothing compared, at the first kept example it could not replay
    (here: one under a selector the adapter does not have); the others, and the many-keys probe, still run."""
    config = {"profile": "owner", "selector": "ring"}

    def kept(capabilities: Any) -> list[tuple[dict[str, Any], list[Any]]]:
        assert "buckets" not in capabilities.selectors  # the second example cannot be replayed
        return [(config, _one_key_example()), ({**config, "selector": "buckets"}, _one_key_example())]

    context, result = _check_determinism_of_start_seeded(monkeypatch, kept)
    assert context.exercised.get("nondeterministic") == 2  # the first example and the probe, across two starts
    assert [f.scenario.anomalies for f in result.findings] == [["nondeterministic"]]


def test_the_many_keys_probe_lifts_a_drawn_window_that_would_hide_a_start_seeded_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe runs under the richest example's configuration; with the window of 1 the kit may draw, one key is
    read at a time and every start delivers them in one order: the probe lifts the window (a flake of the mutant
    test, seen once in the default suite)."""
    from ks_conformance.suite import _many_keys_probe

    narrow = {"profile": "owner", "selector": "ring", "window": 1}

    def kept(capabilities: Any) -> list[tuple[dict[str, Any], list[Any]]]:
        probe = _many_keys_probe(narrow, capabilities)
        assert probe is not None and "window" not in probe[0] and narrow["window"] == 1
        return [(narrow, _one_key_example())]

    _, result = _check_determinism_of_start_seeded(monkeypatch, kept)
    assert [f.scenario.anomalies for f in result.findings] == [["nondeterministic"]]


def test_the_reference_driven_in_batch_mode_shows_nothing_wrong() -> None:
    """Batch mode (replays of the run so far, settling in rounds) on an implementation known to be right."""
    from ks_conformance.protocol import InProcessConnection
    from ks_reference.adapter import ReferenceAdapter

    settings = settings_for("ci", seed=2, max_examples=4, examples_total=0, rounds=1, coverage_rounds=0)
    result = run_suite(lambda: InProcessConnection(ReferenceAdapter(durable=False), "reference"), settings, batch=True)
    assert result.faults == [] and result.findings == []
    assert result.examples >= 4 * 7 and result.capabilities.stats is False  # stats are not compared in batch mode
    statuses = {r["id"]: r["status"] for r in result.requirements}
    assert statuses["KS-OBS-1"] == "skipped" and "failed" not in statuses.values()


def test_coverage_rounds_aim_at_what_is_still_vacuous() -> None:
    """A coverage round searches only where a vacuous requirement's checks can run, with the form options at
    their defaults unless those checks need them (a round drawing permits would dilute a search for KS-POI-4)."""
    from ks_conformance.adapters import connect
    from ks_conformance.results import RunResult
    from ks_conformance.search import strata
    from ks_conformance.suite import _focused, _plain_for

    connection = connect("reference")
    info = connection.start()
    connection.close()
    declared = info.capabilities
    result = RunResult("reference", "in-process", info, declared, settings_for("ci"))
    every = strata(declared)

    plain = _plain_for(["KS-POI-4"], declared, result)
    assert not {"flow_control", "read_bound", "tick_order", "drain_granularity"} & set(plain.config_values)
    assert "bucket_assignment" in plain.config_values  # not a form option: kept
    focused = [f for f in (_focused(s, ["KS-POI-4"], plain, result) for s in every) if f is not None]
    assert {(f.profile, f.poison_policy) for f in focused} == {("strict", "block"), ("owner", "block")}

    assert "flow_control" in _plain_for(["KS-FLW-4"], declared, result).config_values  # its check needs permits
    buckets = [f for f in (_focused(s, ["KS-BKT-8"], declared, result) for s in every) if f is not None]
    assert buckets and all(f.selectors == ("buckets",) for f in buckets)
    assert all(f.profile != "best-effort" for f in buckets)


def test_batch_mode_needs_the_batch_capability() -> None:
    from ks_spec.errors import UserError

    full = connect("reference")
    declared = full.start().capabilities
    full.close()
    narrow = declared.narrowed(batch=False)
    with pytest.raises(UserError, match="batch mode needs an adapter with the 'batch' capability"):
        run_suite(lambda: connect("reference"), settings_for("ci"), capabilities=narrow, batch=True)


def test_skipped_capabilities_are_reported_skipped_not_passed() -> None:
    from ks_conformance.protocol import Capabilities

    full = connect("reference")
    declared = full.start().capabilities
    full.close()
    narrow = Capabilities(**{**declared.__dict__, "poison_policies": ("drop",), "selectors": ("ring",)})
    result = run_suite(
        lambda: connect("reference"),
        settings_for("ci", max_examples=5, examples_total=0, rounds=1),
        capabilities=narrow,
    )
    statuses = {line["id"]: line for line in result.requirements}
    assert statuses["KS-POI-3"]["status"] == "skipped" and "block" in statuses["KS-POI-3"]["reason"]
    assert statuses["KS-BKT-1"]["status"] == "skipped"
    assert statuses["KS-POI-2"]["status"] == "skipped"


# --- the pytest plugin ------------------------------------------------------------------------------

pytest_plugins = ["pytester"]


def test_plugin_adds_a_test_per_requirement(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_placeholder():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "--keyshared-adapter", "reference", "--keyshared-examples", "4", "-q", "-p", "no:cacheprovider"
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == len(load_index()) + 1


def test_plugin_fails_the_violated_requirement_with_its_explanation(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_nothing="def test_placeholder():\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess(
        "--keyshared-adapter", "py:conformance_mutants:no_draining", "--keyshared-examples", "8", "-q", "-p",
        "no:cacheprovider",
    )  # fmt: skip
    assert result.parseoutcomes().get("failed") == 1
    result.stdout.fnmatch_lines(["*KS-DRN-1 is violated*", "*Let *"])


def test_plugin_fixture_runs_the_suite_on_the_budget_asked_for(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture finds a broken adapter's bug and honours `--keyshared-examples` (the reference's full `ci` run
    is judged conformant by test_the_reference_is_conformant_with_a_valid_report)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(
        test_broker="""
def test_a_broken_broker_is_caught(keyshared_suite):
    result = keyshared_suite("py:conformance_mutants:no_draining", seed=0)
    assert result.verdict == "not-conformant"
    assert "KS-DRN-1" in {r["id"] for r in result.requirements if r["status"] == "failed"}

def test_the_budget_is_the_one_asked_for(keyshared_suite):
    result = keyshared_suite("reference")
    assert result.verdict != "not-conformant" and result.examples > 0
    assert (result.settings.max_examples, result.settings.examples_total) == (8, 0)
"""
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--keyshared-examples", "8")
    assert result.parseoutcomes().get("passed") == 2, result.stdout.str()


def _judge_in_process(name: str, folder: Path | None = None, seed: int = 0, **overrides: Any) -> Any:
    """Run the suite in process against one mutant of tests/conformance_mutants."""
    from conformance_mutants import BY_NAME
    from ks_conformance.protocol import InProcessConnection

    mutant = BY_NAME[name]
    settings = settings_for("ci", seed=seed, **overrides)
    return run_suite(lambda: InProcessConnection(mutant.create(), name), settings, scenarios=folder)


def test_a_kind_seen_while_searching_for_another_gets_its_own_shrunk_witness(tmp_path: Path) -> None:
    """With one small round per stratum, the round ends at the first new kind; `unstable-assignment` shows
    only in an example (or a shrink replay) looking for another. It must still fail its requirement, with a
    witness of its own, shrunk and replayable (issue 13). The suite once counted what it saw after a found
    kind as merely exercised, and listed its requirement passed; then it kept the example unshrunk."""
    from conformance_mutants import BY_NAME
    from ks_conformance.protocol import InProcessConnection
    from ks_conformance.results import report_lines
    from ks_conformance.rules import BY_NAME as KINDS
    from ks_conformance.scenario import read_scenario, replay
    from ks_reference.adapter import create

    name = "per_message_routing"
    # The first seed whose small round meets unstable-assignment (in one or more shapes) only while searching
    # for another kind: 6 today. A run depends on its seed alone (test_a_seed_decides_the_run_whatever_the_process_
    # imported), but every change of the machine's rules moves the search, so the test looks for such a seed from
    # there.
    for seed in (6, *range(100)):
        result = _judge_in_process(name, tmp_path / str(seed), seed=seed, rounds=1, coverage_rounds=0, examples_total=0)
        observed = [f for f in result.findings if f.scenario.found.get("round") == "observed"]
        if observed and {f.anomalies[0].name for f in observed} == {"unstable-assignment"}:
            break
    assert observed and {f.anomalies[0].name for f in observed} == {"unstable-assignment"}
    finding = observed[0]
    status = {line["id"]: line["status"] for line in result.requirements}
    assert status[KINDS["unstable-assignment"].requirement] == "failed"
    assert finding.shrunk and finding.path is not None
    assert len(finding.scenario.steps) < 12, "shrunk to a few steps"
    scenario = read_scenario(finding.path)
    shown = []
    for target in (BY_NAME[name].create(), create()):
        connection = InProcessConnection(target, "replay")
        info = connection.start()
        again = replay(scenario, connection, info.capabilities, info.implementation)
        assert again.session is not None
        shown.append({a.name for a in again.session.anomalies})
    assert shown == [set(scenario.anomalies), set()] and "unstable-assignment" in shown[0]
    lines = [line for line in report_lines(result) if line["type"] == "violation"]
    assert lines and all(schema_problem(line) is None for line in lines)


def test_the_same_seed_gives_the_same_report_and_scenarios(tmp_path: Path) -> None:
    """Shrinking is bounded by counts of replays, never by the clock: two runs of one seed agree byte for byte
    (the timestamps and the run time aside), scenarios included."""
    from ks_conformance.results import report_lines

    def run(folder: Path) -> tuple[list[str], dict[str, str]]:
        result = _judge_in_process("persist_eagerly+no_draining", folder, shrinks=20, rounds=1, examples_total=90)
        lines = []
        for line in report_lines(result):
            line = {k: v for k, v in line.items() if k not in ("started", "finished", "duration_s")}
            lines.append(json.dumps(line, sort_keys=True).replace(str(folder), "<scenarios>"))
        files = {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.iterdir())}
        return lines, files

    first, second = run(tmp_path / "one"), run(tmp_path / "two")
    assert sum('"violation"' in line for line in first[0]) >= 2, "two findings, each shrunk"
    assert first == second


def test_a_seed_decides_the_run_whatever_the_process_imported(tmp_path: Path) -> None:
    """Hypothesis mixes the literals of every loaded local module into its draws, so one seed searched
    differently from the CLI, from pytest, or after an adapter's import. Inside `seed_decides` (every round of
    the kit) no such literal is drawn; outside it one is, which shows the probe would catch a Hypothesis
    upgrade that moves the mechanism."""
    import importlib.util

    from hypothesis import given, seed
    from hypothesis import settings as hypothesis_settings
    from hypothesis import strategies as st
    from ks_conformance.determinism import seed_decides

    literal = 10**12 + 7  # in no Hypothesis pool: only this module's source can supply it
    (tmp_path / "pool_probe.py").write_text(f"MARK = {literal}\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("pool_probe", tmp_path / "pool_probe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pool_probe"] = module
    spec.loader.exec_module(module)

    def draws() -> list[int]:
        seen: list[int] = []

        @seed(0)
        @hypothesis_settings(max_examples=400, database=None, deadline=None)
        @given(st.integers(10**12, 10**12 + 1000))
        def probe(value: int) -> None:
            seen.append(value)

        probe()
        return seen

    try:
        outside = draws()
        with seed_decides():
            inside = draws()
        after = draws()
    finally:
        del sys.modules["pool_probe"]
    assert literal in outside and literal in after
    assert literal not in inside
