"""The adapter schema and the kit read one protocol: what the kit accepts in `start`, the schema accepts too.

A schema narrower than the kit made `conformance smoke` (which validates every message) refuse the
reference's own `start`, because its `config_values` declare option fields the schema did not list.
"""

from __future__ import annotations

import json

import pytest
from ks_conformance.adapters import connect
from ks_conformance.protocol import ADAPTER_SCHEMA, CONFIG_FIELDS
from ks_conformance.smoke import smoke


def _config_value_names() -> list[str]:
    schema = json.loads(ADAPTER_SCHEMA.read_text(encoding="utf-8"))
    found: list[list[str]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "config_values" in node and isinstance(node["config_values"], dict):
                found.append(node["config_values"]["propertyNames"]["enum"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert len(found) == 1, "the schema should define capabilities.config_values once"
    return found[0]


def test_the_schema_lists_exactly_the_configuration_fields_the_kit_reads() -> None:
    assert sorted(_config_value_names()) == sorted(CONFIG_FIELDS)


@pytest.mark.parametrize(
    "adapter",
    [
        "reference",
        "py:ks_reference.presets:pulsar_379",
        "py:ks_reference.presets:danube",
        "py:ks_reference.presets:pip_486",
        "py:ks_reference.presets:classic_pulsar",
    ],
)
def test_smoke_validates_the_reference_and_its_presets(adapter: str) -> None:
    """Smoke validates every message against the schema: the reference's own declarations must pass it."""
    result = smoke(connect(adapter, validate=True))
    assert result.ok, (result.fault, result.anomalies)
