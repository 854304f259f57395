"""Every relative link, anchor and cited repository file in the project's Markdown exists.

A reader who follows a link or opens a file a document names must find it: a dangling reference is a
broken promise of the documentation, so it fails the suite. Covered: inline and reference-style links
(with their `#anchor` when they point into Markdown), and backticked paths that start at a top-level
entry of the repository (`spec/trace.md`, `Makefile`) or go up from the document (`../trace.md`).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {"node_modules", "build", "conformance-scenarios"}
"""Besides every hidden folder (.venv, .git, caches): folders of generated or installed files."""
LINK = re.compile(r"\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
BACKTICKED = re.compile(r"`([^`\s]+)`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(root: Path = ROOT) -> list[Path]:
    """The repository's own Markdown files: every *.md outside hidden, generated and installed folders."""
    found = []
    for path in root.rglob("*.md"):
        parts = path.relative_to(root).parts[:-1]
        if any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info") for part in parts):
            continue
        found.append(path)
    return sorted(found)


@cache
def top_level(root: Path = ROOT) -> frozenset[str]:
    """The names a cited path can start with: every visible top-level file and folder of the repository."""
    return frozenset(p.name for p in root.iterdir() if not p.name.startswith(".") and not p.name.endswith(".egg-info"))


def slug(heading: str) -> str:
    """The anchor a heading gets on GitHub: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


@cache
def anchors(document: Path) -> frozenset[str]:
    """Every anchor a link can name in a Markdown file: explicit `<a id>` and each heading's slug."""
    names: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        names.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            names.add(base if count == 0 else f"{base}-{count}")
    return frozenset(names)


def _target(path: str, document: Path, root: Path) -> Path | None:
    """The file a relative reference names, from the document's folder or (a cited path) the root."""
    for base in (document.parent, root):
        candidate = (base / path).resolve()
        if candidate.exists():
            return candidate
    return None


def _link_problem(target: str, document: Path, root: Path) -> str | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None  # a URL
    path, _, fragment = target.partition("#")
    found = _target(path, document, root) if path else document
    if found is None:
        return f"link {target}: no such file"
    if fragment and found.suffix == ".md" and fragment not in anchors(found):
        return f"link {target}: no anchor #{fragment} in {found.name}"
    return None


def _cites_a_path(token: str, root: Path) -> bool:
    """A backticked token that names a file of the repository (not a command, a glob or a placeholder)."""
    if any(c in token for c in "<>*{}$|=") or token.endswith("/") or "..." in token:
        return False
    if token.startswith("../"):
        return True
    head = token.split("/", 1)[0]
    return head in top_level(root) and ("/" in token or (root / head).is_file())


def problems(document: Path, root: Path = ROOT) -> list[str]:
    """Every dangling link, anchor or cited file of one Markdown document, with its line number."""
    found = []
    in_fence = False
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(line) + REFERENCE_LINK.findall(line):
            problem = _link_problem(target, document, root)
            if problem:
                found.append(f"line {number}: {problem}")
        for token in BACKTICKED.findall(line):
            cited = token.split("#", 1)[0].split(":", 1)[0].rstrip(".,;")
            if _cites_a_path(cited, root) and _target(cited, document, root) is None:
                found.append(f"line {number}: cites {cited}")
    return found


@pytest.mark.parametrize("document", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_cited_file_exists(document: Path) -> None:
    missing = problems(document)
    assert not missing, f"{document.relative_to(ROOT)}: " + "; ".join(missing)


def test_the_check_sees_every_tracked_markdown_file() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "*.md", "**/*.md"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = {ROOT / name for name in listed.stdout.split()}
    checked = set(markdown_files())
    assert {"README.md", "spec/key-shared.md", "benchmarks/README.md"} <= {str(p.relative_to(ROOT)) for p in checked}
    assert tracked - checked == set()


def test_the_check_finds_each_kind_of_dangling_reference(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "there.md").write_text('# Title\n\n<a id="KS-ORD-1"></a>\n## A `code` heading\n')
    (tmp_path / "Makefile").write_text("")
    document = tmp_path / "README.md"
    document.write_text(
        "[ok](spec/there.md#KS-ORD-1) [ok](spec/there.md#a-code-heading) [ok](#local) `spec/there.md` `Makefile`\n"
        "## Local\n"
        "[gone](spec/gone.md)\n"
        "[no anchor](spec/there.md#KS-ORD-2)\n"
        "[no local anchor](#elsewhere)\n"
        "`spec/missing.py` and `spec/there.md:12` and `keyshared verify` and `spec/<ID>.md`\n"
        "[ref]: spec/gone-too.md\n"
        "```\n[not checked in code](spec/nowhere.md) `spec/nowhere.py`\n```\n",
        encoding="utf-8",
    )
    top_level.cache_clear()
    try:
        found = problems(document, tmp_path)
    finally:
        top_level.cache_clear()
    assert found == [
        "line 3: link spec/gone.md: no such file",
        "line 4: link spec/there.md#KS-ORD-2: no anchor #KS-ORD-2 in there.md",
        "line 5: link #elsewhere: no anchor #elsewhere in README.md",
        "line 6: cites spec/missing.py",
        "line 7: link spec/gone-too.md: no such file",
    ]
