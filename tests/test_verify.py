"""`keyshared verify`: the quick job covers every part of the kit, `--full` runs every step, a failing step fails the
job, and the quick variants are the full steps' own functions with smaller parameters.

The jobs themselves are not run here but for the slow test at the end (the quick job takes a minute or two of TLC
and Spark; the full one half an hour: `make verify-all`, which `make test-slow` runs)."""

from __future__ import annotations

import argparse
import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from keyshared import cmd_verify
from keyshared.cli import main
from keyshared.cmd_verify import PARTS, Quick, Step, StepResult, job, steps

ROOT = Path(__file__).resolve().parent.parent


def test_every_step_belongs_to_a_declared_part_and_the_quick_job_covers_every_part() -> None:
    every = steps()
    assert {step.part for step in every} == set(PARTS)  # no part without a step
    assert {step.part for step in job(full=False)} == {step.part for step in every}
    assert len({step.name for step in every}) == len(every)


def test_the_full_job_runs_every_step_and_the_quick_job_a_part_of_them() -> None:
    every = [step.name for step in steps()]
    quick = [step.name for step in job(full=False)]
    assert [step.name for step in job(full=True)] == every
    assert set(quick) < set(every)
    assert quick == [name for name in every if name in quick]  # the same order


def test_a_quick_variant_is_the_full_steps_function_with_smaller_parameters() -> None:
    """No step has code of its own for the quick job: its quick run is the full run itself, or a partial of it."""
    smaller = 0
    for step in job(full=False):
        assert step.quick is not None
        shows, run = step.variant(full=False)
        if step.quick.run is None:
            assert run is step.run and shows == step.shows
            continue
        assert isinstance(run, functools.partial) and run.func is step.run and run.keywords, step.name
        assert shows != step.shows, f"{step.name}: the quick variant must say what it runs"
        smaller += 1
    assert smaller >= 4  # models, conformance, example adapter, trace


def test_a_step_must_name_a_known_part() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Step("x", "shows", lambda args: StepResult(True, ""), part="spark")


def _fake_steps(ran: list[str]) -> list[Step]:
    def step(name: str, ok: bool | None) -> cmd_verify.Run:
        def run(args: argparse.Namespace) -> StepResult:
            ran.append(name)
            if ok is None:
                raise RuntimeError("boom")
            return StepResult(ok, f"{name} said this")

        return run

    return [
        Step("good", "shows good", step("good", True), part="spec", quick=Quick(), order=1),
        Step(
            "big",
            "shows big",
            step("big (full)", True),
            part="models",
            quick=Quick(step("big (quick)", True), "shows less"),
            order=2,
        ),
        Step("bad", "shows bad", step("bad", False), part="trace", quick=Quick(), order=3),
        Step("slow", "shows slow", step("slow", True), part="trace", order=4),
        Step("crash", "shows crash", step("crash", None), part="reference", order=5),
    ]


def test_a_failing_step_makes_verify_exit_1_and_the_rest_still_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(cmd_verify, "steps", lambda: _fake_steps(ran))
    assert main(["verify"]) == 1
    assert ran == ["good", "big (quick)", "bad"]
    out = capsys.readouterr().out
    assert "-> big (models): shows less" in out and "pass in" in out and "big (quick) said this" in out
    assert "FAIL in" in out and "bad said this" in out and "1 of 3 steps failed" in out
    assert "only in --full: slow, crash" in out


def test_the_full_job_runs_every_step_and_a_crash_is_a_failed_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(cmd_verify, "steps", lambda: _fake_steps(ran))
    assert main(["verify", "--full", "--skip", "bad"]) == 1
    assert ran == ["good", "big (full)", "slow", "crash"]
    out = capsys.readouterr().out
    assert "crashed: RuntimeError: boom" in out and "1 of 4 steps failed" in out and "skipped (--skip): bad" in out


def test_skip_keeps_working_and_an_unknown_step_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(cmd_verify, "steps", lambda: _fake_steps(ran))
    assert main(["verify", "--skip", "bad"]) == 0
    assert ran == ["good", "big (quick)"]
    assert "all 2 steps passed" in capsys.readouterr().out
    assert main(["verify", "--skip", "no-such-step"]) == 64
    assert "no-such-step" in capsys.readouterr().err
    assert ran == ["good", "big (quick)"]


def test_help_explains_both_jobs_and_list_says_which_steps_are_quick(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["verify", "--help"])
    assert caught.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Without options: the quick job" in text and "--full" in text and "--skip STEP" in text
    assert main(["verify", "--list"]) == 0
    listed = capsys.readouterr().out
    for step in steps():
        assert step.part in listed
    assert "quick and full" in listed and "--full only" in listed


def test_the_example_step_fails_and_says_so_when_the_adapter_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from keyshared import steps_examples

    monkeypatch.setattr(steps_examples, "EXAMPLE", Path("examples") / "no_such_adapter.py")
    step = next(step for step in steps() if step.part == "example adapter")
    _, run = step.variant(full=False)
    result = run(argparse.Namespace())
    assert not result.ok and "examples/no_such_adapter.py does not exist" in result.summary


def test_the_example_step_smokes_and_runs_the_toy_adapter() -> None:
    """The quick variant, as the quick job runs it (a few seconds: the toy answers over stdio)."""
    step = next(step for step in steps() if step.part == "example adapter")
    _, run = step.variant(full=False)
    result = run(argparse.Namespace())
    assert result.ok, result.summary
    assert re.search(
        r"smoke: toy-adapter answered \d+ requests correctly; the run over stdio: conformant", result.summary
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_verify_runs_the_quick_job_and_test_slow_the_full_one() -> None:
    def planned(target: str) -> str:
        return subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert re.search(r"keyshared verify$", planned("verify"), re.MULTILINE)
    assert "keyshared verify --full" in planned("verify-all")
    assert "keyshared verify --full" in planned("test-slow")


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.spark
def test_the_quick_job_passes_and_says_what_each_step_ran() -> None:
    """`keyshared verify` as `make verify` runs it (a minute or two on two cores)."""
    if shutil.which("java") is None:
        pytest.skip("java is not installed")
    completed = subprocess.run(
        [sys.executable, "-m", "keyshared", "verify"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    for step in job(full=False):
        shows, _ = step.variant(full=False)
        said = completed.stdout.split(f"-> {step.name} ({step.part}): ", 1)[1].splitlines()
        assert said[0] == shows and said[1].startswith("   pass in "), said[:2]
    assert f"all {len(job(full=False))} steps passed" in completed.stdout
