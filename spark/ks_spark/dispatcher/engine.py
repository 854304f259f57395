"""The Spark dispatcher's engine: what one key does, and the membership timeline that every key shares.

When capacity and the window never bind, no rule of spec sections 6 to 9 couples two keys: a key's
deliveries depend only on its own messages and acks and on the membership. So the driver reads the
control ops (joins, leaves, disconnects, ticks with their evictions, restarts) into a `Timeline`, each
key's messages then go through one `KeyEngine` in offset order inside one task (per-key order holds by
construction, not by scheduling luck), and the cursor is a running maximum over offsets. Where the
limits would bind, the dispatcher is not equivalent to the reference and says so in its capabilities
(`flow_control: false`). No Spark here: the engine and the timeline are tested without a JVM.

Long because the key engine and the timeline it reads are one model of the per-key rules (ordering, draining,
retries, poison, restarts): split, a rule would sit apart from the state it reads.
"""

from __future__ import annotations

import copy
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ks_reference.config import Config
from ks_reference.cursor import Cursor
from ks_reference.filters import accepts
from ks_reference.selectors import Selector, SelectorRefusal, make_selector

SELECTORS = ("ring", "pulsar-consistent", "pulsar-auto-split", "danube")
"""Selectors with a target per key and epoch (sticky needs declared ranges, buckets routes entries)."""
OPS = ("publish", "add_consumer", "remove_consumer", "disconnect", "ack", "tick", "restart")
PHASE_OWN, PHASE_DISPATCH, PHASE_PERSIST = 0, 5, 6
"""Where an event falls within its op: the op's own effects, the dispatch pass, persistence (KS-GEN-7)."""

Event = dict[str, Any]


