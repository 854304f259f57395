"""The seed-faithful presets (issue 15): the reference configured as each seed design describes it.

The kit must call each faithful preset conformant, and must report exactly the weakness a preset reproduces
on purpose (Danube's at-most-once eviction). The full `ci` runs are slow; the default suite checks what each
preset declares and runs the one preset whose finding must show.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ks_conformance.protocol import Capabilities, InProcessConnection
from ks_conformance.results import settings_for
from ks_conformance.search import configs
from ks_conformance.suite import run_suite
from ks_reference import presets
from ks_reference.presets import PRESETS, Preset
from ks_spec.config import config_problem


def _adapter(name: str) -> Any:
    return getattr(presets, name.replace("-", "_"))()


def _capabilities(name: str) -> Capabilities:
    connection = InProcessConnection(_adapter(name), name)
    try:
        return connection.start().capabilities
    finally:
        connection.close()


@pytest.mark.parametrize("name", sorted(PRESETS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_kit_draws_only_the_presets_configuration(name: str, data: st.DataObject) -> None:
    """Every configuration the kit draws for a preset is one the spec accepts and uses the preset's values."""
    preset = PRESETS[name]
    config = data.draw(configs(_capabilities(name)))
    assert config_problem(config) is None
    assert (config["profile"], config["selector"]) == (preset.profile, preset.selector)
    for field, allowed in preset.config_values.items():
        assert config.get(field, allowed[0]) in allowed, field


def _run(name: str, **overrides: Any) -> tuple[str, set[str], Preset]:
    result = run_suite(lambda: InProcessConnection(_adapter(name), name), settings_for("ci", 0, **overrides))
    assert not result.faults
    failed = {line["id"] for line in result.requirements if line["status"] == "failed"}
    return result.verdict, failed, PRESETS[name]


def test_danubes_at_most_once_eviction_is_found_as_documented() -> None:
    # req: KS-CUR-1, KS-MEM-1 (the weakness Danube's architecture page admits, reproduced on purpose)
    # 100 examples: seed 0 finds KS-CUR-1 within 40; the rest of a larger budget only shrinks its consequences
    verdict, failed, preset = _run("danube-at-most-once", rounds=1, coverage_rounds=0, examples_total=100)
    assert verdict == "not-conformant"
    assert set(preset.expected) <= failed <= set(preset.expected) | set(preset.consequences)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_gets_the_verdict_its_seed_calls_for(name: str) -> None:
    """A whole `ci` run: conformant for behaviour the seed describes as correct, the documented findings else."""
    verdict, failed, preset = _run(name)
    if preset.expected:
        assert set(preset.expected) <= failed <= set(preset.expected) | set(preset.consequences)
    else:
        assert (verdict, failed) == ("conformant", set())
