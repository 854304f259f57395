"""Buckets and segments (spec section 17, PIP-486): placement, layout changes, handoffs, checkpoints.

`BucketLayout` is the bucket part of the dispatcher's state. It places each message by its
32-bit hash, tracks which member each bucket was handed to and which handoffs are withheld,
which segments still hold unresolved messages (for the predecessor rule) and the per-(segment,
bucket) checkpoints: they follow the persisted cursor and holes, or with `checkpoint_resume` every
resolution of their bucket, and a restart then resumes from them (KS-BKT-9).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from ks_reference.hashing import bucket_of, bucket_owner_index, murmur3_32, split_hash
from ks_reference.store import SegmentRecord

BucketId = tuple[int, int]
"""(segment, bucket)."""


@dataclass(frozen=True)
class Placement:
    """Where a message lives: its hash H, its segment and its bucket (KS-BKT-1)."""

    hash: int
    segment: int
    bucket: int

    def as_dict(self) -> dict[str, int]:
        """The adapter protocol's `placement` object."""
        return {"hash": self.hash, "segment": self.segment, "bucket": self.bucket}


@dataclass
class Segment:
    """A contiguous range of the 16-bit ring with a fixed number of buckets (KS-BKT-2)."""

    number: int
    range_lo: int
    range_hi: int
    buckets: int
    predecessor: int | None = None
    sealed: bool = False
    second_predecessor: int | None = None
    """A merged segment's upper predecessor (a merge has two)."""

    @property
    def predecessors(self) -> tuple[int, ...]:
        """The segments this one succeeds: none, one (rollover, split) or two (merge)."""
        return tuple(p for p in (self.predecessor, self.second_predecessor) if p is not None)

    def covers(self, high: int) -> bool:
        """True when the high 16 bits of a hash fall in this segment's range."""
        return self.range_lo <= high <= self.range_hi

    def record(self) -> SegmentRecord:
        """The store's form of this segment."""
        lo, hi, second = self.range_lo, self.range_hi, self.second_predecessor
        return SegmentRecord(self.number, lo, hi, self.buckets, self.predecessor, self.sealed, second)


class LayoutRefusal(ValueError):
    """A rollover or split the spec refuses (`invalid_argument`)."""