class Refused(Exception):
    """An op the spec refuses (KS-GEN-4), with the protocol's code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Member:
    """One consumer incarnation (KS-GEN-3): a reused name is a new incarnation."""

    incarnation: int
    name: str
    filters: tuple[str, ...]


@dataclass
class Version:
    """The membership from the end of op `index` on (until the next version)."""

    index: int
    epoch: int
    members: tuple[Member, ...]
    """Members in join order."""
    connected: frozenset[int]
    left: tuple[int, ...] = ()
    """Incarnations that left at this op: what they held is pending again (KS-MEM-1)."""
    restart: bool = False


@dataclass
class Timeline:
    """The membership over a run, and each epoch's selector (a snapshot after the epoch's last change)."""

    versions: list[Version]
    selectors: dict[int, Selector]
    any_filters: dict[int, bool]

    def at(self, index: int) -> Version:
        """The version in force after op `index`."""
        low, high = 0, len(self.versions) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.versions[middle].index <= index:
                low = middle
            else:
                high = middle - 1
        return self.versions[low]


@dataclass
class KeyItem:
    """One input of a key: a publish, an ack aimed at one of its offsets, or a message read again at a restart."""

    index: int
    kind: str  # "reread", "publish" or "ack" (the order they sort in at one index)
    offset: int
    incarnation: int = -1
    consumer: str = ""


KIND_ORDER = {"reread": 0, "publish": 1, "ack": 2}


@dataclass
class Plan:
    """The driver's reading of a run's ops: refusals, the timeline, the per-key inputs and the global events."""

    config: Config
    responses: dict[int, dict[str, Any]]
    """Ops answered without the engine: refusals and skipped ops."""
    timeline: Timeline
    keys: list[str]
    """Per offset, its key."""
    items: list[tuple[str, KeyItem]]
    """Publishes and acks (and nothing else) as (key, item)."""
    own_events: list[tuple[int, int, Event]]
    """(index, order, event): effects that belong to no key: evictions, acks of unknown offsets."""
    restarts: list[int]
    ticks: dict[int, int]
    """Tick op index -> the new value of now."""
    published_at: list[int]
    """Per offset, the op index that published it."""
    count: int
    """How many ops."""


def plan_ops(config: Config, ops: Sequence[Mapping[str, Any]], indices: Sequence[int] | None = None) -> Plan:
    """Read a run's ops in order: decide every refusal, build the timeline, split publishes and acks by key.

    An op's index is its place in `ops`, or `indices[i]` (increasing) when given: a log replay plans only
    its control ops, each at its position among the log's publishes.
    """
    selector = make_selector(config.selector, config.points, config.bucket_budget)
    members: dict[str, Member] = {}
    connected: dict[int, bool] = {}
    disconnected_at: dict[int, int] = {}
    versions = [Version(-1, 0, (), frozenset())]
    selectors: dict[int, Selector] = {0: copy.deepcopy(selector)}
    any_filters: dict[int, bool] = {0: False}
    epoch, serial, now = 0, 0, 0
    responses: dict[int, dict[str, Any]] = {}
    keys: list[str] = []
    published_at: list[int] = []
    items: list[tuple[str, KeyItem]] = []
    own: list[tuple[int, int, Event]] = []
    restarts: list[int] = []
    ticks: dict[int, int] = {}

    def version(index: int, left: tuple[int, ...] = (), new_epoch: bool = True, restart: bool = False) -> None:
        nonlocal epoch
        if new_epoch:
            epoch += 1
            selectors[epoch] = copy.deepcopy(selector)
            any_filters[epoch] = any(m.filters for m in members.values())
        live = frozenset(m.incarnation for m in members.values() if connected[m.incarnation])
        versions.append(Version(index, epoch, tuple(members.values()), live, left, restart))

    for number, op in enumerate(ops):
        index = number if indices is None else indices[number]
        name = op.get("op")
        try:
            if name not in OPS:
                responses[index] = {
                    "skipped": True,
                    "message": f"the Spark dispatcher replays {', '.join(OPS)}; not {name!r}",
                }
                continue
            if name == "publish":
                key = _text(op.get("key"), "key")
                offset = op.get("offset", len(keys))
                if not _is_int(offset) or offset != len(keys):
                    raise Refused("invalid_argument", f"offset must be the next offset {len(keys)}, got {offset!r}")
                items.append((key, KeyItem(index, "publish", len(keys))))
                keys.append(key)
                published_at.append(index)
            elif name == "add_consumer":
                member = _check_join(op, members, selector, serial)
                serial += 1
                selector.add(member.name)
                members[member.name] = member
                connected[member.incarnation] = True
                version(index)
            elif name in ("remove_consumer", "disconnect", "ack"):
                consumer = op.get("consumer")
                if not isinstance(consumer, str) or consumer not in members:
                    raise Refused("unknown_consumer", f"no member named {consumer!r}")
                member = members[consumer]
                if name == "remove_consumer":
                    del members[consumer]
                    selector.remove(consumer)
                    version(index, left=(member.incarnation,))
                elif name == "disconnect":
                    if connected[member.incarnation]:
                        connected[member.incarnation] = False
                        disconnected_at[member.incarnation] = now
                        version(index, new_epoch=False)
                else:
                    offset = _offset(op.get("offset"))
                    if offset >= len(keys):
                        event = {"event": "ack_ignored", "offset": offset, "consumer": consumer}
                        own.append((index, 0, {**event, "reason": "unknown-offset"}))  # req: KS-ACK-2
                    else:
                        items.append((keys[offset], KeyItem(index, "ack", offset, member.incarnation, consumer)))
            elif name == "tick":
                now += 1
                ticks[index] = now
                evicted: list[int] = []
                if config.evict_after > 0:
                    for member in list(members.values()):
                        gone = disconnected_at.get(member.incarnation)
                        if not connected[member.incarnation] and gone is not None and gone + config.evict_after <= now:
                            # req: KS-MEM-2 (phase 4: evicted with the effects of leaving)
                            own.append((index, len(evicted), {"event": "consumer_evicted", "consumer": member.name}))
                            evicted.append(member.incarnation)
                            del members[member.name]
                            selector.remove(member.name)
                if evicted:
                    version(index, left=tuple(evicted))
            else:  # restart: every incarnation ends; only the store survives (spec section 14)
                restarts.append(index)
                for member_name in list(members):
                    selector.remove(member_name)
                members.clear()
                version(index, restart=True)
        except Refused as refusal:
            responses[index] = {"ok": False, "error": {"code": refusal.code, "message": refusal.message}}
    timeline = Timeline(versions, selectors, any_filters)
    return Plan(config, responses, timeline, keys, items, own, restarts, ticks, published_at, len(ops))


def _check_join(op: Mapping[str, Any], members: Mapping[str, Member], selector: Selector, serial: int) -> Member:
    """Validate a join as the reference does (KS-GEN-4); the new incarnation, or Refused."""
    name = op.get("consumer")
    if not isinstance(name, str) or not name:
        raise Refused("invalid_argument", f"consumer must be a non-empty string, got {name!r}")
    _text(name, "consumer")
    if name in members:
        raise Refused("duplicate_consumer", f"a member named {name!r} already exists")
    capacity = op.get("capacity")
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise Refused("invalid_argument", f"capacity must be an integer >= 1, got {capacity!r}")
    filters = op.get("filters") or []
    if not isinstance(filters, list) or not all(isinstance(f, str) for f in filters):
        raise Refused("invalid_argument", f"filters must be a list of strings, got {filters!r}")
    if filters and not selector.takes_filters:
        raise Refused("invalid_argument", f"selector '{selector.name}' cannot take consumers with filters")
    if op.get("ranges"):
        raise Refused("invalid_argument", f"selector '{selector.name}' takes no declared ranges")
    try:
        selector.check_add(name, [])
    except SelectorRefusal as refusal:
        raise Refused("invalid_argument", str(refusal)) from None
    return Member(serial, name, tuple(filters))


def _offset(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Refused("invalid_argument", f"offset must be a non-negative integer, got {value!r}")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise Refused("invalid_argument", f"{name} must be a string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused("invalid_argument", f"{name} is not valid Unicode (it holds a lone surrogate)") from None
    return value


# --- one key ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Message:
    offset: int
    outstanding: bool = False
    holder: int = -1
    attempts: int = 0
    held: tuple[str | None, str | None] | None = None


Emitted = tuple[int, int, int, int, Event]
"""(op index, phase, group, sub, event): sorting by the first four gives the reference's order within an op."""


