"""Mutation testing of the TLA+ models: each plausible bug of models/mutants.json must be rejected.

The default suite checks the mutant manifest without TLC (every requirement-named property of a quick
configuration has two mutants, none edits its own property's guard) and runs the runner on a tiny
configuration (a killed mutant, a surviving one, the CLI on one mutant); the whole set runs in the
slow tier and in `keyshared verify`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from keyshared.cli import main
from ks_models import MODELS_DIR
from ks_models.coverage import requirement_of
from ks_models.manifest import entries, load_manifest
from ks_models.mutants import (
    Mutant,
    load_mutants,
    mutants_per_property,
    run_mutant,
    run_mutants,
    score_text,
    single_property_config,
)
from ks_models.tlc import cfg_lists, find_jar
from ks_spec.errors import UserError

RANK = "Rank(c) == Cardinality({d \\in members : d < c})"


def _tools() -> tuple[Path, Path]:
    java = shutil.which("java")
    if java is None:
        pytest.skip("Java 17+ is not installed: TLC cannot run")
    return Path(java), find_jar()


def test_every_property_of_a_quick_check_has_two_mutants() -> None:
    models, _ = entries(load_manifest())
    wanted = set()
    for model in models:
        if model.kind == "check":
            names = cfg_lists(model.config, ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"))
            wanted |= {f"{model.module}.{name}" for name in names if requirement_of(name)}
    counts = mutants_per_property(load_mutants())
    assert wanted, "no property found: the check would be vacuous"
    assert {name: counts.get(name, 0) for name in wanted if counts.get(name, 0) < 2} == {}
    assert set(counts) <= wanted  # no mutant is aimed at a property no quick check lists


def test_a_mutant_of_its_own_properties_guard_is_refused(tmp_path: Path) -> None:
    # The KS-ORD-3 rule of DeliverBlockers carries `\* req: KS-ORD-3`: editing it is the shipped broken variant's
    # edit, which KS_ORD_3 restates; a mutant that does so must be refused, the same edit aimed at KS_ORD_1 is fine.
    guard = '\\/ r = "KS-ORD-3" /\\ Bug # "ReplayOutOfOrder"'
    mutant = {"module": "KeySharedOrdering", "find": guard, "replace": '\\/ r = "KS-ORD-3" /\\ FALSE'}
    mutant |= {"config": "MCKeySharedOrderingOwner", "bug": "the rule is dropped"}
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps({"mutants": [dict(mutant, id="own", property="KS_ORD_3_RedeliveryFirst")]}))
    with pytest.raises(UserError, match="own guard"):
        load_mutants(path)
    path.write_text(json.dumps({"mutants": [dict(mutant, id="other", property="KS_ORD_1_FirstDeliveryOrder")]}))
    assert [m.id for m in load_mutants(path)] == ["other"]


def test_a_mutant_whose_text_is_not_in_the_module_is_refused(tmp_path: Path) -> None:
    mutant = {"id": "x", "module": "BucketHandoff", "find": "no such text", "replace": "y"}
    mutant |= {"config": "MCBucketHandoffRollover", "property": "KS_BKT_2_BucketCountFixed", "bug": "b"}
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps({"mutants": [mutant]}))
    with pytest.raises(UserError, match="occurs 0 times"):
        load_mutants(path)


def test_the_mutant_config_checks_one_property() -> None:
    text = single_property_config(MODELS_DIR / "MCBucketHandoffRollover.cfg", "KS_ORD_3_RedeliveryFirst")
    assert text.rstrip().endswith("PROPERTY KS_ORD_3_RedeliveryFirst")
    assert "KS_BKT_2_BucketCountFixed" not in text and "TypeOK" not in text and "HashHi <- TwoKeysHi" in text


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the models with a tiny BucketHandoff configuration: two members, one entry, one rollover."""
    folder = tmp_path_factory.mktemp("models")
    for module in MODELS_DIR.glob("*.tla"):
        shutil.copy(module, folder / module.name)
    config = (MODELS_DIR / "MCBucketHandoffRollover.cfg").read_text(encoding="utf-8")
    config = config.replace("MaxMsgs = 3", "MaxMsgs = 1").replace("MaxFailures = 1", "MaxFailures = 0")
    config = config.replace("MaxMemberChanges = 1", "MaxMemberChanges = 0").replace(
        "InitialMembers = {1}", "InitialMembers = {1, 2}"
    )
    (folder / "MCBucketHandoffTiny.cfg").write_text(config, encoding="utf-8")
    return folder


@pytest.mark.tlc
def test_the_runner_tells_a_killed_mutant_from_a_survivor(tiny: Path) -> None:
    java, jar = _tools()
    common = {"module": "BucketHandoff", "find": RANK, "config": "MCBucketHandoffTiny"}
    common |= {"prop": "KS_BKT_3_DeliverToBucketOwner", "bug": "b"}
    reversed_rank = Mutant(id="reversed", replace=RANK.replace("d < c", "d > c"), **common)
    same_rank = Mutant(
        id="same", replace=RANK.replace("d < c", "c > d"), **common
    )  # the same ranking, spelled otherwise
    killed = run_mutant(reversed_rank, java, jar, timeout=120, models_dir=tiny)
    survived = run_mutant(same_rank, java, jar, timeout=120, models_dir=tiny)
    assert killed.killed and killed.outcome is not None and killed.outcome.violated == "KS_BKT_3_DeliverToBucketOwner"
    assert not survived.killed and survived.status == "survived"
    assert score_text([killed, survived]) == "mutation score: 1/2 (50%)"


@pytest.mark.tlc
def test_model_check_mutants_prints_the_score(capsys: pytest.CaptureFixture[str]) -> None:
    _tools()
    assert main(["model-check", "--mutants", "bkt3-rank-reversed"]) == 0
    assert "mutation score: 1/1 (100%)" in capsys.readouterr().out


def test_an_unknown_mutant_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model-check", "--mutants", "no-such-mutant"]) != 0
    err = capsys.readouterr().err
    assert "no-such-mutant" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.tlc
def test_every_mutant_is_rejected_by_its_property() -> None:
    java, jar = _tools()
    results = run_mutants(load_mutants(), java, jar, jobs=2, timeout=300)
    assert [f"{r.mutant.id}: {r.problem}" for r in results if not r.killed] == []
    assert score_text(results).endswith("(100%)")


@pytest.mark.tlc
def test_the_verify_step_reports_the_score(monkeypatch: pytest.MonkeyPatch) -> None:
    _tools()
    import argparse

    import ks_models.mutants as mutants_module
    from keyshared.steps_models import steps

    one = [m for m in load_mutants() if m.id == "bkt3-rank-reversed"]
    monkeypatch.setattr(mutants_module, "load_mutants", lambda: one)
    step = next(s for s in steps() if s.name == "model mutants")
    result = step.run(argparse.Namespace())
    assert result.ok and "mutation score: 1/1 (100%)" in result.summary
