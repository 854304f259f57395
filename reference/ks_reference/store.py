"""The durable store (spec section 14): the log, the persisted cursor and ack holes, the bucket layout.

Everything a restart resumes from lives here and nowhere else. `SqliteStore` is the default:
embedded, one atomic transaction per write, WAL journal so that a killed process loses nothing
it committed. `MemoryStore` keeps the same data in memory (it outlives a `restart` of the
dispatcher object, like a store process would) for fast tests and benchmarks.
"""

from __future__ import annotations

import json
import sqlite3
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_spec.errors import UserError
from pyroaring import BitMap64

STORE_FORMAT = 2
"""2 since spec 1.5: a segment records a second predecessor (a merge), a log entry its batch."""


@dataclass(frozen=True)
class LogEntry:
    """One published message: its key and, with the buckets selector, its placement."""

    key: str
    hash: int | None = None
    segment: int | None = None
    bucket: int | None = None
    entry: int | None = None
    """The first offset of the batch it was published in (`publish_entry`), else None."""
    deliver_at: int | None = None
    """A delayed message's due tick (`publish_delayed`, KS-ORD-5), else None."""


@dataclass(frozen=True)
class SegmentRecord:
    """A segment of the bucket layout as the store keeps it (spec section 17)."""

    number: int
    range_lo: int
    range_hi: int
    buckets: int
    predecessor: int | None
    sealed: bool
    second_predecessor: int | None = None
    """A merged segment's upper predecessor."""


@dataclass
class Snapshot:
    """What a (re)started dispatcher loads: the durable state and nothing else."""

    log: list[LogEntry] = field(default_factory=list)
    cursor: int = 0
    holes: BitMap64 = field(default_factory=BitMap64)
    persisted_at: int | None = None
    clock: int = 0
    segments: list[SegmentRecord] = field(default_factory=list)
    checkpoints: dict[tuple[int, int], int] = field(default_factory=dict)


class Store(ABC):
    """The durable store's interface; every method is one atomic write or read."""

    bytes_persisted: int = 0
    """Bytes of cursor and hole data written so far (for the benchmark)."""

    @abstractmethod
    def load(self) -> Snapshot:
        """Read everything a restart needs."""

    @abstractmethod
    def append(self, offset: int, entry: LogEntry) -> None:
        """Append a published message to the log (publishing is appending, spec section 1)."""

    @abstractmethod
    def persist_cursor(self, position: int, chunks: dict[int, bytes | None], tick: int) -> None:
        """Atomically record the cursor, rewrite the changed hole chunks (None: delete) and drop chunks below it."""

    @abstractmethod
    def save_segments(self, segments: list[SegmentRecord]) -> None:
        """Record the bucket layout (a restart loads it in segment-number order, whatever order it was saved in)."""

    @abstractmethod
    def save_checkpoints(self, checkpoints: dict[tuple[int, int], int]) -> None:
        """Record per-(segment, bucket) checkpoints (KS-BKT-6)."""

    @abstractmethod
    def record_clock(self, now: int) -> None:
        """Record logical time, so that a new process resumes it (time goes on across restarts)."""

    def close(self) -> None:  # noqa: B027 (a store without resources has nothing to release)
        """Release the store's resources (a no-op for the memory store)."""

    def reopen(self) -> None:  # noqa: B027
        """Drop any connection state and open the store afresh, as a new process would (a no-op in memory)."""


def decode_holes(chunks: list[bytes]) -> BitMap64:
    """The union of the persisted hole chunks."""
    holes = BitMap64()
    for blob in chunks:
        holes |= BitMap64.deserialize(blob)
    return holes