@dataclass
class KeyEngine:
    """One key's messages through one era (between restarts): routing, draining, acks, holds.

    `run` takes the key's items in (index, kind, offset) order and yields every effect with the
    reference's rules, in the reference's order within an op: the op's own effect first, then the
    dispatch pass, where keys go by their first candidate offset (the `group`).
    """

    key: str
    profile: str
    timeline: Timeline
    end: int
    """The era's end (exclusive): versions at or after it belong to the next era."""
    messages: dict[int, _Message] = field(default_factory=dict)
    """Unresolved messages; insertion order is offset order (publishes and rereads come in offset order)."""
    holders: Counter[int] = field(default_factory=Counter)
    """Outstanding deliveries per incarnation (KS-DRN-1)."""
    _targets: dict[int, str | None] = field(default_factory=dict)

    def run(self, items: Iterable[KeyItem], start: int) -> Iterator[Emitted]:
        """Every event this key causes from op `start` (the era's first) to the era's end."""
        versions = _VersionCursor(self.timeline, start)
        batch: list[KeyItem] = []
        current = start - 1
        for item in items:
            if item.index != current:
                if batch:
                    yield from self._op(current, batch, versions)
                yield from self._changes(current + 1, item.index, versions)
                batch, current = [], item.index
            batch.append(item)
        if batch:
            yield from self._op(current, batch, versions)
        yield from self._changes(current + 1, self.end, versions)

    def _changes(self, low: int, high: int, versions: _VersionCursor) -> Iterator[Emitted]:
        """Membership changes in ops [low, high), where this key has no item: returns, then a dispatch pass."""
        for changed in versions.changes(low, high):
            if self.messages:
                yield from self._op(changed.index, [], versions)

    def _op(self, index: int, items: list[KeyItem], versions: _VersionCursor) -> Iterator[Emitted]:
        version = versions.at(index)
        for sub, item in enumerate(items):
            if item.kind == "ack":
                yield (index, PHASE_OWN, 0, sub, self._ack(item))
            else:
                self.messages[item.offset] = _Message(item.offset)
        if version.index == index and version.left:
            for message in self.messages.values():
                if message.outstanding and message.holder in version.left:
                    # req: KS-MEM-1, KS-RTY-7 (pending at once, no failure counted)
                    self._end_delivery(message)
        yield from self._dispatch(index, version)

    def _end_delivery(self, message: _Message) -> None:
        self.holders[message.holder] -= 1
        if not self.holders[message.holder]:
            del self.holders[message.holder]
        message.outstanding, message.holder = False, -1

    def _ack(self, item: KeyItem) -> Event:
        message = self.messages.get(item.offset)
        if message is not None and message.outstanding and message.holder == item.incarnation:
            # req: KS-ACK-1
            self._end_delivery(message)
            del self.messages[item.offset]
            return {"event": "ack", "offset": item.offset, "key": self.key, "consumer": item.consumer}
        # req: KS-ACK-2 (an offset the key no longer has was resolved; one it still has is held elsewhere)
        reason = "not-holder" if message is not None else "resolved"
        ignored = {"event": "ack_ignored", "offset": item.offset, "key": self.key, "consumer": item.consumer}
        return {**ignored, "reason": reason}

    def _dispatch(self, index: int, version: Version) -> Iterator[Emitted]:
        """The key's part of the dispatch pass (spec section 3), stopping where the rules hold it back."""
        strict = self.profile == "strict"
        group = self._first_candidate(strict)
        if group is None:
            return
        sub = 0
        for message in list(self.messages.values()):
            offset = message.offset
            if message.outstanding:
                if strict:
                    return  # req: KS-ORD-2
                continue  # req: KS-ORD-4
            action, reason, target = self._decide(version)
            if action == "filter":
                # req: KS-FLT-3
                del self.messages[offset]
                yield (index, PHASE_DISPATCH, group, sub, {"event": "filter", "offset": offset, "key": self.key})
                sub += 1
                continue
            if action == "hold":
                if message.held != (reason, target):
                    message.held = (reason, target)
                    event: Event = {"event": "held", "offset": offset, "key": self.key, "reason": reason}
                    if target is not None:
                        event["consumer"] = target
                    yield (index, PHASE_DISPATCH, group, sub, event)  # req: KS-OBS-3
                return  # req: KS-FLW-3, KS-ORD-1 (a held message keeps its place)
            incarnation = _incarnation(version, target)
            message.outstanding, message.holder, message.held = True, incarnation, None
            self.holders[incarnation] += 1
            message.attempts += 1  # req: KS-RTY-5
            deliver = {"event": "deliver", "offset": offset, "key": self.key, "consumer": target}
            yield (index, PHASE_DISPATCH, group, sub, {**deliver, "attempt": message.attempts})
            sub += 1
            if strict:
                return  # req: KS-ORD-2

    def _first_candidate(self, strict: bool) -> int | None:
        """The key's first message a delivery could start from (its group in the pass), or None."""
        for message in self.messages.values():
            if not message.outstanding:
                return message.offset
            if strict:
                return None
        return None

    def _decide(self, version: Version) -> tuple[str, str | None, str | None]:
        """deliver, hold (with reason and target) or filter: the rules of sections 4, 5, 7 and 12."""
        if not version.members:
            return "hold", "no-consumer", None  # req: KS-FLT-4
        eligible: tuple[str, ...] | None = None
        if self.timeline.any_filters[version.epoch]:
            # req: KS-FLT-2
            eligible = tuple(m.name for m in version.members if accepts(m.filters, self.key))
            if not eligible:
                return "filter", None, None
        if version.epoch not in self._targets:
            # req: KS-ASN-1, KS-FLT-5 (one target per key and membership epoch)
            self._targets[version.epoch] = self.timeline.selectors[version.epoch].target(self.key, eligible)
        target = self._targets[version.epoch]
        if target is None:
            return "hold", "no-consumer", None
        incarnation = _incarnation(version, target)
        if self.holders and (len(self.holders) > 1 or incarnation not in self.holders):
            return "hold", "draining", target  # req: KS-DRN-1, KS-ASN-9
        if incarnation not in version.connected:
            return "hold", "inactive", target  # req: KS-MEM-3
        return "deliver", None, target


