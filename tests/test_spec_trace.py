"""`keyshared spec trace KS-ID`: each link of the chain is what its source declares, found here independently."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from keyshared import traceability
from keyshared.cli import main
from ks_conformance.rules import INDIRECT, RULES
from ks_spec.requirements import parse_spec

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = [r.id for r in parse_spec()]


def req_comment_lines(requirement: str) -> set[tuple[str, int]]:
    """Lines of the reference whose `# req:` comment names the requirement, by a plain text search."""
    found = set()
    for path in (ROOT / "reference" / "ks_reference").rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "# req:" in line and re.search(re.escape(requirement) + r"(?![0-9])", line.split("# req:", 1)[1]):
                found.add((str(path.relative_to(ROOT)), number))
    return found


def test_reference_branches_are_exactly_the_req_comments_naming_it() -> None:
    seen = 0
    for requirement in REQUIREMENTS:
        traced = {(place.path, place.line) for place in traceability.reference_branches(requirement)}
        assert traced == req_comment_lines(requirement), requirement
        seen += len(traced)
    assert seen > 0


def test_a_known_branch_is_in_the_printed_chain(capsys: pytest.CaptureFixture[str]) -> None:
    path, line = sorted(req_comment_lines("KS-FLT-4"))[0]
    assert main(["spec", "trace", "KS-FLT-4"]) == 0
    assert f"{path}:{line}" in capsys.readouterr().out


@pytest.mark.parametrize("requirement", ["KS-ORD-1", "KS-DRN-1", "KS-CUR-1", "KS-BKT-5"])
def test_model_properties_are_the_definitions_named_after_it(requirement: str) -> None:
    prefix = requirement.replace("-", "_") + "_"
    expected = set()
    for tla in (ROOT / "models").glob("*.tla"):
        for number, line in enumerate(tla.read_text(encoding="utf-8").splitlines(), start=1):
            if line.startswith(prefix) and "==" in line:
                expected.add((tla.stem, line.split("==")[0].strip(), number))
    chain = traceability.trace(requirement)
    assert {(p.module, p.name, p.place.line) for p in chain.properties} == expected
    assert expected
    for prop in chain.properties:
        for conf in prop.configurations:
            cfg = (ROOT / "models" / f"{conf.config}.cfg").read_text(encoding="utf-8")
            assert re.search(rf"\b{prop.name}\b", cfg), f"{conf.config} does not list {prop.name}"


def test_a_broken_variant_is_shown_failing_on_its_property() -> None:
    manifest = json.loads((ROOT / "models" / "manifest.json").read_text(encoding="utf-8"))
    broken = [
        (Path(model["config"]).stem, model["property"])
        for module in manifest["modules"]
        for model in module["models"]
        if model["kind"] == "broken" and model["property"].startswith("KS_DRN_1_")
    ]
    assert broken
    chain = traceability.trace("KS-DRN-1")
    shown = {(c.config, p.name) for p in chain.properties for c in p.configurations if "broken variant" in c.expect}
    assert set(broken) <= shown


def test_model_mutants_are_those_of_its_properties() -> None:
    mutants = json.loads((ROOT / "models" / "mutants.json").read_text(encoding="utf-8"))["mutants"]
    for requirement in ("KS-ORD-1", "KS-CUR-1", "KS-ASN-1"):
        expected = {m["id"] for m in mutants if m["property"].startswith(requirement.replace("-", "_") + "_")}
        assert {m.id for m in traceability.trace(requirement).model_mutants} == expected


def test_checker_kinds_are_the_catalogue_rows_and_indirect_says_why() -> None:
    for requirement in ("KS-ORD-1", "KS-CUR-5", "KS-ORD-4", "KS-ASN-4"):
        chain = traceability.trace(requirement)
        assert [c.name for c in chain.checks] == [k.name for k in RULES if k.requirement == requirement]
        assert chain.indirect == INDIRECT.get(requirement, "")
    assert traceability.trace("KS-ORD-4").indirect


def test_each_checker_rule_names_the_functions_that_report_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: a rule's check lives in its rule's module; `spec trace` shows where each kind is reported."""
    chain = traceability.trace("KS-FLW-1")
    (capacity,) = [c for c in chain.checks if c.name == "capacity-overrun"]
    assert any(
        site.startswith("conformance/ks_conformance/rules/flow.py:") and site.endswith(" check_capacity")
        for site in capacity.reported_at
    )
    unreported = [rule.name for rule in RULES if not traceability.report_sites().get(rule.name)]
    assert not unreported  # every registered rule is reported somewhere in the kit, by its name
    assert main(["spec", "trace", "KS-FLW-1"]) == 0
    assert "reported at conformance/ks_conformance/rules/flow.py:" in capsys.readouterr().out


