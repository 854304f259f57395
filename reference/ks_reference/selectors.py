"""Assignment (spec section 4): the selectors, behind one interface, each able to explain itself.

A selector maps a key to one member given the current members. Every selector answers
`target(key, eligible)`, where `eligible` is the key's eligible members in join order
(KS-FLT-5), and `ranges()`, each member's share of the selector's position space.

Long because every selector of spec section 4 (the rings, Pulsar's three, Danube's, buckets, partitions, any)
lives beside the interface they share, as the section keeps them together.
"""

from __future__ import annotations

import bisect
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ks_reference.hashing import (
    bucket_hash_range,
    bucket_of,
    bucket_owner_index,
    danube_hash,
    murmur3_32,
    owned_buckets,
    pulsar_consistent_slot,
    pulsar_range_slot,
    split_hash,
)

Range = tuple[int, int]
"""An inclusive range of positions."""


class SelectorRefusal(ValueError):
    """A join the selector cannot take (`invalid_argument`): overlapping sticky ranges, filters, ..."""


class Selector(ABC):
    """The interface every selector offers; positions are a key's hash or slot, per selector."""

    name: str
    space: Range
    """The inclusive range of positions this selector maps keys to."""
    takes_filters: bool = True
    """False for selectors that cannot project onto eligible members (KS-FLT-5)."""
    takes_hash_names: bool = False
    """True for a selector that hashes consumer names, so a member may join under a name others share."""

    @abstractmethod
    def position(self, key: str) -> int:
        """The key's position (hash or slot) in this selector's space."""

    @abstractmethod
    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        """A member joins; raise SelectorRefusal when it cannot."""

    @abstractmethod
    def remove(self, member: str) -> None:
        """A member leaves."""

    def hash_as(self, member: str, name: str) -> None:
        """The next `add` of `member` hashes `name` instead of the member's own (only if `takes_hash_names`)."""
        raise NotImplementedError(f"selector '{self.name}' hashes no consumer names")

    @abstractmethod
    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        """The key's target among `eligible` (all members when None); None when there is none."""

    @abstractmethod
    def ranges(self) -> dict[str, list[Range]]:
        """Each member's positions as sorted, merged inclusive ranges."""

    def check_add(self, member: str, ranges: Sequence[Range]) -> None:
        """Raise SelectorRefusal if `add(member, ranges)` would be refused; change nothing."""
        if ranges:
            raise SelectorRefusal(f"selector '{self.name}' takes no declared ranges (only pulsar-sticky does)")


def merge_ranges(ranges: list[Range]) -> list[Range]:
    """Sort inclusive ranges and merge the ones that touch or overlap.

    post: all(a[1] + 1 < b[0] for a, b in zip(__return__, __return__[1:]))
    """
    merged: list[Range] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def ring_successor(positions: Sequence[int], point: int) -> int:
    """Index of the first position >= point, wrapping to 0 past the end (the ring lookup, KS-ASN-4).

    pre: len(positions) > 0
    pre: all(a < b for a, b in zip(positions, positions[1:]))
    post: 0 <= __return__ < len(positions)
    post: positions[__return__] >= point or (__return__ == 0 and positions[-1] < point)
    post: __return__ == 0 or positions[__return__ - 1] < point
    """
    index = bisect.bisect_left(positions, point)
    return index if index < len(positions) else 0


class PointRing(Selector):
    """A ring of points: each member places points; a key goes to the holder of the first point at or after it.

    Several members may land on one position; `tie_key` orders them and the first holds the point
    (for Pulsar's selector: the others queue behind it and take over in join order).
    """

    def __init__(self) -> None:
        self._holders: dict[int, list[str]] = {}
        self._positions: list[int] = []
        self._points_of: dict[str, list[int]] = {}
        self._join_seq: dict[str, int] = {}
        self._next_seq = 0

    @abstractmethod
    def point_positions(self, member: str) -> list[int]:
        """Where a joining member places its points."""

    @abstractmethod
    def tie_key(self, member: str) -> Any:
        """How members that share a position are ordered; the first one holds it."""

    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        self.check_add(member, ranges)
        self._join_seq[member] = self._next_seq
        self._next_seq += 1
        points = self.point_positions(member)
        self._points_of[member] = points
        for position in points:
            holders = self._holders.get(position)
            if holders is None:
                self._holders[position] = [member]
                bisect.insort(self._positions, position)
            elif member not in holders:
                bisect.insort(holders, member, key=self.tie_key)

    def remove(self, member: str) -> None:
        for position in self._points_of.pop(member, []):
            holders = self._holders.get(position)
            if holders is None or member not in holders:
                continue
            holders.remove(member)
            if not holders:
                del self._holders[position]
                self._positions.pop(bisect.bisect_left(self._positions, position))
        self._join_seq.pop(member, None)

    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        if not self._positions:
            return None
        # req: KS-ASN-2 (the target depends only on the members' own points: a join or leave moves only
        # the keys that fall before the joiner's points or on the leaver's)
        start = ring_successor(self._positions, self.position(key))
        count = len(self._positions)
        for step in range(count):
            holders = self._holders[self._positions[(start + step) % count]]
            if eligible is None:
                return holders[0]
            for member in holders:
                # req: KS-FLT-5
                if member in eligible:
                    return member
        return None

    def ranges(self) -> dict[str, list[Range]]:
        lo_space, hi_space = self.space
        owned: dict[str, list[Range]] = {}
        previous = None
        for position in self._positions:
            holder = self._holders[position][0]
            lo = lo_space if previous is None else previous + 1
            owned.setdefault(holder, []).append((lo, position))
            previous = position
        if previous is not None and previous < hi_space:
            first_holder = self._holders[self._positions[0]][0]
            owned[first_holder].append((previous + 1, hi_space))
        return {member: merge_ranges(r) for member, r in owned.items()}

    def points(self) -> dict[str, list[int]]:
        """Each member's point positions (for explanations and tests)."""
        return {member: sorted(points) for member, points in self._points_of.items()}