def _incarnation(version: Version, name: str | None) -> int:
    return next(m.incarnation for m in version.members if m.name == name)


class _VersionCursor:
    """Walks the timeline forward: the version at an op, and the ops in a range that changed it."""

    def __init__(self, timeline: Timeline, start: int) -> None:
        self.versions = timeline.versions
        self.timeline = timeline
        self.position = 0
        self._advance(start)

    def _advance(self, index: int) -> None:
        while self.position + 1 < len(self.versions) and self.versions[self.position + 1].index <= index:
            self.position += 1

    def at(self, index: int) -> Version:
        self._advance(index)
        return self.versions[self.position]

    def changes(self, low: int, high: int) -> Iterator[Version]:
        for version in self.versions[self.position + 1 :]:
            if version.index >= high:
                return
            if version.index >= low:
                yield version


# --- the cursor and its persistence (spec section 14) ---------------------------------------------------


@dataclass
class Durable:
    """What the store holds: the persisted cursor, the persisted holes, and the tick of the last persistence."""

    position: int = 0
    holes: frozenset[int] = frozenset()
    persisted_at: int | None = None


def persistence(
    plan: Plan,
    start: int,
    end: int,
    durable: Durable,
    resolved_at: Mapping[int, list[int]],
) -> tuple[list[tuple[int, Event]], Durable]:
    """The `cursor_persisted` events of ops [start, end) and what the store holds after them (KS-CUR-1, KS-CUR-5).

    `resolved_at` maps an op index to the offsets resolved in it. The cursor is the reference's own pure
    helper (the contiguous resolved prefix and the holes above it); the schedule is section 14's: at the
    end of every op that changed it (`persist_interval` 0), else in a tick's phase 6 once the interval passed.
    """
    from pyroaring import BitMap64

    config = plan.config
    cursor = Cursor(durable.position, BitMap64(durable.holes))
    stored = durable
    events: list[tuple[int, Event]] = []
    for index in range(start, end):
        for offset in sorted(resolved_at.get(index, ())):
            cursor.resolve(offset)
        if cursor.position == stored.position and not (config.persist_ack_holes and cursor.changed):
            continue
        tick = plan.ticks.get(index)
        interval, last = config.persist_interval, stored.persisted_at
        if interval > 0 and (tick is None or (last is not None and tick - last < interval)):
            continue
        cursor.take_dirty_chunks()
        event: Event = {"event": "cursor_persisted", "cursor": cursor.position}
        holes: frozenset[int] = frozenset()
        if config.persist_ack_holes:
            event["ranges"] = cursor.ranges()  # req: KS-CUR-6 (every hole, no cap)
            holes = frozenset(cursor.holes)
        events.append((index, event))
        stored = Durable(cursor.position, holes, tick if tick is not None else _now_at(plan, index))
    return events, stored


