"""The README and the example docs stay true: the spec version they print is the spec's, and the README keeps
the user's order (issue 30: what it is, first run, check a dispatcher, a trace, read a report, models)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ks_spec import SPEC_VERSION

ROOT = Path(__file__).resolve().parent.parent
PRINTS_A_VERSION = re.compile(r"\b(?:spec|Spec version) (\d+\.\d+)\b")
DOCUMENTS = sorted(
    [ROOT / "README.md", *ROOT.glob("examples/**/*.md"), *ROOT.glob("conformance/adapters/*/*.md")],
)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_spec_version_a_document_prints_is_the_current_one(document: Path) -> None:
    """Outputs pasted into the docs (a run's header, a report's first lines) name the spec they judged by."""
    stale = [
        f"{document.relative_to(ROOT)}:{number}: {match.group(0)}"
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), start=1)
        for match in PRINTS_A_VERSION.finditer(line)
        if match.group(1) != SPEC_VERSION
    ]
    assert not stale, f"spec is {SPEC_VERSION}: " + "; ".join(stale)


def test_the_version_pattern_finds_what_the_kit_prints() -> None:
    assert PRINTS_A_VERSION.search("mutant 0.1.0 via py:m:f (in-process), spec 1.3").group(1) == "1.3"  # type: ignore[union-attr]
    assert PRINTS_A_VERSION.search("Spec version 1.4, report version 1.").group(1) == "1.4"  # type: ignore[union-attr]


def test_the_readme_is_in_the_users_order() -> None:
    headings = [
        line[3:] for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("## ")
    ]
    wanted = [
        "What it is",
        "First run",
        "Check your dispatcher",
        "Check a trace or a Spark pipeline",
        "Read a report",
        "Model-check a change",
        "Where everything lives",
    ]
    assert headings == wanted
