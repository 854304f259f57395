"""Test ordering for the parallel default suite: the longest files start first.

`make test` runs two pytest-xdist workers, each taking whole files (`--dist loadfile`, so module fixtures such
as the mutant sample and the TLC quick tier run once). xdist would queue files by their number of tests, which
puts the few-test, minutes-long files last and leaves one worker idle at the end; `--no-loadscope-reorder` keeps
the collection order, and this hook puts the files measured longest (`--durations`, 2026-11-27) first.
"""

from __future__ import annotations

import pytest

LONGEST_FIRST = (
    "test_conformance_kit.py",
    "test_conformance_mutants.py",
    "test_models.py",
    "test_spark_differential.py",
    "test_spark_dispatcher.py",
    "test_spark_catalogue.py",
    "test_edge_inputs.py",
    "test_spark_walreplay.py",
    "test_witness_shapes.py",
    "test_spark_stream.py",
    "test_spark_partial.py",
    "test_spark_validator.py",
    "test_examples.py",
    "test_rabbitmq_adapter.py",
)
"""Test files by measured duration, longest first; every other file follows in collection order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest files first (a stable sort: the order inside a file is untouched)."""
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
