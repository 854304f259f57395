"""Every relative link and every cited repository file in the project's Markdown exists.

A reader who follows a link or opens a file a document names must find it: a dangling reference is a
broken promise of the documentation, so it fails the suite.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {".venv", ".git", "node_modules", ".hypothesis", "build", "conformance-scenarios"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITED = re.compile(r"`((?:spec|models|reference|conformance|spark|tests|benchmarks|cli)/[A-Za-z0-9_./-]+)`")
"""A backticked path into one of the top-level folders, as the documents cite files."""


def markdown_files() -> list[Path]:
    """The repository's own Markdown files (not the virtual environment's or generated folders')."""
    return sorted(
        path for path in ROOT.rglob("*.md") if not any(part in SKIPPED_DIRS for part in path.relative_to(ROOT).parts)
    )


def _exists(target: str, document: Path) -> bool:
    path = target.split("#", 1)[0]
    if not path:
        return True
    return (document.parent / path).exists() or (ROOT / path).exists()


@pytest.mark.parametrize("document", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_cited_file_exists(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    missing = []
    for number, line in enumerate(text.splitlines(), start=1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same document
            if not _exists(target, document):
                missing.append(f"line {number}: link {target}")
        for cited in CITED.findall(line):
            if any(c in cited for c in "<>*") or cited.endswith("/"):
                continue
            if not _exists(cited.rstrip("."), document):
                missing.append(f"line {number}: cites {cited}")
    assert not missing, f"{document.relative_to(ROOT)}: " + "; ".join(missing)


def test_the_check_sees_the_documents() -> None:
    names = {str(p.relative_to(ROOT)) for p in markdown_files()}
    assert {"README.md", "spec/key-shared.md", "spec/scenario-format.md"} <= names
