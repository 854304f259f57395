"""The durable store: atomic, chunked ack holes without a cap, config pinned, restart equals a new process."""

from __future__ import annotations

from pathlib import Path

import pytest
from ks_reference.cursor import Cursor, hole_ranges
from ks_reference.dispatcher import Dispatcher
from ks_reference.store import LogEntry, MemoryStore, SqliteStore
from ks_spec.errors import UserError
from pyroaring import BitMap64


def _persist(cursor: Cursor, store: SqliteStore | MemoryStore, tick: int = 0) -> None:
    chunks: dict[int, bytes | None] = {}
    for number in cursor.take_dirty_chunks():
        bits = cursor.chunk(number)
        chunks[number] = bits.serialize() if bits else None
    store.persist_cursor(cursor.position, chunks, tick)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_holes_round_trip_through_chunks(tmp_path: Path, kind: str) -> None:
    store = SqliteStore(tmp_path / "s.sqlite") if kind == "sqlite" else MemoryStore()
    cursor = Cursor()
    resolved = [1, 2, 70_000, 70_002, 200_000, 5_000_000_000]  # spans chunks, beyond 32 bits
    for offset in resolved:
        cursor.resolve(offset)
    _persist(cursor, store)
    assert list(store.load().holes) == resolved and store.load().cursor == 0
    cursor.resolve(0)  # the cursor jumps to 3; the chunk below it is dropped
    cursor.resolve(70_001)
    _persist(cursor, store, tick=4)
    loaded = store.load()
    assert loaded.cursor == 3 and list(loaded.holes) == [70_000, 70_001, 70_002, 200_000, 5_000_000_000]
    assert loaded.persisted_at == 4
    store.close()


def test_hole_ranges_are_runs() -> None:
    assert hole_ranges([1, 2, 3, 7, 9, 10]) == [[1, 3], [7, 7], [9, 10]]
    assert hole_ranges([]) == []


def test_a_store_refuses_another_configuration(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "s.sqlite", {"window": 8}).close()
    with pytest.raises(UserError, match="config field 'window' is 9 but the store was created with 8"):
        SqliteStore(tmp_path / "s.sqlite", {"window": 9})


def test_a_broken_store_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"this is not a database, it is a shopping list" * 100)
    with pytest.raises(UserError, match="not a usable keyshared store"):
        SqliteStore(path)


def test_a_failed_write_leaves_the_store_unchanged(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite")
    store.append(0, LogEntry("k"))
    with pytest.raises(Exception, match="UNIQUE"):
        store.append(0, LogEntry("again"))  # the transaction rolls back as a whole
    store.persist_cursor(1, {0: BitMap64([5]).serialize()}, 1)
    assert [entry.key for entry in store.load().log] == ["k"]
    store.close()


def test_a_new_process_resumes_where_the_store_is(tmp_path: Path) -> None:
    # req: KS-CUR-3: opening the store in a new dispatcher is a restart
    config = {"profile": "owner", "persist_ack_holes": True}
    store = SqliteStore(tmp_path / "s.sqlite", config)
    first = Dispatcher(config, store)
    first.add_consumer("c", 10)
    for key in "abcde":
        first.publish(key)
    for offset in (0, 2, 3):
        first.ack("c", offset)
    for _ in range(3):
        first.tick()
    store.close()
    reopened = SqliteStore(tmp_path / "s.sqlite", config)
    second = Dispatcher(config, reopened)
    assert second.now == 3 and len(second.log) == 5
    assert second.cursor.position == 1 and list(second.cursor.holes) == [2, 3]
    outcome = second.add_consumer("c", 10)
    assert [e["offset"] for e in outcome.events if e["event"] == "deliver"] == [1, 4]
    reopened.close()


@pytest.mark.slow
def test_a_million_holes_are_all_persisted(tmp_path: Path) -> None:
    # req: KS-CUR-6: no cap on the number of holes (Pulsar's default keeps 10,000 ranges)
    store = SqliteStore(tmp_path / "s.sqlite")
    cursor = Cursor()
    for offset in range(1, 2_000_001, 2):
        cursor.resolve(offset)
    _persist(cursor, store)
    loaded = store.load()
    assert len(loaded.holes) == 1_000_000 and loaded.holes.min() == 1 and loaded.holes.max() == 1_999_999
    store.close()
