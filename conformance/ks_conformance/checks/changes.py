"""The changes a checker makes to the facts that span keys (spec/checking.md section 1): when a trace is judged in
shards of keys, each shard logs its own (`CheckerState.delta_log`) and applies the others' (sharding/facts.py)."""

from __future__ import annotations

from typing import Protocol

PUBLISHED, DELIVERED, DELIVERY_ENDED, RESOLVED, SHOWN, REOPENED, SEEKED, DELAYED, PARKED, UNPARKED = range(10)
"""What a change's second field says (SHOWN: under `read_trigger = "heartbeat"`, a `held` or `filter` showed its
message read, KS-GEN-8; REOPENED: a restart or seek made a resolved message unresolved again; SEEKED: a seek resolved an
unresolved message before its target; DELAYED: a delayed message was published, after which every key's order and idle
checks look for delays, KS-ORD-6; PARKED, UNPARKED: with `park_after` set, an offset became parked or stopped being
parked, KS-ISO-4)."""
PHANTOM = "\x00"
"""Before a consumer's name in a logged change: a consumer that was not a member when it got the delivery, whose
deliveries the checker keeps apart from a member's of the same name."""


class ChangeLog(Protocol):
    """Where changes are logged as (seq, what, offset, consumer): a list will do."""

    def append(self, change: tuple[int, int, int, str | None], /) -> None:
        """Log one change."""
