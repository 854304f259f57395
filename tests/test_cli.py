"""The CLI: every command has --help, user mistakes are one line and a non-zero exit."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from keyshared.cli import build_parser, main


def _subparsers(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((*prefix, name))
                found += _subparsers(sub, (*prefix, name))
    return found


COMMANDS = _subparsers(build_parser())


def test_top_level_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    for command in {c[0] for c in COMMANDS}:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([*command, "--help"])
    assert caught.value.code == 0
    assert "usage: keyshared " + " ".join(command) in capsys.readouterr().out


def test_usage_error_exits_64(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["no-such-command"])
    assert caught.value.code == 64
    assert "error:" in capsys.readouterr().err


def test_missing_trace_is_one_line_no_traceback(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "keyshared", "trace", "validate", str(tmp_path / "absent.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 66
    assert completed.stderr.strip().count("\n") == 0
    assert "Traceback" not in completed.stderr and "absent.jsonl" in completed.stderr


def test_invalid_trace_exits_1_naming_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"seq":0,"tick":0,"event":"publish","offset":0,"key":"k"}\n')
    assert main(["trace", "validate", str(bad)]) == 1
    assert f"{bad}:1: field 'event'" in capsys.readouterr().out


def test_spec_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "check"]) == 0
