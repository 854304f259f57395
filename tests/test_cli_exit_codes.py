"""Exit codes: README.md's table is keyshared.exit_codes, and the CLI exits with the code of each kind of mistake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from keyshared import exit_codes
from keyshared.cli import main
from ks_spec.errors import JobFailed, MissingInput, Unavailable, UserError

ROOT = Path(__file__).resolve().parent.parent


def readme_table() -> dict[int, str]:
    """The rows of README.md's exit code table."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    return {int(code): meaning.strip() for code, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_the_readme_table_is_the_exit_code_table() -> None:
    assert readme_table() == exit_codes.EXIT_CODES


def test_each_kind_of_user_error_has_its_code_unless_the_raiser_names_one() -> None:
    assert exit_codes.of_error(UserError("bad")) == 65
    assert exit_codes.of_error(MissingInput("gone")) == 66
    assert exit_codes.of_error(Unavailable("no java")) == 69
    assert exit_codes.of_error(JobFailed("lost executor")) == 70
    assert exit_codes.of_error(MissingInput("gone", exit_code=64)) == 64


def test_the_cli_exits_with_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": "teleport"}\n', encoding="utf-8")
    assert main(["check-trace", str(tmp_path / "absent.jsonl")]) == 66
    assert main(["simulate", "--file", str(bad)]) == 65
    assert main(["spec", "trace", "-".join(("KS", "ORD", "999"))]) == 64  # built: not a citation for spec check
    with pytest.raises(SystemExit) as stopped:
        main(["spec", "list", "--no-such-option"])
    assert stopped.value.code == 64
    errors = capsys.readouterr().err
    assert "Traceback" not in errors
