"""Judging a trace in shards of keys, and merging the shards' findings into the whole trace's judgment.

`judge_in_shards` routes a trace's events (run.py decides, for a Parquet file, column by column; this module's
`route_events` does the same for events in memory), predicts the ledger (facts.py), judges each shard
(shard.py), and merges: the anomalies of all shards (one finding of the whole subscription, made by several
shards alike, once), the exercised counts (its own keys' situations added up, the subscription's counted once per
place), after proving that every shard made exactly the predicted changes to the facts that span keys. When
something cannot be judged in shards, it says why (`Unsharded`) and the caller judges the trace in one process.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import mmh3
from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.slots import SLOT_SELECTORS, slot_of
from ks_spec.trace import OP_EVENTS
from pyroaring import BitMap

from ks_conformance.anomalies import Anomaly, listing_order
from ks_conformance.checker import Event
from ks_conformance.checks.state import ACK_CLASS, DANUBE_PHASE_3, phase_of
from ks_conformance.sharding.facts import UNPUBLISHED_ANSWER, Change, ledger_changes, rows_of
from ks_conformance.sharding.shard import FIRST_SHARD_KINDS, Op, ShardJudgment, judge_shard

ZOMBIE_OPS = frozenset({"zombie_ack", "zombie_nack"})
"""Ops whose first ack-class effect belongs to them rather than opening an op of its own (KS-ACK-3)."""


@dataclass(frozen=True)
class Unsharded:
    """Why a trace was not judged in shards: the caller judges it in one process."""

    reason: str


@dataclass
class Judgment:
    """The whole trace's judgment, merged from its shards."""

    anomalies: list[Anomaly]
    exercised: dict[str, int]
    shards: int


anomaly_order = listing_order


def shard_of_key(config: dict[str, object], shards: int) -> Callable[[str], int]:
    """The shard of a routing key: by its hash slot when slot mates must be judged together (KS-DRN-3)."""
    selector = str(config.get("selector", CONFIG_DEFAULTS["selector"]))
    if config.get("drain_granularity", CONFIG_DEFAULTS["drain_granularity"]) == "hash" and selector in SLOT_SELECTORS:
        slot = slot_of.__wrapped__  # (its cache would grow with every key of a long trace)
        return lambda key: int(slot(selector, key)) % shards
    return lambda key: mmh3.hash(key.encode("utf-8"), 0, signed=False) % shards


@dataclass
class Routed:
    """A trace in memory split into shards: each shard's rows with their op's index, every op, each offset's shard."""

    rows: list[list[tuple[Event, int, bool]]]
    """Per shard: (event, its op's index, whether it is another shard's event shown for its tick phase only)."""
    ops: list[Op]
    shard_of_offset: list[int]


def route_events(events: Sequence[Event], shards: int, config: dict[str, object]) -> Routed | Unsharded:
    """Route events in memory: a row naming a key (or a published offset) to its key's shard, any other to all;
    rows shown to every shard (merge.phase_boundaries; with selector buckets, every publish) too."""
    by_key = shard_of_key(config, shards)
    rows: list[list[tuple[Event, int, bool]]] = [[] for _ in range(shards)]
    ops: list[Op] = []
    shard_of_offset: list[int] = []
    key_of_offset: list[str] = []
    zombie_pending = False
    shown = phase_boundaries(events)
    buckets = {**CONFIG_DEFAULTS, **config}["selector"] == "buckets"
    for position, event in enumerate(events):
        kind, seq = str(event["event"]), int(event["seq"])
        if kind in ACK_CLASS and zombie_pending:
            zombie_pending = False
        elif kind in OP_EVENTS or kind in ACK_CLASS:
            ops.append(Op(kind, seq, seq))
            zombie_pending = kind in ZOMBIE_OPS
        if not ops:
            return Unsharded(f"seq {seq}: an event before the first op")
        ops[-1] = ops[-1]._replace(end=seq)
        key, offset = event.get("key"), event.get("offset")
        if kind == "publish":
            if offset != len(key_of_offset):
                return Unsharded(f"seq {seq}: publish of offset {offset}, expected {len(key_of_offset)}")
            shard = by_key(str(key))
            shard_of_offset.append(shard)
            key_of_offset.append(str(key))
        elif offset is not None and kind != "seek":
            if not 0 <= int(offset) < len(shard_of_offset):
                if kind in ("ack_ignored", "nack_ignored"):
                    return Unsharded(f"{UNPUBLISHED_ANSWER} (seq {seq}, offset {offset})")
                return Unsharded(f"seq {seq}: {kind} names offset {offset}, which was not published")
            if key is not None and key != key_of_offset[int(offset)]:
                return Unsharded(f"seq {seq}: {kind} of offset {offset} names another key than its own")
            shard = shard_of_offset[int(offset)]
        elif key is not None:
            shard = by_key(str(key))
        else:
            shard = -1
        if shard < 0:
            for mine in rows:
                mine.append((event, len(ops), False))
        else:
            shown_here = position in shown or (buckets and kind == "publish")  # (run.py `shown_rows`)
            for other, mine in enumerate(rows):
                if other == shard or shown_here:
                    mine.append((event, len(ops), other != shard))
    return Routed(rows, ops, shard_of_offset)