class MemoryStore(Store):
    """The store kept in memory: same semantics as SQLite, gone with the Python process."""

    def __init__(self) -> None:
        self._log: list[LogEntry] = []
        self._cursor = 0
        self._chunks: dict[int, bytes] = {}
        self._persisted_at: int | None = None
        self._clock = 0
        self._segments: list[SegmentRecord] = []
        self._checkpoints: dict[tuple[int, int], int] = {}
        self.bytes_persisted = 0

    def load(self) -> Snapshot:
        return Snapshot(
            log=list(self._log),
            cursor=self._cursor,
            holes=decode_holes([self._chunks[c] for c in sorted(self._chunks)]),
            persisted_at=self._persisted_at,
            clock=self._clock,
            segments=sorted(self._segments, key=lambda segment: segment.number),  # as SQLite returns them
            checkpoints=dict(self._checkpoints),
        )

    def append(self, offset: int, entry: LogEntry) -> None:
        if offset != len(self._log):
            raise AssertionError(f"log append out of order: {offset} after {len(self._log)} entries")
        self._log.append(entry)

    def persist_cursor(self, position: int, chunks: dict[int, bytes | None], tick: int) -> None:
        floor = position >> 16
        for number in [c for c in self._chunks if c < floor]:
            del self._chunks[number]
        for number, blob in chunks.items():
            if blob is None:
                self._chunks.pop(number, None)
            else:
                self._chunks[number] = blob
                self.bytes_persisted += len(blob)
        self._cursor = position
        self._persisted_at = tick
        self.bytes_persisted += 16

    def save_segments(self, segments: list[SegmentRecord]) -> None:
        self._segments = list(segments)

    def save_checkpoints(self, checkpoints: dict[tuple[int, int], int]) -> None:
        self._checkpoints.update(checkpoints)

    def record_clock(self, now: int) -> None:
        self._clock = now


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log (
    offset INTEGER PRIMARY KEY, key TEXT NOT NULL, hash INTEGER, segment INTEGER, bucket INTEGER, entry INTEGER);
CREATE TABLE IF NOT EXISTS cursor (
    id INTEGER PRIMARY KEY CHECK (id = 1), position INTEGER NOT NULL, persisted_at INTEGER);
CREATE TABLE IF NOT EXISTS holes (chunk INTEGER PRIMARY KEY, bits BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    number INTEGER PRIMARY KEY, range_lo INTEGER NOT NULL, range_hi INTEGER NOT NULL,
    buckets INTEGER NOT NULL, predecessor INTEGER, sealed INTEGER NOT NULL, second_predecessor INTEGER);
