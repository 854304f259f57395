"""The anomaly catalogue in code equals the tables of spec/checking.md, and names only real requirements."""

from __future__ import annotations

import re

from ks_conformance.catalogue import CATALOGUE, INDIRECT, Stage, checks_of
from ks_spec import paths
from ks_spec.requirements import parse_spec

SECTION_STAGE = {"2.1": Stage.EVENT, "2.2": Stage.OP, "2.3": Stage.QUIESCENT, "2.4": Stage.HARNESS}


def _tables() -> list[tuple[str, str, Stage]]:
    """(anomaly, requirement, stage) for every row of the anomaly tables of checking.md."""
    rows: list[tuple[str, str, Stage]] = []
    stage: Stage | None = None
    for line in (paths.SPEC_DIR / "checking.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^### (2\.\d) ", line)
        if heading:
            stage = SECTION_STAGE.get(heading.group(1))
            continue
        if line.startswith("## "):
            stage = None
        row = re.match(r"^\| `([a-z-]+)` \| (KS-[A-Z]+-\d+) \|", line)
        if row and stage is not None:
            rows.append((row.group(1), row.group(2), stage))
    return rows


def test_catalogue_matches_checking_md_row_for_row() -> None:
    assert [(k.name, k.requirement, k.stage) for k in CATALOGUE] == _tables()


def test_every_anomaly_names_a_requirement_of_the_spec() -> None:
    levels = {r.id: r.level for r in parse_spec()}
    for kind in CATALOGUE:
        assert levels.get(kind.requirement) in ("MUST", "SHOULD"), kind


def test_indirect_requirements_are_those_of_section_3_and_have_no_check_of_their_own() -> None:
    text = (paths.SPEC_DIR / "checking.md").read_text(encoding="utf-8").split("## 3 ")[1].split("## 4 ")[0]
    listed: set[str] = set()
    for cell in re.findall(r"^\| (KS-[^|]+) \|", text, flags=re.MULTILINE):
        ids = re.findall(r"KS-[A-Z]+-\d+", cell)
        if " to " in cell:
            area = ids[0].rsplit("-", 1)[0]
            first, last = (int(i.rsplit("-", 1)[1]) for i in ids)
            ids = [f"{area}-{n}" for n in range(first, last + 1)]
        listed.update(ids)
    assert set(INDIRECT) == listed
    for requirement in INDIRECT:
        assert checks_of(requirement) == ()


def test_every_must_requirement_is_checked_or_explained() -> None:
    """No requirement silently untested: each MUST has a check or a section-3 reason."""
    for req in parse_spec():
        if req.level == "MUST":
            assert checks_of(req.id) or req.id in INDIRECT, req.id


def test_every_trace_anomaly_has_its_explanation_in_catalogue_order() -> None:
    """ks_conformance.explain words each kind a trace shows (one function per kind, or per situation of it)."""
    import inspect

    from ks_conformance import explain

    kinds = [k.name.replace("-", "_") for k in CATALOGUE if k.stage is not Stage.HARNESS]
    found: list[str] = []
    for name, function in sorted(
        inspect.getmembers(explain, inspect.isfunction), key=lambda item: item[1].__code__.co_firstlineno
    ):
        kind = next((k for k in kinds if name == k or name.startswith(k + "_")), None)
        if kind is not None and function.__module__ == explain.__name__ and kind not in found:
            found.append(kind)
    missing = [kind for kind in kinds if kind not in found]
    assert not missing, f"kinds without a function in ks_conformance.explain: {missing}"
    assert found == kinds, "the functions of ks_conformance.explain are not in catalogue order"