def _now_at(plan: Plan, index: int) -> int:
    """The value of now during op `index`: the number of ticks up to it."""
    return sum(1 for tick in plan.ticks if tick <= index)


# --- a whole run ----------------------------------------------------------------------------------------

EraRunner = Callable[[Plan, int, int, dict[str, list[KeyItem]]], Iterable[tuple[str, Emitted]]]
"""Runs every key's engine over one era: (plan, start, end, items by key) -> (key, emitted) rows."""


def run_keys_locally(
    plan: Plan, start: int, end: int, items: dict[str, list[KeyItem]]
) -> Iterator[tuple[str, Emitted]]:
    """The era runner without Spark: every key in turn, in this process (tests and tiny runs)."""
    for key in sorted(items):
        engine = KeyEngine(key, plan.config.profile, plan.timeline, end)
        for emitted in engine.run(items[key], start):
            yield key, emitted


def era_items(plan: Plan, start: int, end: int, durable: Durable) -> dict[str, list[KeyItem]]:
    """Each key's inputs in ops [start, end): at a restart, first the messages the store says are unresolved."""
    by_key: dict[str, list[KeyItem]] = {}
    if start > 0:
        published = sum(1 for index in plan.published_at if index < start)
        for offset in range(durable.position, published):
            if offset not in durable.holes:
                # req: KS-CUR-3, KS-CUR-4 (read again from the persisted cursor, skipping persisted holes)
                by_key.setdefault(plan.keys[offset], []).append(KeyItem(start, "reread", offset))
    for key, item in plan.items:
        if start <= item.index < end:
            by_key.setdefault(key, []).append(item)
    for items in by_key.values():
        items.sort(key=lambda item: (item.index, KIND_ORDER[item.kind], item.offset))
    return by_key


Persister = Callable[[Plan, int, int, "Durable", Mapping[int, list[int]]], tuple[list[tuple[int, Event]], "Durable"]]
"""Computes an era's `cursor_persisted` events and the store after it (`persistence`)."""


