"""The facts that span keys, for judging a trace in shards of keys: the subscription's ledger.

A shard judges its keys' events only, but some rules read what every key contributes to: how many deliveries a
consumer holds (KS-FLW-1), which offsets are unresolved (the window, KS-FLW-2, and the cursor, KS-CUR-1), how many
messages were published. A quick pass over a few columns of each shard's rows (`ledger_changes`, in the shard's worker)
predicts, event by event, that shard's changes to those facts; each shard applies the other shards' predicted changes
as it goes (shard.py). The pass is a prediction, not a second checker: every shard logs the changes its own checker
really made (`delta_log` of checks/state.py) and the judgment stands only if each shard's log equals its prediction.
As every change belongs to one key, the shards together prove every change, so each shard read exactly the facts the
whole-trace checker reads; when a prediction fails, the caller judges the trace in one process.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS

from ks_conformance.checks.state import DANUBE_PHASE_3, DELIVERED, DELIVERY_ENDED, PUBLISHED, RESOLVED, SHOWN

Change = tuple[int, int, int, str | None]
"""(seq, what, offset, consumer): `what` is PUBLISHED, DELIVERED, DELIVERY_ENDED or RESOLVED (checks/state.py)."""

RESOLVING = frozenset({"ack", "drop", "dead_letter", "filter"})
"""Effects that resolve their message (and end its delivery), as `resolve` in rules/resolutions.py does."""
UNSHARDED_KINDS = {
    "restart": "a restart (it rebuilds every key's state at once)",
    "seek": "a seek (it moves every key's messages at once)",
    "outcome": "an implementation-defined outcome",
    "bucket_assigned": "selector buckets",
    "bucket_withheld": "selector buckets",
    "segment_created": "selector buckets",
    "segment_sealed": "selector buckets",
    "checkpoint": "selector buckets",
}
"""Event kinds a trace is not yet judged in shards with, and why (the caller judges it in one process)."""
NON_MEMBER = "a delivery to a consumer that is not a member"
"""Not judged in shards yet: the checker keeps such a consumer's deliveries apart from a member's of the same name."""
SPECIAL_PUBLISH = "a delayed message or a batch (publish_delayed, publish_entry)"


def unsharded_config(config: Mapping[str, Any]) -> str | None:
    """Why a configuration is not yet judged in shards (its rules read facts the ledger does not keep), or None."""
    full = {**CONFIG_DEFAULTS, **config}
    reasons = (
        (full["profile"] == "best-effort", "the best-effort profile"),
        (full["selector"] == "buckets", "selector buckets"),
        (int(full.get("park_after") or 0) > 0, "park_after"),
    )
    return next((why for unsupported, why in reasons if unsupported), None)


Row = tuple[str, int, int | None, str | None, bool]
"""(event kind, seq, offset, consumer, delayed or batched) of one trace row: what the ledger pass reads."""


def rows_of(events: Iterable[Mapping[str, Any]]) -> Iterator[Row]:
    """The ledger pass's columns of event dicts."""
    for event in events:
        offset, consumer = event.get("offset"), event.get("consumer")
        special = event.get("deliver_at") is not None or event.get("entry") is not None
        yield str(event["event"]), int(event["seq"]), None if offset is None else int(offset), consumer, special


@dataclass
class Prediction:
    """The ledger pass's result: every change, in order, or why the trace is not judged in shards."""

    changes: list[Change]
    reason: str | None = None


def ledger_changes(rows: Iterable[Row], config_detail: str | None) -> Prediction:
    """Predict, row by row, the changes a whole-trace checker makes to the facts that span keys.

    The prediction follows the checker's transitions for a well-formed trace of a configuration `unsharded_config`
    accepts; where it is wrong (a malformed or unusual trace) the shards' proof fails and the trace is judged whole.
    """
    try:
        config = json.loads(config_detail or "")["config"]
    except (ValueError, KeyError, TypeError):
        return Prediction([], "the config event cannot be read")
    why = unsharded_config(config) if isinstance(config, dict) else "the config event cannot be read"
    if why:
        return Prediction([], why)
    heartbeat = {**CONFIG_DEFAULTS, **config}["read_trigger"] == "heartbeat"
    # Written for speed (one pass over a shard's rows): the ledger's state in local names, the common kinds first.
    holder_of: dict[int, str] = {}
    held: dict[str, dict[int, int]] = {}
    unresolved: set[int] = set()
    changes: list[Change] = []
    add = changes.append
    members: set[str] = set()
    for kind, seq, offset, consumer, special in rows:
        if special:
            return Prediction([], SPECIAL_PUBLISH)
        if offset is None:
            if kind in UNSHARDED_KINDS:
                return Prediction([], UNSHARDED_KINDS[kind])
            if kind == "consumer_added":
                members.add(str(consumer))
            elif kind == "consumer_removed" or kind == "consumer_evicted":
                members.discard(str(consumer))
                for ended in list(held.pop(str(consumer), {})):
                    add((seq, DELIVERY_ENDED, ended, str(consumer)))
                    del holder_of[ended]
            continue
        if kind == "publish":
            add((seq, PUBLISHED, offset, None))
            unresolved.add(offset)
            continue
        if kind == "deliver":
            if consumer not in members:
                return Prediction([], f"{NON_MEMBER} ({consumer!r}, seq {seq})")
            holder = holder_of.get(offset)
            if holder is not None:
                add((seq, DELIVERY_ENDED, offset, holder))
                del held[holder][offset]
            add((seq, DELIVERED, offset, consumer))
            holder_of[offset] = consumer
            mine = held.get(consumer)
            if mine is None:
                mine = held[consumer] = {}
            mine[offset] = seq
            continue
        if kind in UNSHARDED_KINDS:
            return Prediction([], UNSHARDED_KINDS[kind])
        if heartbeat and kind in DANUBE_PHASE_3:
            add((seq, SHOWN, offset, None))  # (before its resolution: the checker reads it first, KS-GEN-8)
        resolving = kind in RESOLVING
        if resolving or kind == "nack" or kind == "timeout":
            holder = holder_of.get(offset)
            if holder is not None and (kind != "timeout" or holder == consumer):
                add((seq, DELIVERY_ENDED, offset, holder))
                del holder_of[offset]
                del held[holder][offset]
            if resolving and offset in unresolved:
                add((seq, RESOLVED, offset, None))
                unresolved.discard(offset)
    return Prediction(changes)