class BucketLayout:
    """Segments, bucket ownership and handoffs, and checkpoints."""

    def __init__(
        self,
        budget: int,
        maximum: int,
        segments: list[SegmentRecord] | None = None,
        policy: str = "sorted",
        controller_moves: bool = False,
    ) -> None:
        self.maximum = maximum
        self.policy = policy
        """`sorted`, `sticky` or `controller` (sticky's placement; with `controller_moves`, joins give buckets only to
        members that owned none, and the controller also evens the load between joins): KS-BKT-3, KS-BKT-8."""
        self.controller_moves = controller_moves and policy == "controller"
        self.owners: dict[BucketId, str] = {}
        """The sticky policy's bucket owners (volatile: rebuilt from the joins after a restart)."""
        self.known: dict[int, set[str]] = {}
        """Per segment, the members its last rebalance saw: with controller moves only the others (joiners) gain."""
        if segments:
            self.segments = {
                s.number: Segment(
                    s.number, s.range_lo, s.range_hi, s.buckets, s.predecessor, s.sealed, s.second_predecessor
                )
                for s in segments
            }
        else:
            self.segments = {0: Segment(0, 0x0000, 0xFFFF, budget)}
        self.assigned: dict[BucketId, str] = {}
        """Who each bucket was last handed to (volatile: empty after a restart)."""
        self.withheld: dict[BucketId, str] = {}
        """Buckets withheld from their new target while the prior owner drains (KS-BKT-4)."""
        self.outstanding: dict[BucketId, Counter[str]] = {}
        """Outstanding entries per bucket and holder."""
        self.unresolved_high: dict[int, Counter[int]] = {}
        """Per segment, its unresolved messages counted by the high 16 bits of their hash (KS-BKT-5)."""
        self.undurable: dict[BucketId, deque[int]] = {}
        """Per bucket, its offsets its checkpoint has not yet passed, in order."""
        self.last_offset: dict[BucketId, int] = {}
        self.checkpoints: dict[BucketId, int] = {}
        self.needs_reconcile = True
        self.reassignments_total = 0
        self.rollovers_total = 0

    # --- placement (KS-BKT-1) ---

    def place(self, key: str) -> Placement:
        """The active segment whose range holds `H >> 16`, and the bucket `floor(hashB * N / 65536)`."""
        hash32 = murmur3_32(key)
        high, hash_b = split_hash(hash32)
        for segment in self.segments.values():
            if not segment.sealed and segment.covers(high):
                # req: KS-BKT-1
                return Placement(hash32, segment.number, bucket_of(hash_b, segment.buckets))
        raise AssertionError(f"no active segment covers {high:#06x}; the layout lost coverage")

    def on_publish(self, offset: int, placement: Placement) -> None:
        """Track a new message as unresolved and not yet durably resolved."""
        self.track_unresolved(offset, placement)
        bucket = (placement.segment, placement.bucket)
        self.undurable.setdefault(bucket, deque()).append(offset)
        self.last_offset[bucket] = offset

    def track_unresolved(self, offset: int, placement: Placement) -> None:
        """Count a message as unresolved in its segment (at publish, and again after a restart)."""
        self.unresolved_high.setdefault(placement.segment, Counter())[placement.hash >> 16] += 1

    def on_resolve(self, placement: Placement) -> None:
        """A message left the subscription: it no longer holds back successor segments."""
        counts = self.unresolved_high[placement.segment]
        high = placement.hash >> 16
        counts[high] -= 1
        if counts[high] == 0:
            del counts[high]

    # --- the predecessor rule (KS-BKT-5) ---

    def predecessor_pending(self, segment_number: int) -> bool:
        """True while an ancestor segment has an unresolved message in this segment's range.

        The rule is applied to every ancestor, not only the direct predecessors: a rollover of a
        segment that received nothing must not let its successor overtake the grandparent, and a
        merged segment, whose range covers both of its predecessors', waits until both have drained.
        """
        segment = self.segments[segment_number]
        seen: set[int] = set()
        ancestors = list(segment.predecessors)
        while ancestors:
            ancestor = ancestors.pop()
            if ancestor in seen:
                continue
            seen.add(ancestor)
            for high in self.unresolved_high.get(ancestor, ()):
                if segment.covers(high):
                    # req: KS-BKT-5
                    return True
            ancestors += self.segments[ancestor].predecessors
        return False

    # --- ownership and handoffs (KS-BKT-3, KS-BKT-4) ---

    def target(self, placement: Placement, members_by_name: list[str]) -> str | None:
        """The bucket's owner under the assignment policy (KS-BKT-3)."""
        if not members_by_name:
            return None
        return self.owner_of((placement.segment, placement.bucket), members_by_name)

    def owner_of(self, bucket: BucketId, members_by_name: list[str]) -> str:
        """`sorted`: by position among the members sorted by name; `sticky`: the owner the policy keeps."""
        segment = self.segments[bucket[0]]
        if self.policy == "sorted":
            # req: KS-BKT-3 (position j in the segment's order: the names rotated by the segment's number)
            count = len(members_by_name)
            return members_by_name[(bucket_owner_index(bucket[1], segment.buckets, count) + segment.number) % count]
        if self.owners.get(bucket) not in members_by_name:
            self.rebalance(segment, members_by_name)
        return self.owners[bucket]

    def rebalance(self, segment: Segment, members_by_name: list[str]) -> None:
        """The sticky policy for one segment: owners kept; orphans to the least loaded; then even out by one.

        A join moves buckets only to the joiner, at most ceil(N/k), and a leave only the leaver's (KS-BKT-8).
        """
        buckets = [(segment.number, b) for b in range(segment.buckets)]
        load = {name: 0 for name in members_by_name}
        # req: KS-BKT-3 (ties go by the segment's order: the names rotated by its number, so that segments of one
        # bucket each do not all go to the same member)
        shift = segment.number % len(members_by_name)
        place = {name: (index - shift) % len(members_by_name) for index, name in enumerate(members_by_name)}
        for bucket in buckets:
            owner = self.owners.get(bucket)
            if owner in load:
                load[owner] += 1
        # With controller moves, counts need not be even: only the members the segment has not seen (joiners) gain.
        known = self.known.get(segment.number, set())
        gaining = [name for name in members_by_name if name not in known] if self.controller_moves else members_by_name
        self.known[segment.number] = set(members_by_name)
        for bucket in buckets:
            if self.owners.get(bucket) not in load:
                # req: KS-BKT-8 (an orphaned bucket goes to the least loaded member, nobody else moves)
                least = min(members_by_name, key=lambda name: (load[name], place[name]))
                self.owners[bucket] = least
                load[least] += 1
        while gaining:
            most = max(members_by_name, key=lambda name: (load[name], place[name]))
            least = min(gaining, key=lambda name: (load[name], place[name]))
            if load[most] - load[least] <= 1:
                return
            # req: KS-BKT-8 (only the member below its share gains: after a join, the joiner)
            moving = max(bucket for bucket in buckets if self.owners[bucket] == most)
            self.owners[moving] = least
            load[most] -= 1
            load[least] += 1

    def controller_step(self, unresolved: Mapping[BucketId, int], members_by_name: list[str]) -> None:
        """PIP-486's controller evening the load (`controller_moves`): the member whose buckets of active segments
        hold the most unresolved messages gives one drained bucket (nothing of it outstanding) to the member holding
        the fewest, when that narrows the gap; at most one move per call."""
        if not self.controller_moves or len(members_by_name) < 2:
            return
        buckets = [(s.number, b) for s in self.segments.values() if not s.sealed for b in range(s.buckets)]
        owner = {bucket: self.owner_of(bucket, members_by_name) for bucket in buckets}
        load = {name: 0 for name in members_by_name}
        for bucket in buckets:
            load[owner[bucket]] += unresolved.get(bucket, 0)
        most = max(members_by_name, key=lambda name: (load[name], name))
        least = min(members_by_name, key=lambda name: (load[name], name))
        gap = load[most] - load[least]
        movable = [
            bucket
            for bucket in buckets
            if owner[bucket] == most
            and not self.outstanding.get(bucket)
            and bucket not in self.withheld
            and 0 < unresolved.get(bucket, 0) < gap
        ]
        if movable:
            # the bucket that halves the gap best, the first in (segment, bucket) order on ties (KS-GEN-5)
            moving = min(movable, key=lambda bucket: (abs(gap - 2 * unresolved.get(bucket, 0)), bucket))
            self.owners[moving] = least  # req: KS-BKT-3 (announced by the next reconcile's bucket_assigned)
            self.needs_reconcile = True

    def members_changed(self, members_by_name: list[str]) -> None:
        """Recompute the sticky owners of every live segment for the new membership."""
        if self.policy == "sorted" or not members_by_name:
            return
        for number in sorted({bucket[0] for bucket in self.live_buckets()}):
            self.rebalance(self.segments[number], members_by_name)

    def live_buckets(self) -> list[BucketId]:
        """Buckets that can still receive or deliver: every bucket of active segments and of undrained ones."""
        live: list[BucketId] = []
        for segment in self.segments.values():
            if not segment.sealed or self.unresolved_high.get(segment.number):
                live += [(segment.number, b) for b in range(segment.buckets)]
        return live

    def reconcile(self, members_by_name: list[str]) -> list[tuple[str, BucketId, str]]:
        """Hand buckets to their targets, or withhold them while the prior owner drains (KS-BKT-4).

        Returns the events to emit: ("bucket_assigned" | "bucket_withheld", bucket, consumer).
        """
        events: list[tuple[str, BucketId, str]] = []
        if not self.needs_reconcile:
            return events
        self.needs_reconcile = False
        if not members_by_name:
            return events
        for bucket in self.live_buckets():
            target = self.owner_of(bucket, members_by_name)
            prior = self.assigned.get(bucket)
            if prior == target:
                if self.withheld.pop(bucket, None) is not None:
                    events.append(("bucket_assigned", bucket, target))
                continue
            if prior is not None and self.outstanding.get(bucket, Counter())[prior] > 0:
                if self.withheld.get(bucket) != target:
                    # req: KS-BKT-4
                    self.withheld[bucket] = target
                    events.append(("bucket_withheld", bucket, target))
                continue
            self.withheld.pop(bucket, None)
            self.assigned[bucket] = target
            if prior is not None:
                self.reassignments_total += 1
            events.append(("bucket_assigned", bucket, target))
        return events

    def is_withheld(self, placement: Placement) -> bool:
        """True while the message's bucket is withheld for a handoff."""
        return (placement.segment, placement.bucket) in self.withheld

    def on_deliver(self, placement: Placement, consumer: str) -> None:
        """Count an outstanding entry of the bucket at its holder."""
        self.outstanding.setdefault((placement.segment, placement.bucket), Counter())[consumer] += 1

    def on_end_delivery(self, placement: Placement, consumer: str) -> None:
        """An outstanding entry ended; a withheld bucket may now be handed over."""
        bucket = (placement.segment, placement.bucket)
        counts = self.outstanding[bucket]
        counts[consumer] -= 1
        if counts[consumer] == 0:
            del counts[consumer]
            if bucket in self.withheld:
                self.needs_reconcile = True

    def forget_volatile(self) -> None:
        """Drop what a restart loses: assignments, handoffs, outstanding entries."""
        self.assigned.clear()
        self.withheld.clear()
        self.outstanding.clear()
        self.needs_reconcile = True

    # --- layout changes (KS-BKT-2) ---

    def _active(self, number: object) -> Segment:
        if not isinstance(number, int) or isinstance(number, bool):
            raise LayoutRefusal(f"segment must be an integer, got {number!r}")
        segment = self.segments.get(number)
        if segment is None or segment.sealed:
            raise LayoutRefusal(f"segment {number} is not an active segment")
        return segment

    def _unused(self, number: object, name: str) -> int:
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise LayoutRefusal(f"{name} must be a non-negative integer, got {number!r}")
        if number in self.segments:
            raise LayoutRefusal(f"{name} {number} is already in use")
        return number

    def check_rollover(self, segment: object, successor: object, buckets: object) -> None:
        """Raise LayoutRefusal unless `rollover(segment, successor, buckets)` is allowed."""
        self._active(segment)
        self._unused(successor, "successor")
        if not isinstance(buckets, int) or isinstance(buckets, bool) or not 1 <= buckets <= self.maximum:
            # req: KS-BKT-2
            raise LayoutRefusal(f"buckets must be between 1 and bucket_max {self.maximum}, got {buckets!r}")

    def rollover(self, segment_number: object, successor: object, buckets: object) -> Segment:
        """Seal a segment and create its successor over the same range with a new N; refuse a bad request."""
        self.check_rollover(segment_number, successor, buckets)
        segment = self.segments[cast(int, segment_number)]
        segment.sealed = True
        created = Segment(cast(int, successor), segment.range_lo, segment.range_hi, cast(int, buckets), segment.number)
        self.segments[created.number] = created
        self.rollovers_total += 1
        self.needs_reconcile = True
        return created

    def check_split(self, segment: object, lower: object, upper: object) -> None:
        """Raise LayoutRefusal unless `split(segment, lower, upper)` is allowed."""
        active = self._active(segment)
        self._unused(lower, "lower")
        self._unused(upper, "upper")
        if lower == upper:
            raise LayoutRefusal("lower and upper must be two different segment numbers")
        if active.range_lo == active.range_hi:
            raise LayoutRefusal(f"segment {active.number} covers one slot and cannot be split")

    def load_split_point(self, segment_number: object) -> int | None:
        """With `layout = "reported"`: the slot that halves the segment's unresolved messages (the lower child ends
        at the first slot at which it holds half or more, kept below the range's last slot); None when it holds
        none, so the split takes the midpoint (KS-BKT-11, PIP-468's split at a point chosen by load)."""
        segment = self.segments.get(segment_number) if isinstance(segment_number, int) else None
        counts = self.unresolved_high.get(segment.number, Counter()) if segment is not None else Counter()
        total = sum(counts.values())
        if segment is None or total == 0:
            return None
        running = 0
        for high in sorted(counts):
            running += counts[high]
            if 2 * running >= total:
                return min(high, segment.range_hi - 1)
        return None  # unreachable: the running count reaches the total

    def split(
        self, segment_number: object, lower: object, upper: object, point: int | None = None
    ) -> tuple[Segment, Segment]:
        """Seal a segment and create two children over its halves, each with max(1, N / 2) buckets; `point`, when
        given (layout reported), is the lower child's last slot instead of the midpoint."""
        self.check_split(segment_number, lower, upper)
        segment = self.segments[cast(int, segment_number)]
        segment.sealed = True
        middle = (segment.range_lo + segment.range_hi) // 2 if point is None else point
        buckets = max(1, segment.buckets // 2)
        low_child = Segment(cast(int, lower), segment.range_lo, middle, buckets, segment.number)
        high_child = Segment(cast(int, upper), middle + 1, segment.range_hi, buckets, segment.number)
        self.segments[low_child.number] = low_child
        self.segments[high_child.number] = high_child
        self.needs_reconcile = True
        return low_child, high_child

    def check_merge(self, lower: object, upper: object, successor: object) -> None:
        """Raise LayoutRefusal unless `merge(lower, upper, successor)` is allowed: two adjacent active segments."""
        low = self._active(lower)
        high = self._active(upper)
        self._unused(successor, "successor")
        if low.range_hi + 1 != high.range_lo:
            raise LayoutRefusal(
                f"segments {low.number} [{low.range_lo:#06x}, {low.range_hi:#06x}] and {high.number} "
                f"[{high.range_lo:#06x}, {high.range_hi:#06x}] are not adjacent (lower's range must end just below "
                "upper's)"
            )

    def merge(self, lower: object, upper: object, successor: object, larger: bool = False) -> Segment:
        """Seal two adjacent segments; one successor over both ranges with min(N_a + N_b, N_max) buckets, or with
        `larger` (layout reported, the reference's own choice) max(N_a, N_b): a merge, made when load falls, keeps
        the widest fan-out either had without doubling it."""
        self.check_merge(lower, upper, successor)
        low, high = self.segments[cast(int, lower)], self.segments[cast(int, upper)]
        low.sealed = high.sealed = True
        buckets = max(low.buckets, high.buckets) if larger else min(low.buckets + high.buckets, self.maximum)
        created = Segment(
            cast(int, successor), low.range_lo, high.range_hi, buckets, low.number, second_predecessor=high.number
        )
        self.segments[created.number] = created
        self.needs_reconcile = True
        return created

    def records(self) -> list[SegmentRecord]:
        """The layout in the store's form."""
        return [segment.record() for segment in self.segments.values()]

    def drain_mode(self) -> int:
        """Sealed segments that still hold unresolved messages (the `drain_mode` gauge)."""
        return sum(1 for s in self.segments.values() if s.sealed and self.unresolved_high.get(s.number))

    # --- checkpoints (KS-BKT-6) ---

    def advance_checkpoints(self, durably_resolved: Callable[[int], bool]) -> dict[BucketId, int]:
        """Move each bucket's checkpoint to its first offset `durably_resolved` does not count as resolved.

        A bucket with none left checkpoints one past its last message. A checkpoint never passes an
        unresolved message and never moves back (KS-BKT-6). Returns the checkpoints that changed.
        """
        changed: dict[BucketId, int] = {}
        for bucket, offsets in self.undurable.items():
            while offsets and durably_resolved(offsets[0]):
                offsets.popleft()
            position = offsets[0] if offsets else self.last_offset[bucket] + 1
            if self.checkpoints.get(bucket, 0) < position:
                # req: KS-BKT-6
                self.checkpoints[bucket] = position
                changed[bucket] = position
        return changed