def replay(
    config: Config,
    ops: Sequence[Mapping[str, Any]],
    run_era: EraRunner = run_keys_locally,
    persist: Persister | None = None,
) -> list[dict[str, Any]]:
    """One response per op (the adapter protocol's op responses), era by era between restarts."""
    persist = persist or persistence
    plan = plan_ops(config, ops)
    by_op: dict[int, list[tuple[int, int, int, Event]]] = {}
    for index, order, event in plan.own_events:
        by_op.setdefault(index, []).append((PHASE_OWN, 0, order, event))
    bounds = [0, *plan.restarts, plan.count]
    durable = Durable()
    for start, end in itertools.pairwise(bounds):
        if start == end:
            continue
        resolved_at: dict[int, list[int]] = {}
        for _, (index, phase, group, sub, event) in run_era(plan, start, end, era_items(plan, start, end, durable)):
            by_op.setdefault(index, []).append((phase, group, sub, event))
            if event["event"] in ("ack", "filter"):
                resolved_at.setdefault(index, []).append(int(event["offset"]))
        persisted, durable = persist(plan, start, end, durable, resolved_at)
        for index, event in persisted:
            by_op.setdefault(index, []).append((PHASE_PERSIST, 0, 0, event))
    responses = []
    for index in range(plan.count):
        if index in plan.responses:
            responses.append(plan.responses[index])
            continue
        events = [event for *_, event in sorted(by_op.get(index, []), key=lambda row: row[:3])]
        responses.append({"ok": True, "events": events})
    return responses


# --- replaying a log: consumers that ack what they receive ---------------------------------------------------

MINOR_BITS = 28
"""Positions in a log replay: an input op's index shifted left by this, plus 1 + offset for an ack between ops."""


def position(major: int, offset: int | None = None) -> int:
    """The sortable position of input op `major` (offset None) or of the ack of `offset` after it."""
    return (major << MINOR_BITS) | (0 if offset is None else offset + 1)


def major_of(pos: int) -> int:
    """The input op a position belongs to (an ack between ops belongs to the op before it)."""
    return pos >> MINOR_BITS


@dataclass
class LaggedAckEngine(KeyEngine):
    """A key in a log replay: every delivery is acked by its holder `lag` input ops later.

    The acks are this key's own business (they depend only on when its messages were delivered), so they
    are generated here, each at its own position between input ops, ordered by offset; an ack whose
    delivery ended first (its holder left, or the dispatcher restarted) is not sent.
    """

    lag: int = 1
    _due: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    """Scheduled acks: (position, offset, holder incarnation, holder name, attempt), a heap."""

    def run(self, items: Iterable[KeyItem], start: int) -> Iterator[Emitted]:
        """Every event from position `start` to the era's end, the generated acks included."""
        versions = _VersionCursor(self.timeline, start)
        pending = iter(items)
        upcoming = next(pending, None)
        current = start - 1
        while True:
            change = next(versions.changes(current + 1, self.end), None)
            candidates = [p for p in (
                upcoming.index if upcoming is not None else None,
                self._due[0][0] if self._due else None,
                change.index if change is not None and self.messages else None,
            ) if p is not None and p < self.end]  # fmt: skip
            if not candidates:
                return
            here = min(candidates)
            batch: list[KeyItem] = []
            while upcoming is not None and upcoming.index == here:
                batch.append(upcoming)
                upcoming = next(pending, None)
            while self._due and self._due[0][0] == here:
                _, offset, holder, name, attempt = heapq.heappop(self._due)
                message = self.messages.get(offset)
                if message is not None and message.outstanding and message.holder == holder:
                    if message.attempts == attempt:
                        batch.append(KeyItem(here, "ack", offset, holder, name))
            if batch or (change is not None and change.index == here):
                yield from self._op(here, batch, versions)
            current = here

    def _dispatch(self, index: int, version: Version) -> Iterator[Emitted]:
        for emitted in super()._dispatch(index, version):
            event = emitted[4]
            if event["event"] == "deliver":
                offset = int(event["offset"])
                message = self.messages[offset]
                due = position(major_of(index) + self.lag, offset)
                heapq.heappush(self._due, (due, offset, message.holder, str(event["consumer"]), message.attempts))
            yield emitted
