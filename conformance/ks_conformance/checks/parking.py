"""Parked messages (spec section 15, KS-ISO-4): with `park_after` P set, a message is parked while it is unresolved,
not outstanding and behind P earlier unresolved messages of its key; the read bound and the window leave it out.

One implementation for the two that keep it: the trace checker (checks/state.py) and, when a trace is judged in
shards of keys, the ledger that predicts each shard's changes (sharding/facts.py). Parking is per key, but the count
of parked offsets below an offset spans keys, so with a log every real change to the parked set is logged (PARKED,
UNPARKED) as a change to the facts that span keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyroaring import BitMap

from ks_conformance.checks.changes import PARKED, UNPARKED, ChangeLog


class Parking:
    """The parked offsets and, per key, its unresolved offsets ranked to tell which are parked."""

    def __init__(self, after: int = 0, log: ChangeLog | None = None) -> None:
        self.after = after
        """P: 0 when nothing is ever parked."""
        self.parked = BitMap()
        self.by_key: dict[str, BitMap] = {}
        self.log = log
        """When judging a shard: where each change to `parked` is logged (the checker's `delta_log`)."""

    def park(self, offset: int, seq: int) -> None:
        """`offset` is parked from `seq` on."""
        if offset not in self.parked:
            self.parked.add(offset)
            if self.log is not None:
                self.log.append((seq, PARKED, offset, None))

    def unpark(self, offset: int, seq: int) -> None:
        """`offset` is no longer parked from `seq` on."""
        if offset in self.parked:
            self.parked.discard(offset)
            if self.log is not None:
                self.log.append((seq, UNPARKED, offset, None))

    def published(self, key: str, offset: int, seq: int) -> None:
        """A new message is parked when P earlier messages of its key are unresolved."""
        offsets = self.by_key.get(key)
        if offsets is None:
            offsets = self.by_key[key] = BitMap()
        if len(offsets) >= self.after:
            self.park(offset, seq)
        offsets.add(offset)

    def delivered(self, offset: int, seq: int) -> None:
        """An outstanding message is never parked."""
        if self.parked:
            self.unpark(offset, seq)

    def ended(self, key: str, offset: int, seq: int) -> None:
        """A message no longer outstanding (returned, or about to be resolved) is parked if it is behind."""
        offsets = self.by_key.get(key)
        if offsets is not None and offset in offsets and offsets.rank(offset) > self.after:
            self.park(offset, seq)

    def resolved(self, key: str, offset: int, seq: int) -> None:
        """A resolved message leaves its key's offsets; if it was among the first P, the (P+1)-th moves up, unparked."""
        self.unpark(offset, seq)
        offsets = self.by_key.get(key)
        if offsets is None or offset not in offsets:
            return
        ahead = offsets.rank(offset) <= self.after
        offsets.discard(offset)
        if ahead and len(offsets) >= self.after:
            self.unpark(offsets[self.after - 1], seq)
        if not offsets:
            del self.by_key[key]

    def rebuild(self, unresolved: Mapping[str, Sequence[int]], seq: int) -> None:
        """After a restart or seek, when nothing is outstanding: each key's unresolved offsets (ascending), those
        behind the first P parked."""
        self.by_key = {key: BitMap(offsets) for key, offsets in unresolved.items()}
        parked = BitMap()
        for offsets in unresolved.values():
            parked.update(offsets[self.after :])
        if self.log is not None:
            for offset in self.parked - parked:
                self.log.append((seq, UNPARKED, offset, None))
            for offset in parked - self.parked:
                self.log.append((seq, PARKED, offset, None))
        self.parked = parked

    def below(self, offset: int) -> int:
        """How many parked offsets are below `offset`."""
        return self.parked.rank(offset - 1) if offset > 0 else 0
