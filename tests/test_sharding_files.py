"""The routing's files (ks_conformance.sharding.files): written a batch at a time and read a stretch at a time, they
give back what was written, and several shards' changes merge in the order one stable sort of them all gives."""

from __future__ import annotations

import random
from itertools import chain
from pathlib import Path

import numpy as np
from ks_conformance.sharding.facts import Change
from ks_conformance.sharding.files import ArrayFile, ChangeFiles, Changes, merged_chunks


def random_changes(rng: random.Random, count: int, seqs: list[int]) -> list[Change]:
    """Changes at ascending seqs drawn from `seqs` (runs of one seq included, as a restart makes)."""
    chosen = sorted(rng.choice(seqs) for _ in range(count))
    names = [None, "c1", "c2", "\x00c3"]
    return [(seq, rng.randrange(10), rng.randrange(1000), rng.choice(names)) for seq in chosen]


def written(folder: Path, name: str, changes: list[Change], batch: int) -> ChangeFiles:
    files = ChangeFiles(folder / name)
    for start in range(0, len(changes), batch):
        files.append(changes[start : start + batch])
    files.close()
    return ChangeFiles.open(folder / name)


def test_an_array_file_reads_back_what_was_appended(tmp_path: Path) -> None:
    column = ArrayFile(tmp_path / "column", np.int64)
    assert len(column) == 0
    column.append(np.arange(5))
    column.append(np.arange(5, 12))
    assert len(column) == 12 and column.read(3, 9).tolist() == list(range(3, 9)) and column.read(4, 4).size == 0


def test_merged_changes_are_in_the_order_of_one_stable_sort(tmp_path: Path) -> None:
    rng = random.Random(5)
    for round_number in range(40):
        shards = rng.randrange(1, 5)
        seqs = rng.sample(range(200), rng.randrange(1, 30))  # (few seqs: many changes share one, across shards too)
        parts = [random_changes(rng, rng.randrange(0, 120), seqs) for _ in range(shards)]
        folder = tmp_path / str(round_number)
        folder.mkdir()
        files = [written(folder, f"changes-{n}", part, rng.randrange(1, 50)) for n, part in enumerate(parts)]
        assert [list(chain.from_iterable(f.chunks(7))) for f in files] == parts
        expected = list(chain.from_iterable(Changes.concatenate([Changes.of(part) for part in parts]).chunks()))
        for size in (1, 3, 16, 1000):
            chunks = list(merged_chunks(files, size))
            assert list(chain.from_iterable(chunks)) == expected, (round_number, size)
            assert all(chunks)
