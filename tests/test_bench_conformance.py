"""The conformance benchmark's mutant selection: what `--mutants` and `--quick` run (no timing asserted)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from conformance_mutants import MUTANTS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """benchmarks.bench_conformance, imported from the repository root (benchmarks/ is not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.bench_conformance as module

    return module


def test_unknown_mutant_is_refused_by_name(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"unknown mutant\(s\): no_such_mutant; known mutants: newest_first"):
        bench.select_mutants("newest_first,no_such_mutant")


def test_selection_keeps_the_catalogue_order_and_quick_names_real_mutants(bench: ModuleType) -> None:
    assert bench.select_mutants(" no_draining ,newest_first") == ["newest_first", "no_draining"]
    assert bench.select_mutants(None) == [m.name for m in MUTANTS]
    assert set(bench.select_mutants(None, quick=True)) == set(bench.QUICK_MUTANTS)
    assert all(bench.targets_of(name) for name in bench.select_mutants(None))
