"""The spec stays honest: IDs well formed and unique, every cited ID exists, the index is fresh."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ks_spec import SPEC_VERSION, paths
from ks_spec.errors import UserError
from ks_spec.requirements import (
    AREAS,
    ID_RE,
    KINDS,
    PROFILES,
    check_citations,
    check_ids,
    check_spec,
    find_citations,
    parse_spec,
    read_retired,
    render_index,
)


@pytest.fixture(scope="module")
def requirements():  # type: ignore[no-untyped-def]
    return parse_spec()


def test_ids_are_well_formed_and_unique(requirements) -> None:  # type: ignore[no-untyped-def]
    ids = [r.id for r in requirements]
    assert len(ids) == len(set(ids))
    for req_id in ids:
        assert ID_RE.match(req_id), req_id
    assert check_ids(requirements, read_retired()) == []


def test_numbers_are_dense_per_area(requirements) -> None:  # type: ignore[no-untyped-def]
    """Numbers count from 1 per area; a gap must be a retired ID, never a silent hole."""
    retired = set(read_retired())
    by_area: dict[str, set[int]] = {}
    for req in requirements:
        by_area.setdefault(req.area, set()).add(int(req.id.rsplit("-", 1)[1]))
    for area, numbers in by_area.items():
        for n in range(1, max(numbers) + 1):
            assert n in numbers or f"KS-{area}-{n}" in retired, f"KS-{area}-{n} is neither defined nor retired"


def test_every_cited_id_exists() -> None:
    requirements, problems = check_spec()
    assert problems == [], problems
    assert check_citations(requirements, paths.REPO_ROOT) == []


def test_index_is_fresh(requirements) -> None:  # type: ignore[no-untyped-def]
    assert paths.REQUIREMENTS_INDEX.read_text(encoding="utf-8") == render_index(requirements)


def test_area_registry_matches_readme() -> None:
    readme = (paths.SPEC_DIR / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([A-Z]+)` \|", readme, flags=re.MULTILINE)
    assert listed == list(AREAS)


def test_every_area_has_requirements(requirements) -> None:  # type: ignore[no-untyped-def]
    assert {r.area for r in requirements} == set(AREAS)


def test_both_profiles_and_best_effort_are_covered(requirements) -> None:  # type: ignore[no-untyped-def]
    for profile in PROFILES:
        assert any(profile in r.profiles for r in requirements), profile
    assert {r.kind for r in requirements} <= set(KINDS)


def test_required_topics_are_covered() -> None:
    """The topics the foundation issue lists each have a section that defines requirements."""
    text = paths.SPEC_FILE.read_text(encoding="utf-8")
    for topic in (
        "Profiles",
        "Assignment",
        "Key filters",
        "Ordering",
        "Draining",
        "Flow control",
        "Acknowledgements",
        "Negative acks",
        "Poison policies",
        "Consumers leaving",
        "Resolutions",
        "The cursor",
        "Isolation",
        "Observability",
        "Buckets and segments",
        "best-effort variant",
        "Liveness",
        "Configuration",
        "Where we differ",
    ):
        assert re.search(rf"^## \d+ .*{re.escape(topic)}", text, flags=re.MULTILINE | re.IGNORECASE), topic


def _write_spec(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "key-shared.md"
    path.write_text("## 1 Section\n\n" + block, encoding="utf-8")
    return path


GOOD_BLOCK = """<a id="KS-ORD-1"></a>
#### KS-ORD-1: Title
**Level:** MUST · **Profiles:** strict · **Kind:** safety · **Since:** 1.0

The dispatcher MUST do the thing.

*Rationale (non-normative):* because.
"""


def test_parser_accepts_a_good_block(tmp_path: Path) -> None:
    (req,) = parse_spec(_write_spec(tmp_path, GOOD_BLOCK))
    assert (req.id, req.level, req.keyword, req.profiles) == ("KS-ORD-1", "MUST", "MUST", ("strict",))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("MUST do the thing", "MUST do the thing and MUST NOT stop"), "text"),
        (("MUST do the thing", "does the thing"), "text"),
        (("**Level:** MUST", "**Level:** SHOULD"), "level"),
        (("because.", "because it MUST."), "rationale"),
        (("**Profiles:** strict", "**Profiles:** lenient"), "profiles"),
        (("**Kind:** safety", "**Kind:** vibes"), "kind"),
        (('<a id="KS-ORD-1"></a>', '<a id="KS-ORD-2"></a>'), "anchor"),
        (("KS-ORD-1: Title", "KS-" + "ZZZ-1: Title"), "id"),
        (("*Rationale (non-normative):* because.", ""), "rationale"),
    ],
)
def test_parser_rejects_a_bad_block_naming_line_and_field(tmp_path: Path, change: tuple[str, str], field: str) -> None:
    block = GOOD_BLOCK.replace(*change)
    if change[0].startswith("KS-ORD-1: Title"):
        block = block.replace('<a id="KS-ORD-1"></a>', '<a id="KS-' + 'ZZZ-1"></a>')
    with pytest.raises(UserError, match=rf"^key-shared\.md:\d+: field '{field}'"):
        parse_spec(_write_spec(tmp_path, block))


def test_citation_scanner_finds_undefined_ids(tmp_path: Path, requirements) -> None:  # type: ignore[no-untyped-def]
    undefined = "KS-ORD-" + "999"  # built here so that this file does not itself cite it
    (tmp_path / "a.py").write_text(f"# req: KS-ORD-1\nx = '{undefined.replace('-', '_')}_Whatever'\n", encoding="utf-8")
    cited = find_citations(tmp_path)
    assert set(cited) == {"KS-ORD-1", undefined}
    problems = check_citations(requirements, tmp_path)
    assert problems == [f"a.py:2: cites {undefined}, which the spec does not define"]


def test_retired_ids_cannot_be_reused(tmp_path: Path, requirements) -> None:  # type: ignore[no-untyped-def]
    retired_file = tmp_path / "retired.txt"
    retired_file.write_text("# comment\nKS-ORD-1\t1.1\tsplit into two\n", encoding="utf-8")
    problems = check_ids(requirements, read_retired(retired_file))
    assert len(problems) == 1 and "KS-ORD-1 is retired" in problems[0]


def test_the_package_version_is_the_front_matter_version() -> None:
    """SPEC_VERSION (written into requirements.json and every scenario) follows the spec's front matter and title."""
    text = paths.SPEC_FILE.read_text(encoding="utf-8")
    front = re.search(r'^spec_version: "([^"]+)"$', text, re.MULTILINE)
    title = re.search(r"^# Key-Shared dispatch, version (\S+)$", text, re.MULTILINE)
    assert front is not None and title is not None
    assert front.group(1) == title.group(1) == SPEC_VERSION
