"""The proof of a shard's prediction: the changes its checker makes to the facts that span keys must be the ones the
ledger predicted for its keys (facts.py); where they differ, the sharded judgment is void and the trace is judged
whole."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from operator import itemgetter

from ks_conformance.sharding.facts import NOTHING, Change


class Proof:
    """Checks that a shard's changes to the facts that span keys are the predicted ones, a stretch of seqs at a time
    (`settle`): the checker logs its changes in `made` (a list: no Python call per change), compared with the
    prediction as lists, and only where they differ seq by seq as multisets (a restart or seek walks its messages in
    the heap's order)."""

    def __init__(self, predicted: Iterable[Change]) -> None:
        self.predicted = iter(predicted)
        self.upcoming = next(self.predicted, None)
        self.made: list[Change] = []
        """The changes made and not yet compared (the checker's `delta_log`), in seq order."""
        self.failed: int | None = None
        """The seq where the changes made first differed from the prediction."""

    def settle(self, before: int) -> None:
        """Compare the changes made at seqs below `before` with the predicted ones, and forget both."""
        made = self.made
        cut = bisect_left(made, before, key=itemgetter(0)) if made and made[-1][0] >= before else len(made)
        done = made[:cut]
        del made[:cut]
        expected = []
        upcoming, predicted = self.upcoming, self.predicted
        while upcoming is not None and upcoming[0] < before:
            if upcoming[1] != NOTHING:
                expected.append(upcoming)
            upcoming = next(predicted, None)
        self.upcoming = upcoming
        if expected != done and self.failed is None:
            self.failed = first_difference(expected, done)


def first_difference(expected: list[Change], made: list[Change]) -> int | None:
    """The first seq whose changes differ between the two lists as multisets (None: they differ in order only)."""
    by_seq: dict[int, tuple[list[Change], list[Change]]] = {}
    for side, changes in enumerate((expected, made)):
        for change in changes:
            by_seq.setdefault(change[0], ([], []))[side].append(change)
    for seq in sorted(by_seq):
        wanted, got = by_seq[seq]
        if wanted != got and sorted(wanted, key=repr) != sorted(got, key=repr):
            return seq
    return None