def test_conformance_mutants_follow_their_declared_must_and_may_sets() -> None:
    from conformance_mutants import BY_NAME

    for requirement in ("KS-DRN-1", "KS-CUR-1", "KS-OBS-1", "KS-ISO-1"):
        expected = set()
        for mutant in BY_NAME.values():
            if requirement in mutant.catches:
                expected.add((mutant.name, "must fail"))
            elif requirement in mutant.warns:
                expected.add((mutant.name, "must warn"))
            elif requirement in mutant.may:
                expected.add((mutant.name, "may fail"))
        assert expected
        assert {(m.name, m.role) for m in traceability.trace(requirement).mutants} == expected


def test_batch_mutants_read_without_spark_match_their_declarations() -> None:
    pytest.importorskip("pyspark")
    from spark_support.dispatcher_mutants import BATCH_MUTANTS

    for requirement in sorted({r for m in BATCH_MUTANTS for r in m.catches | m.may}):
        expected = {(m.name, "must fail") for m in BATCH_MUTANTS if requirement in m.catches} | {
            (m.name, "may fail") for m in BATCH_MUTANTS if requirement in m.may and requirement not in m.catches
        }
        assert {(m.name, m.role) for m in traceability.batch_mutants(requirement)} == expected, requirement


def test_vectors_none_yet_without_the_folder_and_listed_by_target_with_it(tmp_path: Path) -> None:
    assert traceability.vectors("KS-ORD-1", tmp_path / "absent") is None
    chain = traceability.trace("KS-ORD-1")
    chain.vectors = None
    assert "none yet" in traceability.render(chain)
    folder = tmp_path / "vectors" / "KS-ORD-1"
    folder.mkdir(parents=True)
    note = {"targets": ["KS-ORD-1"], "kinds": ["key-reorder"], "caught": [{"mutant": "newest_first"}]}
    header = {"scenario_version": 1, "covers": ["KS-ORD-1"], "vector": note}
    (folder / "newest_first.vector.jsonl").write_text(json.dumps(header) + "\n", encoding="utf-8")
    (folder / "newest_first.pass.trace.jsonl").write_text(json.dumps({"seq": 0}) + "\n", encoding="utf-8")
    other = {**header, "vector": {**note, "targets": ["KS-FLW-3"]}}
    (folder / "held.vector.jsonl").write_text(json.dumps(other) + "\n", encoding="utf-8")
    found = traceability.vectors("KS-ORD-1", tmp_path / "vectors")
    assert found is not None
    assert [(Path(v.path).name, v.kinds, v.caught) for v in found] == [
        ("newest_first.vector.jsonl", ("key-reorder",), ("newest_first",))
    ]
    assert traceability.vectors("KS-ORD-2", tmp_path / "vectors") == []


def test_the_shipped_vectors_of_a_requirement_are_those_targeting_it() -> None:
    folder = ROOT / "spec" / "vectors"
    if not folder.is_dir():
        pytest.skip("spec/vectors/ does not exist yet")
    for requirement in ("KS-ORD-1", "KS-DRN-1", "KS-CUR-5"):
        expected = {
            str(path.relative_to(ROOT))
            for path in folder.rglob("*.vector.jsonl")
            if requirement in json.loads(path.read_text(encoding="utf-8").splitlines()[0])["vector"]["targets"]
        }
        found = traceability.vectors(requirement)
        assert found is not None
        assert {v.path for v in found} == expected


def test_json_output_carries_the_spec_text(capsys: pytest.CaptureFixture[str]) -> None:
    spec = {r.id: r for r in parse_spec()}
    assert main(["spec", "trace", "ks_ord_2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requirement"]["id"] == "KS-ORD-2"
    assert data["requirement"]["text"] == spec["KS-ORD-2"].text
    assert data["requirement"]["level"] == spec["KS-ORD-2"].level
    assert {(p["path"], p["line"]) for p in data["reference"]} == req_comment_lines("KS-ORD-2")


UNDEFINED = "-".join(("KS", "ORD", "999"))
"""A well-formed ID the spec does not define (built, so that `spec check` does not read it as a citation)."""


@pytest.mark.parametrize("argument", [UNDEFINED, "KS-ORDER-1", "order"])
def test_an_unknown_id_is_one_line_and_a_usage_error(argument: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "trace", argument]) == 64
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
