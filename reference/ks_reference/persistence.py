"""The cursor's persistence and restart (spec section 14), and the bucket checkpoints (KS-BKT-6)."""

from __future__ import annotations

from collections import Counter

from ks_reference.core import Core
from ks_reference.cursor import CHUNK_BITS, Cursor


class Persistence(Core):
    """When the cursor is due for persistence, writing it (with the holes) to the store, and restart."""

    def persistence_due(self, in_tick_phase_6: bool, tick: bool = False) -> bool:
        """True when section 14 says the cursor must be persisted now (KS-CUR-5)."""
        if not self.config.reliable:
            return False
        # With checkpoint_resume any resolution may move a checkpoint, which is durable too (KS-BKT-9).
        if not self.cursor_changed() and not (self.config.checkpoint_resume and self.cursor.changed):
            return False
        interval = self.config.persist_interval
        if self.config.persist_trigger == "advance":
            return self._advance_persistence_due(in_tick_phase_6, tick)
        if interval == 0:
            return True  # req: KS-CUR-5, KS-LIV-2 (0: at the end of every operation that changed it)
        # req: KS-CUR-5 (debounced: in phase 6, at least `persist_interval` ticks after the last persistence)
        return in_tick_phase_6 and (self.persisted_at is None or self.now - self.persisted_at >= interval)

    def _advance_persistence_due(self, in_tick_phase_6: bool, tick: bool) -> bool:
        """Danube's and Pulsar's debounce (KS-CUR-12): a write when the cursor moves and the interval has passed since
        the last one, otherwise at the next such move or, with `persist_flush`, at the next flush tick."""
        flush = self.config.persist_flush
        if flush and self.now % flush == 0 and tick:
            self.flush_owed = True  # the periodic flush of this tick (fired here, or at the next timed phase 6)
        if flush and in_tick_phase_6 and self.flush_owed:
            return True  # req: KS-CUR-12 (the flush writes what the debounce held back)
        moved = self.cursor.position != self.position_at_begin
        elapsed = self.persisted_at is None or self.now - self.persisted_at >= self.config.persist_interval
        return moved and elapsed  # req: KS-CUR-12 (written on the move, once the interval has passed)

    def cursor_changed(self) -> bool:
        """True when the cursor (or, with `persist_ack_holes`, a hole) changed since the last persistence."""
        return self.cursor.position != self.persisted_position or (
            self.config.persist_ack_holes and self.cursor.changed
        )

    def persist(self) -> None:
        """Write the cursor, and with `persist_ack_holes` every changed hole chunk, in one transaction; then the
        checkpoints that moved."""
        position = self.cursor.position
        if self.cursor_changed():
            dirty = self.cursor.take_dirty_chunks()
            chunks: dict[int, bytes | None] = {}
            ranges = None
            if self.config.persist_ack_holes:
                for number in sorted(dirty):
                    bits = self.cursor.chunk(number)
                    chunks[number] = bits.serialize() if bits else None
                ranges = self.cursor.ranges()  # req: KS-CUR-6 (every hole, no cap)
            # req: KS-CUR-1, KS-CUR-2 (the cursor is the contiguous resolved prefix; it only grows)
            self.store.persist_cursor(position, chunks, self.now)
            self.persisted_position = position
            self.persisted_at = self.now
            self.flush_owed = False
            self.emit("cursor_persisted", cursor=position, ranges=ranges)
        else:
            # Only checkpoints moved (checkpoint_resume): the cursor's record, and its debounce clock, stand.
            self.cursor.changed = False
        if self.layout is not None:
            holes = self.cursor.holes if self.config.persist_ack_holes else None

            def durably_resolved(offset: int) -> bool:
                return offset < position or (holes is not None and offset in holes)

            # With checkpoint_resume a checkpoint is itself durable (KS-BKT-9): it follows every resolution of
            # its bucket, past a hole of another bucket. Without it, it only mirrors the persisted cursor and holes.
            resolved = self.cursor.is_resolved if self.config.checkpoint_resume else durably_resolved
            changed = self.layout.advance_checkpoints(resolved)
            if changed:
                self.store.save_checkpoints(changed)
                for (segment, bucket), checkpoint in sorted(changed.items()):
                    # req: KS-BKT-6
                    self.emit("checkpoint", segment=segment, bucket=bucket, cursor=checkpoint)

    def persist_if_due(self, in_tick_phase_6: bool, tick: bool = False) -> None:
        """Phase 6 of a tick (`tick`; `in_tick_phase_6` when its timers run), or the end of any other operation."""
        if self.persistence_due(in_tick_phase_6, tick):
            self.persist()

    def on_restart(self) -> None:
        """Crash and restart: drop all volatile state and resume from the store (KS-CUR-3, KS-CUR-4)."""
        # req: KS-CUR-3
        self.store.reopen()
        self.load_from_store()

    def on_seek(self, target: int) -> None:
        """Move the cursor to `target`: every delivery ends, the members stay, and what is at or after `target` is
        read again while what is below it counts as resolved (`seeked`); the new cursor is persisted at once."""
        for member in self.members.values():
            # req: KS-CUR-8 (every outstanding delivery ends with the seek; the members stay, with their permits)
            member.outstanding.clear()
            member.unacked_blocked = False
        # req: KS-CUR-8 (retries, blocks, holds and draining are forgotten with the read messages: every key starts
        # a new epoch with nothing outstanding)
        self.messages = {}
        self.queues = {}
        self.pending_counts = Counter()
        self.retrying = set()
        self.delayed = set()  # a delayed message is read again from the log, into the tracker if still not due
        self.key_holders = {}
        self.blocked = {}
        self.holds = {}
        # req: KS-ACK-3 (a zombie op names a delivery made since the last restart or seek)
        self.delivery_holders = {}
        old_chunks = {offset >> CHUNK_BITS for offset in self.cursor.holes}
        # req: KS-CUR-9, KS-CUR-10 (below the target: resolved as `seeked`; at or after it: unresolved, read again)
        self.cursor = Cursor(target)
        self.read_position = target
        # req: KS-CUR-10 (the seek is durable when the op returns, whatever `persist_interval` says)
        chunks: dict[int, bytes | None] = dict.fromkeys(old_chunks) if self.config.persist_ack_holes else {}
        self.store.persist_cursor(target, chunks, self.now)
        self.persisted_position = target
        self.persisted_at = self.now
        self.flush_owed = False  # req: KS-CUR-12 (the seek's write is the flush's too)
        self.emit("cursor_persisted", cursor=target, ranges=[] if self.config.persist_ack_holes else None)