CREATE TABLE IF NOT EXISTS delays (offset INTEGER PRIMARY KEY, deliver_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    segment INTEGER NOT NULL, bucket INTEGER NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (segment, bucket));
"""


class SqliteStore(Store):
    """The default durable store: one SQLite file, one transaction per write.

    `synchronous="NORMAL"` (the default) with the WAL journal survives a killed process, which
    is what a dispatcher crash is; `"FULL"` also survives a power cut, at the price of an fsync
    per write.
    """

    def __init__(self, path: Path | str, config: dict[str, Any] | None = None, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        if synchronous not in ("OFF", "NORMAL", "FULL"):
            raise UserError(f"store: synchronous must be OFF, NORMAL or FULL, got {synchronous!r}")
        self.synchronous = synchronous
        self._db = self._connect()
        self.bytes_persisted = 0
        self._check_meta(config)

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            db.executescript(SCHEMA)
        except sqlite3.DatabaseError as error:
            raise UserError(f"{self.path}: not a usable keyshared store ({error})") from None
        return db

    def reopen(self) -> None:
        self._db.close()
        self._db = self._connect()

    def _check_meta(self, config: dict[str, Any] | None) -> None:
        rows = dict(self._db.execute("SELECT name, value FROM meta").fetchall())
        if not rows:
            with self._transaction():
                self._db.execute("INSERT INTO meta VALUES ('format', ?)", (str(STORE_FORMAT),))
                self._db.execute("INSERT INTO meta VALUES ('clock', '0')")
                if config is not None:
                    self._db.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(config, sort_keys=True),))
            return
        if rows.get("format") != str(STORE_FORMAT):
            raise UserError(f"{self.path}: store format {rows.get('format')!r}, this version reads {STORE_FORMAT}")
        if config is not None and "config" in rows:
            stored = json.loads(rows["config"])
            for name in sorted(set(stored) | set(config)):
                if stored.get(name) != config.get(name):
                    raise UserError(
                        f"{self.path}: config field '{name}' is {config.get(name)!r} but the store was created "
                        f"with {stored.get(name)!r}"
                    )

    def _transaction(self) -> sqlite3.Connection:
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def load(self) -> Snapshot:
        snapshot = Snapshot()
        # A delayed message's due tick lives in a table of its own, so stores written before 1.7 read unchanged.
        snapshot.log = [
            LogEntry(key, hash_, segment, bucket, entry, deliver_at)
            for key, hash_, segment, bucket, entry, deliver_at in self._db.execute(
                "SELECT key, hash, segment, bucket, entry, deliver_at FROM log LEFT JOIN delays USING (offset) "
                "ORDER BY offset"
            )
        ]
        row = self._db.execute("SELECT position, persisted_at FROM cursor WHERE id = 1").fetchone()
        if row is not None:
            snapshot.cursor, snapshot.persisted_at = row
        snapshot.holes = decode_holes([blob for (blob,) in self._db.execute("SELECT bits FROM holes ORDER BY chunk")])
        clock = self._db.execute("SELECT value FROM meta WHERE name = 'clock'").fetchone()
        snapshot.clock = int(clock[0]) if clock else 0
        snapshot.segments = [
            SegmentRecord(number, lo, hi, buckets, predecessor, bool(sealed), second)
            for number, lo, hi, buckets, predecessor, sealed, second in self._db.execute(
                "SELECT number, range_lo, range_hi, buckets, predecessor, sealed, second_predecessor FROM segments "
                "ORDER BY number"
            )
        ]
        snapshot.checkpoints = {
            (segment, bucket): position
            for segment, bucket, position in self._db.execute("SELECT segment, bucket, position FROM checkpoints")
        }
        return snapshot

    def append(self, offset: int, entry: LogEntry) -> None:
        with self._transaction():
            self._db.execute(
                "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
                (offset, entry.key, entry.hash, entry.segment, entry.bucket, entry.entry),
            )
            if entry.deliver_at is not None:
                self._db.execute("INSERT INTO delays VALUES (?, ?)", (offset, entry.deliver_at))

    def persist_cursor(self, position: int, chunks: dict[int, bytes | None], tick: int) -> None:
        with self._transaction():
            self._db.execute("DELETE FROM holes WHERE chunk < ?", (position >> 16,))
            for number, blob in chunks.items():
                if blob is None:
                    self._db.execute("DELETE FROM holes WHERE chunk = ?", (number,))
                else:
                    self._db.execute("INSERT OR REPLACE INTO holes VALUES (?, ?)", (number, blob))
                    self.bytes_persisted += len(blob)
            self._db.execute("INSERT OR REPLACE INTO cursor VALUES (1, ?, ?)", (position, tick))
            self.bytes_persisted += 16

    def save_segments(self, segments: list[SegmentRecord]) -> None:
        with self._transaction():
            self._db.execute("DELETE FROM segments")
            self._db.executemany(
                "INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (s.number, s.range_lo, s.range_hi, s.buckets, s.predecessor, int(s.sealed), s.second_predecessor)
                    for s in segments
                ],
            )

    def save_checkpoints(self, checkpoints: dict[tuple[int, int], int]) -> None:
        with self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)",
                [(segment, bucket, position) for (segment, bucket), position in checkpoints.items()],
            )

    def record_clock(self, now: int) -> None:
        with self._transaction():
            self._db.execute("UPDATE meta SET value = ? WHERE name = 'clock'", (str(now),))

    def close(self) -> None:
        self._db.close()
