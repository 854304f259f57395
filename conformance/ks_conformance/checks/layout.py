"""KS-BKT-11: with `layout = "reported"` the dispatcher chooses a split's point and a merged segment's N; the
layout it reports must still be a valid one. A pure function of the segments, so the check reads in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ks_conformance.checks.records import Segment

RING_MAX = 0xFFFF
"""The last slot of the 16-bit segment-routing ring (spec section 17)."""

Finding = tuple[list[str], str, list[int]]
"""The facts a layout problem rests on ("Let" clauses), what is wrong, and the seqs that witness it."""


def segment_text(segment: Segment) -> str:
    """How a layout explanation names a segment: its number, range, N and the seq that created it."""
    return (
        f"segment {segment.number} covers [{segment.lo:#06x}, {segment.hi:#06x}] with N = {segment.buckets} "
        f"[seq {segment.created_seq}]"
    )


def layout_problem(segments: Mapping[int, Segment], created: Sequence[int], maximum: int) -> Finding | None:
    """The first way the segments `created` in one op make an invalid layout (KS-BKT-11), or None.

    Each created segment needs 1 <= N <= `maximum` and sealed predecessors; one predecessor's children are one
    segment over its whole range (a rollover) or two that partition it, each non-empty (the split point strictly
    inside) and with max(1, N / 2) buckets; two predecessors are adjacent and their successor covers exactly both;
    and the active segments partition the ring.
    """
    fresh = [segments[number] for number in created if number in segments]
    for segment in fresh:
        if not 1 <= segment.buckets <= maximum:
            return (
                [segment_text(segment)],
                f"its N must lie between 1 and bucket_max = {maximum}",
                [segment.created_seq],
            )
        if not 0 <= segment.lo <= segment.hi <= RING_MAX:
            return [segment_text(segment)], "its range is not a range of the 16-bit ring", [segment.created_seq]
        for number in segment.predecessors:
            parent = segments.get(number)
            if parent is None or not parent.sealed or parent.number in created:
                return (
                    [segment_text(segment)],
                    f"its predecessor {number} is not a segment sealed before it was created",
                    [segment.created_seq],
                )
    children: dict[tuple[int, ...], list[Segment]] = {}
    for segment in fresh:
        if segment.predecessors:
            children.setdefault(segment.predecessors, []).append(segment)
    for parents, made in children.items():
        found = _children_problem([segments[number] for number in parents], sorted(made, key=lambda s: s.lo))
        if found is not None:
            return found
    return _coverage_problem(segments, fresh)


def _children_problem(parents: list[Segment], made: list[Segment]) -> Finding | None:
    """A split's two children must partition their parent; a rollover's one child and a merge's successor must
    cover exactly what they replace."""
    facts = [segment_text(s) for s in parents + made]
    witness = [s.created_seq for s in parents + made]
    if len(parents) == 2:
        low, high = sorted(parents, key=lambda s: s.lo)
        if low.hi + 1 != high.lo:
            return facts, f"segments {low.number} and {high.number} are not adjacent, yet they were merged", witness
        if len(made) != 1 or (made[0].lo, made[0].hi) != (low.lo, high.hi):
            return (
                facts,
                (
                    f"a merge of segments {low.number} and {high.number} creates one successor covering exactly "
                    f"[{low.lo:#06x}, {high.hi:#06x}]"
                ),
                witness,
            )
        return None
    parent = parents[0]
    if len(made) == 1:
        if (made[0].lo, made[0].hi) != (parent.lo, parent.hi):
            return (
                facts,
                (
                    f"segment {made[0].number} is segment {parent.number}'s only successor, so it must cover its whole "
                    f"range [{parent.lo:#06x}, {parent.hi:#06x}]"
                ),
                witness,
            )
        return None
    if len(made) == 2:
        low, high = made
        middle = low.hi
        half = max(1, parent.buckets // 2)
        if low.lo == parent.lo and high.hi == parent.hi and high.lo == middle + 1 and parent.lo <= middle < parent.hi:
            if low.buckets == high.buckets == half:
                return None
            return (
                facts,
                f"segments {low.number} and {high.number} must each have max(1, N / 2) = {half} buckets, as a split "
                f"of segment {parent.number} gives its children",
                witness,
            )
        return (
            facts,
            (
                f"segments {low.number} and {high.number} must partition segment {parent.number}'s range "
                f"[{parent.lo:#06x}, {parent.hi:#06x}] at a split point strictly inside it (the lower child ending at "
                "a slot below the parent's last, the upper child starting at the next slot)"
            ),
            witness,
        )
    return facts, f"segment {parent.number} was given {len(made)} successors; a split creates two", witness


def _coverage_problem(segments: Mapping[int, Segment], fresh: list[Segment]) -> Finding | None:
    """After a layout change the active segments partition the ring: no slot uncovered, none covered twice."""
    active = sorted((s for s in segments.values() if not s.sealed), key=lambda s: (s.lo, s.hi))
    expected = 0
    for segment in active:
        if segment.lo != expected:
            what = "covered twice" if segment.lo < expected else "covered by no active segment"
            slot = segment.lo if segment.lo < expected else expected
            return (
                [segment_text(s) for s in fresh],
                f"after this layout change slot {slot:#06x} is {what}: the active segments must partition the ring",
                [s.created_seq for s in fresh],
            )
        expected = segment.hi + 1
    if expected != RING_MAX + 1:
        return (
            [segment_text(s) for s in fresh],
            f"after this layout change slot {expected:#06x} is covered by no active segment: the active segments "
            "must partition the ring",
            [s.created_seq for s in fresh],
        )
    return None