def phase_boundaries(events: Sequence[Event]) -> set[int]:
    """The positions of the events every shard must see for the phases of a tick (KS-GEN-7): within each tick, the
    first and last event of each run of events of one phase (and one kind of deliver step, for `tick_order =
    danube`), so that each shard's checker goes through a tick's phases, and their boundaries, as the whole does."""
    shown: set[int] = set()
    run: list[int] = []
    previous: tuple[int, bool] | None = None
    for position, event in enumerate(events):
        kind = str(event["event"])
        if kind in OP_EVENTS or kind in ACK_CLASS:
            shown.update(run[:1] + run[-1:])
            run, previous = [], None
            continue
        phase = phase_of(event)
        if phase is None:
            continue
        mark = (phase, kind in DANUBE_PHASE_3)
        if mark != previous:
            shown.update(run[:1] + run[-1:])
            run, previous = [], mark
        run.append(position)
    shown.update(run[:1] + run[-1:])
    return shown


def judge_in_shards(
    events: Sequence[Event],
    shards: int,
    judge: Callable[[list[ShardWork]], list[ShardJudgment]] | None = None,
) -> Judgment | Unsharded:
    """Judge a whole trace in `shards` shards of keys (`judge` runs the shards: in this process by default)."""
    if not events or events[0].get("event") != "config":
        return Unsharded("the trace does not begin with its config event")
    detail = events[0].get("detail")
    prediction = ledger_changes(rows_of(events), None if detail is None else str(detail))
    if prediction.reason is not None:
        return Unsharded(prediction.reason)
    config = json.loads(str(detail))["config"]
    routed = route_events(events, shards, config)
    if isinstance(routed, Unsharded):
        return routed
    own: list[list[Change]] = [[] for _ in range(shards)]
    foreign: list[list[Change]] = [[] for _ in range(shards)]
    for change in prediction.changes:
        home = routed.shard_of_offset[change[2]]
        for shard in range(shards):
            (own if shard == home else foreign)[shard].append(change)
    work: list[ShardWork] = [(routed.rows[s], routed.ops, foreign[s], own[s], s == 0) for s in range(shards)]
    return merge((judge or _judge_here)(work))


ShardWork = tuple[Sequence[tuple[Event, int, bool]], list[Op], list[Change], list[Change], bool]
"""What one shard is given: its rows, every op, the other shards' predicted changes and its own, and whether it is
the first."""


def _judge_here(work: list[ShardWork]) -> list[ShardJudgment]:
    return [judge_shard(*shard) for shard in work]


def merge(judgments: Sequence[ShardJudgment]) -> Judgment | Unsharded:
    """The whole trace's judgment from its shards', once each shard is shown to have made the predicted changes."""
    for judgment in judgments:
        if judgment.unsharded is not None:  # (first: a shard that found one may have judged the rest amiss)
            return Unsharded(judgment.unsharded)
    for shard, judgment in enumerate(judgments):
        if judgment.problems:
            problem = judgment.problems[0]
            return Unsharded(f"shard {shard}: {problem.message} (seq {problem.seq})")
        if judgment.mispredicted is not None:
            return Unsharded(f"the facts that span keys were mispredicted (shard {shard}, seq {judgment.mispredicted})")
    found: dict[tuple[object, ...], tuple[int, Anomaly]] = {}
    for shard, judgment in enumerate(judgments):
        counts: Counter[tuple[object, ...]] = Counter()
        for anomaly in judgment.anomalies:
            if anomaly.name in FIRST_SHARD_KINDS and shard > 0:
                continue
            order = anomaly_order(anomaly)
            counts[order] += 1
            seen = found.get(order)
            if seen is None or seen[0] < counts[order]:
                found[order] = (counts[order], anomaly)
    anomalies = [anomaly for order in sorted(found) for anomaly in [found[order][1]] * found[order][0]]
    exercised: Counter[str] = Counter()
    for shard, judgment in enumerate(judgments):
        for name, count in judgment.exercised.items():
            if name in FIRST_SHARD_KINDS and shard > 0:
                continue
            exercised[name] += count
    points: dict[tuple[str, bool], BitMap] = {}
    counted: dict[tuple[str, bool, int], int] = {}
    for shard, judgment in enumerate(judgments):
        for (name, at_end), places in judgment.shared_points.items():
            if not (name in FIRST_SHARD_KINDS and shard > 0):
                points[name, at_end] = points.get((name, at_end), BitMap()) | places
        for place, count in judgment.shared_counts.items():
            if not (place[0] in FIRST_SHARD_KINDS and shard > 0):
                counted[place] = max(counted.get(place, 0), count)
    for (name, _), places in points.items():
        exercised[name] += len(places)
    for (name, _, _), count in counted.items():
        exercised[name] += count
    return Judgment(anomalies, dict(exercised), len(judgments))


__all__ = ["Judgment", "Unsharded", "anomaly_order", "judge_in_shards", "merge", "route_events"]