class RingSelector(PointRing):
    """`ring`, our default: murmur3 points `name#i`, ties by name: a function of the member set alone (KS-ASN-4)."""

    name = "ring"
    space = (0, 0xFFFFFFFF)

    def __init__(self, points: int = 100) -> None:
        super().__init__()
        self.points_per_member = points  # req: KS-ASN-3 (100 points spread each member over about 1/N)

    def position(self, key: str) -> int:
        return murmur3_32(key)

    def point_positions(self, member: str) -> list[int]:
        # req: KS-ASN-4
        return [murmur3_32(f"{member}#{i}") for i in range(self.points_per_member)]

    def tie_key(self, member: str) -> Any:
        return member


class DanubeSelector(PointRing):
    """`danube`: Danube's ring of 100 FNV-1a+fmix32 virtual nodes per member, ties in join order (KS-ASN-8)."""

    name = "danube"
    space = (0, 0xFFFFFFFF)
    VNODES = 100

    def position(self, key: str) -> int:
        return danube_hash(key)

    def point_positions(self, member: str) -> list[int]:
        # req: KS-ASN-8
        return [danube_hash(f"{member}-{v}") for v in range(self.VNODES)]

    def tie_key(self, member: str) -> Any:
        return self._join_seq[member]


class PulsarConsistentSelector(PointRing):
    """`pulsar-consistent`: Pulsar's consistent-hashing selector: slots in [1, 65535], points
    `name\\0nameIndex\\0i`, a collision queues the newcomer behind the holder in join order (KS-ASN-5).

    Members are identified by a unique id; `names` maps an id to the consumer name Pulsar hashes
    (several consumers may share a name, and then get distinct name indexes).
    """

    name = "pulsar-consistent"
    space = (1, 65535)

    takes_hash_names = True

    def __init__(self, points: int = 100, names: dict[str, str] | None = None) -> None:
        super().__init__()
        self.points_per_member = points
        self._names = names if names is not None else {}
        self._hash_names: dict[str, str] = {}
        """The names members joined under (`hash_as`), for as long as they are members."""
        self._name_index: dict[str, int] = {}

    def hash_as(self, member: str, name: str) -> None:
        self._hash_names[member] = name

    def _name_of(self, member: str) -> str:
        return self._hash_names.get(member) or self._names.get(member, member)

    def position(self, key: str) -> int:
        return pulsar_consistent_slot(key)

    def point_positions(self, member: str) -> list[int]:
        name = self._name_of(member)
        used = {self._name_index[m] for m in self._name_index if self._name_of(m) == name}
        index = next(i for i in range(len(used) + 1) if i not in used)  # smallest index not in use
        self._name_index[member] = index
        # req: KS-ASN-5
        return [pulsar_consistent_slot(f"{name}\0{index}\0{i}") for i in range(self.points_per_member)]

    def tie_key(self, member: str) -> Any:
        return self._join_seq[member]

    def remove(self, member: str) -> None:
        super().remove(member)
        self._name_index.pop(member, None)
        self._hash_names.pop(member, None)


