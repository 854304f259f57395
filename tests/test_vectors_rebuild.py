"""CONTRIBUTING's step 6 rebuilds the corpus (`tests/vectors_generate.py build --reuse-corpus`): with no new search,
the rebuild must rewrite nothing, so that a contributor's rebuild changes only what their change changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import vectors_generate
from conformance_mutants import MUTANTS
from ks_conformance.vectors import VECTORS_DIR


def test_a_rebuild_from_the_checked_in_corpus_rewrites_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors_generate, "CACHE", tmp_path / "no-search")  # (a developer's saved searches ignored)
    monkeypatch.setattr(vectors_generate, "REUSE_CORPUS", True)
    monkeypatch.setattr(vectors_generate, "CHECKED_IN", [])
    out = tmp_path / "vectors"
    out.mkdir()
    vectors_generate.build(out, [m.name for m in MUTANTS])
    checked_in = {p.relative_to(VECTORS_DIR) for p in VECTORS_DIR.rglob("*") if p.is_file()}
    rebuilt = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    assert rebuilt == checked_in - {Path("vector-v1.schema.json")}
    changed = sorted(str(p) for p in rebuilt if (out / p).read_bytes() != (VECTORS_DIR / p).read_bytes())
    assert not changed, f"the rebuild rewrote {len(changed)} files, first {changed[:5]}"
