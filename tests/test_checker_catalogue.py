"""The rule registry (ks_conformance.rules) is what spec/checking.md's tables say, cell by cell, and names only real
requirements; each rule lives in the module of its requirement's spec section."""

from __future__ import annotations

import re

from ks_conformance.rules import INDIRECT, RULES, Stage, rules_of
from ks_conformance.rules.tables import render, row
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
    """Each stage's table lists that stage's rules in registry order (spec section, then module order)."""
    stages = list(SECTION_STAGE.values())
    in_tables = sorted(RULES, key=lambda rule: stages.index(rule.stage))
    assert [(k.name, k.requirement, k.stage) for k in in_tables] == _tables()


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (an escaped `\\|` stays inside its cell)."""
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\) \| ", line.strip()[2:-2])]


def test_every_cell_of_checking_md_is_the_registry_s() -> None:
    """The tables are generated from the registry (`keyshared spec index`); a hand edit of either shows here."""
    document = {
        match.group(1): _cells(line)
        for line in (paths.SPEC_DIR / "checking.md").read_text(encoding="utf-8").splitlines()
        if (match := re.match(r"^\| `([a-z-]+)` \|", line))
    }
    columns = ("anomaly", "requirement", "scope", "condition", "witness", "exercised")
    for rule in RULES:
        wanted = _cells(row(rule))
        found = document.get(rule.name)
        assert found is not None, f"{rule.name}: no row in spec/checking.md"
        for column, (have, want) in enumerate(zip(found, wanted, strict=True)):
            assert have == want, f"{rule.name}, column {columns[column]}: checking.md says {have!r}, the rule {want!r}"


def test_rendering_the_tables_leaves_checking_md_unchanged() -> None:
    document = (paths.SPEC_DIR / "checking.md").read_text(encoding="utf-8")
    assert render(document) == document, "run `keyshared spec index`"


def test_rendering_replaces_a_stale_row() -> None:
    """The renderer really rewrites the tables (so the freshness test above can fail)."""
    document = (paths.SPEC_DIR / "checking.md").read_text(encoding="utf-8")
    stale = document.replace("| `key-reorder` | KS-ORD-1 | key |", "| `key-reorder` | KS-ORD-2 | key |")
    assert stale != document
    assert render(stale) == document


def test_each_rule_lives_in_the_module_of_its_requirement_s_section() -> None:
    """rules/ordering.py holds the rules of section 6, ...: a requirement's rules are found beside its section."""
    sections = {r.id: r.section for r in parse_spec()}
    modules: dict[str, set[str]] = {}
    for rule in RULES:
        modules.setdefault(rule.module, set()).add(sections[rule.requirement])
    assert all(len(found) == 1 for found in modules.values()), modules


def test_every_anomaly_names_a_requirement_of_the_spec() -> None:
    levels = {r.id: r.level for r in parse_spec()}
    for kind in RULES:
        assert levels.get(kind.requirement) in ("MUST", "SHOULD"), kind
        assert kind.level == levels[kind.requirement], kind


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
        assert rules_of(requirement) == ()


def test_every_must_requirement_is_checked_or_explained() -> None:
    """No requirement silently untested: each MUST has a check or a section-3 reason."""
    for req in parse_spec():
        if req.level == "MUST":
            assert rules_of(req.id) or req.id in INDIRECT, req.id


def test_every_trace_rule_has_its_explanation_beside_it() -> None:
    """Each rule a trace can show is worded by a function of its own module (one per kind, or per situation of it),
    which both the Python checker and the Spark validator call."""
    import importlib
    import inspect

    missing = []
    for rule in RULES:
        if rule.stage is Stage.HARNESS:
            continue
        module = importlib.import_module(f"ks_conformance.rules.{rule.module}")
        kind = rule.name.replace("-", "_")
        functions = [
            name for name, f in inspect.getmembers(module, inspect.isfunction) if f.__module__ == module.__name__
        ]
        if not any(f == kind or f.startswith(kind + "_") for f in functions):
            missing.append(rule.name)
    assert not missing, f"rules without an explanation function in their module: {missing}"