class PulsarAutoSplitSelector(Selector):
    """`pulsar-auto-split`: PIP-34 ranges over (0, 65536]; joins split the widest range, leaves merge (KS-ASN-6)."""

    name = "pulsar-auto-split"
    space = (1, 65536)
    takes_filters = False
    SIZE = 65536

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int, str]] = []  # (lower, upper, member), sorted; member owns (lower, upper]

    def position(self, key: str) -> int:
        return pulsar_range_slot(key)

    def check_add(self, member: str, ranges: Sequence[Range]) -> None:
        super().check_add(member, ranges)
        if self._ranges and max(upper - lower for lower, upper, _ in self._ranges) < 2:
            raise SelectorRefusal("every hash range is one slot wide; no range is left to split")

    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        self.check_add(member, ranges)
        if not self._ranges:
            self._ranges = [(0, self.SIZE, member)]
            return
        widest = max(range(len(self._ranges)), key=lambda i: (self._ranges[i][1] - self._ranges[i][0], -i))
        lower, upper, owner = self._ranges[widest]
        # req: KS-ASN-6
        middle = upper - ((upper - lower) >> 1)
        self._ranges[widest : widest + 1] = [(lower, middle, member), (middle, upper, owner)]

    def remove(self, member: str) -> None:
        for index, (lower, upper, owner) in enumerate(self._ranges):
            if owner != member:
                continue
            if index + 1 < len(self._ranges):  # merge into the range above
                _, above_upper, above_owner = self._ranges[index + 1]
                self._ranges[index : index + 2] = [(lower, above_upper, above_owner)]
            elif index > 0:  # it held the top range: the range below extends upward
                below_lower, _, below_owner = self._ranges[index - 1]
                self._ranges[index - 1 : index + 1] = [(below_lower, upper, below_owner)]
            else:
                self._ranges = []
            return

    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        slot = self.position(key)
        uppers = [upper for _, upper, _ in self._ranges]
        index = bisect.bisect_left(uppers, slot)
        return self._ranges[index][2] if index < len(self._ranges) else None

    def ranges(self) -> dict[str, list[Range]]:
        return {owner: [(lower + 1, upper)] for lower, upper, owner in self._ranges}


class PulsarStickySelector(Selector):
    """`pulsar-sticky`: members declare inclusive slot ranges in [0, 65535]; overlaps are refused (KS-ASN-7)."""

    name = "pulsar-sticky"
    space = (0, 65535)
    takes_filters = False

    def __init__(self) -> None:
        self._declared: dict[str, list[Range]] = {}

    def position(self, key: str) -> int:
        return pulsar_range_slot(key)

    def check_add(self, member: str, ranges: Sequence[Range]) -> None:
        if not ranges:
            raise SelectorRefusal("a pulsar-sticky consumer must declare its slot ranges")
        lo_space, hi_space = self.space
        for lo, hi in ranges:
            if not lo_space <= lo <= hi <= hi_space:
                raise SelectorRefusal(f"range [{lo}, {hi}] is not an inclusive range within [0, 65535]")
        mine = sorted(ranges)
        for (_, hi1), (lo2, _) in itertools.pairwise(mine):
            if lo2 <= hi1:
                raise SelectorRefusal(f"the declared ranges overlap each other at slot {lo2}")
        for other, theirs in self._declared.items():
            for lo, hi in mine:
                for other_lo, other_hi in theirs:
                    if lo <= other_hi and other_lo <= hi:
                        # req: KS-ASN-7
                        raise SelectorRefusal(
                            f"range [{lo}, {hi}] overlaps [{other_lo}, {other_hi}] of consumer {other}"
                        )

    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        self.check_add(member, ranges)
        self._declared[member] = sorted((int(lo), int(hi)) for lo, hi in ranges)

    def remove(self, member: str) -> None:
        self._declared.pop(member, None)

    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        slot = self.position(key)
        for member, declared in self._declared.items():
            if any(lo <= slot <= hi for lo, hi in declared):
                return member
        return None  # req: KS-ASN-7 (no member covers the slot: no target)

    def ranges(self) -> dict[str, list[Range]]:
        return {member: merge_ranges(list(declared)) for member, declared in self._declared.items()}


class BucketsSelector(Selector):
    """`buckets` (PIP-486): members sorted by name own contiguous runs of each segment's buckets (KS-BKT-3).

    `target(key)` answers for the initial layout (segment 0, all of the ring, `buckets` buckets);
    the dispatcher routes by each message's own segment and bucket with `owner`.
    """

    name = "buckets"
    space = (0, 0xFFFF)
    takes_filters = False

    def __init__(self, buckets: int = 4) -> None:
        self.initial_buckets = buckets
        self._members: list[str] = []

    def position(self, key: str) -> int:
        return murmur3_32(key)

    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        self.check_add(member, ranges)
        bisect.insort(self._members, member)

    def remove(self, member: str) -> None:
        if member in self._members:
            self._members.remove(member)

    @property
    def members(self) -> list[str]:
        """The members, sorted by name."""
        return list(self._members)

    def owner(self, bucket: int, buckets: int) -> str | None:
        """The target of `bucket` in a segment of `buckets` buckets (KS-BKT-3)."""
        if not self._members:
            return None
        # req: KS-BKT-3
        return self._members[bucket_owner_index(bucket, buckets, len(self._members))]

    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        _, hash_b = split_hash(murmur3_32(key))
        return self.owner(bucket_of(hash_b, self.initial_buckets), self.initial_buckets)

    def ranges(self) -> dict[str, list[Range]]:
        """Each member's share of the low 16 hash bits in a segment of the initial bucket count."""
        owned: dict[str, list[Range]] = {}
        for index, member in enumerate(self._members):
            for bucket in owned_buckets(index, self.initial_buckets, len(self._members)):
                lo, hi = bucket_hash_range(bucket, self.initial_buckets)
                if lo <= hi:
                    owned.setdefault(member, []).append((lo, hi))
        return {member: merge_ranges(r) for member, r in owned.items()}


