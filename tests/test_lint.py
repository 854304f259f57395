"""The packages are ruff clean and mypy --strict clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    "cli/keyshared",
    "spec/ks_spec",
    "models/ks_models",
    "reference/ks_reference",
    "conformance/ks_conformance",
    "spark/ks_spark",
]


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (make installs it with the dev extra)")
    return found


def test_ruff_clean() -> None:
    completed = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", *PACKAGES, "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_ruff_formatted() -> None:
    completed = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", *PACKAGES, "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_mypy_strict_clean() -> None:
    completed = subprocess.run(
        [_tool("mypy"), "--strict", "--no-incremental", "--cache-dir", "/dev/null", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


LONG_MODULE_LINES = 500
"""Issue 17: a module past about this many lines says in its docstring why it is long."""


def test_every_long_module_says_why_it_is_long() -> None:
    packages = ("cli/keyshared", "spec/ks_spec", "models/ks_models", "reference/ks_reference")
    packages += ("conformance/ks_conformance", "spark/ks_spark")
    unexplained = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") > LONG_MODULE_LINES:
                doc = ast.get_docstring(ast.parse(text)) or ""
                if "Long because" not in doc:
                    unexplained.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not unexplained, f"split these modules or say why they are long ('Long because ...'): {unexplained}"