class PartitionsSelector(Selector):
    """`partitions`: a key's partition is `murmur3_32(key) mod partitions`; each partition has one active member
    that keeps it until it leaves (a joiner takes only partitions nobody holds), as a consistent-hash exchange in
    front of single-active-consumer queues behaves (KS-ASN-11)."""

    name = "partitions"
    takes_filters = False

    def __init__(self, partitions: int = 4) -> None:
        self.partitions = partitions
        self.space = (0, partitions - 1)
        self._members: list[str] = []
        """In join order."""
        self._active: dict[int, str] = {}

    def position(self, key: str) -> int:
        """The key's partition: a function of the key alone."""
        return murmur3_32(key) % self.partitions

    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        """A member joins and takes every partition without an active member (none, while any member stays)."""
        self.check_add(member, ranges)
        self._members.append(member)
        for partition in range(self.partitions):
            # req: KS-ASN-11 (a joiner never takes a partition from a present member)
            self._active.setdefault(partition, member)

    def remove(self, member: str) -> None:
        """A member leaves: each of its partitions goes to the remaining member holding fewest (then the earliest
        joined), so a leave moves only the leaver's keys."""
        self._members.remove(member)
        orphans = sorted(p for p, holder in self._active.items() if holder == member)
        for partition in orphans:
            del self._active[partition]
        held = {m: 0 for m in self._members}
        for holder in self._active.values():
            held[holder] += 1
        for partition in orphans:
            if self._members:
                # req: KS-ASN-2, KS-ASN-11 (only the leaver's partitions move)
                taker = min(self._members, key=lambda m: (held[m], self._members.index(m)))
                self._active[partition] = taker
                held[taker] += 1

    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        """The active member of the key's partition (None without members)."""
        holder = self._active.get(self.position(key))
        return holder if holder is not None and (eligible is None or holder in eligible) else None

    def ranges(self) -> dict[str, list[Range]]:
        """Each member's partitions as ranges of partition numbers."""
        owned: dict[str, list[Range]] = {}
        for partition, holder in self._active.items():
            owned.setdefault(holder, []).append((partition, partition))
        return {member: merge_ranges(r) for member, r in owned.items()}


class AnySelector(Selector):
    """`any`: no key affinity (task queues, SQS-like groups). The dispatcher picks a free eligible member per
    message (`Core.free_target`); this object only keeps the members, so its static target is the first by name."""

    name = "any"
    space = (0, 0)

    def __init__(self) -> None:
        self._members: list[str] = []

    def position(self, key: str) -> int:
        """Every key sits at position 0: there is no key-to-member map."""
        return 0

    def add(self, member: str, ranges: Sequence[Range] = ()) -> None:
        """A member joins."""
        self._members = sorted([*self._members, member])

    def remove(self, member: str) -> None:
        """A member leaves."""
        self._members.remove(member)

    def target(self, key: str, eligible: Collection[str] | None = None) -> str | None:
        """The first member by name among `eligible` (the dispatcher refines it by connection and room)."""
        names = sorted(eligible) if eligible is not None else self._members
        return names[0] if names else None

    def ranges(self) -> dict[str, list[Range]]:
        """No member owns positions: every member may take every key."""
        return {member: [self.space] for member in self._members}


SELECTOR_FACTORIES: dict[str, Callable[[int, int, int], Selector]] = {
    "ring": lambda points, buckets, partitions: RingSelector(points),
    "pulsar-consistent": lambda points, buckets, partitions: PulsarConsistentSelector(points),
    "pulsar-auto-split": lambda points, buckets, partitions: PulsarAutoSplitSelector(),
    "pulsar-sticky": lambda points, buckets, partitions: PulsarStickySelector(),
    "danube": lambda points, buckets, partitions: DanubeSelector(),
    "buckets": lambda points, buckets, partitions: BucketsSelector(buckets),
    "partitions": lambda points, buckets, partitions: PartitionsSelector(partitions),
    "any": lambda points, buckets, partitions: AnySelector(),
}


def make_selector(name: str, points: int = 100, buckets: int = 4, partitions: int = 4) -> Selector:
    """A fresh selector by its configuration name (spec section 20)."""
    return SELECTOR_FACTORIES[name](points, buckets, partitions)
