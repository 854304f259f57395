"""Deliberately broken dispatchers (mutants): each breaks one rule of the spec the way real brokers do.

A check of the conformance suite is only real if a broken implementation makes it fail. Every mutant
is the reference dispatcher with one bug: a class of bugs.py, registered beside it by `@mutant(...)`
(registry.py) with the requirement IDs the suite must catch it on, those it may also be reported on
(consequences of the bug that break another rule), and the capability slice it is tested with (slices.py:
the slice narrows what the suite draws so that the bug is found within the `ci` profile; it is declared
honestly, like any adapter's capabilities). A new mutant touches bugs.py alone.
`tests/test_conformance_mutants.py` proves each is caught: must <= found <= must | may.

Double mutants combine a cheap bug, which shows in almost every example, with a deep one: one `ci` run
must report both (a found kind never hides another).

Every mutant is also an adapter factory: `keyshared conformance run --adapter
py:conformance_mutants:no_draining` runs the suite against one (with `tests/` on `PYTHONPATH`).
"""

from __future__ import annotations

from collections.abc import Callable

from ks_reference.adapter import ReferenceAdapter

from conformance_mutants import bugs
from conformance_mutants.registry import REGISTERED, Mutant, describe
from conformance_mutants.slices import (
    ACK_BY_ID,
    BASE,
    BUCKETS,
    CHECKPOINTS,
    DELAYED,
    EXTENSIONS,
    FLUSHED,
    GROWING,
    HEARTBEAT_READS,
    KEY_BATCH_PERMITS,
    KEY_BATCHES,
    LOOKAHEAD,
    ON_ADVANCE,
    OWNER,
    PARKING,
    PERMITS,
    RING,
    SEEK,
    SEEK_DEBOUNCED,
    SHARED_NAMES,
    SLACK_OF_ONE,
    STRICT,
    WITHOUT_ZOMBIES,
    ZOMBIES,
)

__all__ = [
    "ACK_BY_ID",
    "BASE",
    "BUCKETS",
    "BY_NAME",
    "CHECKPOINTS",
    "DELAYED",
    "DOUBLE_MUTANTS",
    "EXTENSIONS",
    "FLUSHED",
    "GROWING",
    "HEARTBEAT_READS",
    "KEY_BATCHES",
    "KEY_BATCH_PERMITS",
    "LOOKAHEAD",
    "MUTANTS",
    "ON_ADVANCE",
    "OWNER",
    "PARKING",
    "PERMITS",
    "RING",
    "SEEK",
    "SEEK_DEBOUNCED",
    "SHAPE_MUTANTS",
    "SHARED_NAMES",
    "SINGLE",
    "SLACK_OF_ONE",
    "STRICT",
    "WITHOUT_ZOMBIES",
    "ZOMBIES",
    "Mutant",
    "bugs",
]

MUTANTS: tuple[Mutant, ...] = tuple(REGISTERED)
"""One mutant per MUST requirement the checker covers (and the real bugs of issue 5): the `@mutant(...)`
registrations of bugs.py, in the order of that file."""


def _double(cheap: str, deep: str, may: str = "") -> Mutant:
    """A mutant with two bugs: the cheap one's dispatcher first in the MRO, the deep one's slice of capabilities."""
    first, second = SINGLE[cheap], SINGLE[deep]
    assert first.adapter is ReferenceAdapter and second.adapter is ReferenceAdapter
    both = type(
        f"{first.dispatcher.__name__}And{second.dispatcher.__name__}",
        (first.dispatcher, second.dispatcher),
        {"__doc__": f"{first.bug} And: {second.bug}"},
    )
    return Mutant(
        f"{cheap}+{deep}",
        f"{first.bug} And: {second.bug}",
        first.catches | second.catches,
        both,
        capabilities=second.capabilities,
        warns=first.warns | second.warns,
        may=first.may | second.may | frozenset(may.split()),
    )


SINGLE: dict[str, Mutant] = {mutant.name: mutant for mutant in MUTANTS}

DOUBLE_MUTANTS: tuple[Mutant, ...] = (
    _double("stats_now_lags", "no_draining"),
    _double("stats_now_lags", "retry_behind"),
    _double("stats_now_lags", "held_overtaken"),
    _double("stats_now_lags", "dropped_key_stranded"),
    _double("stats_now_lags", "blocked_leak"),
    _double("stats_now_lags", "stale_ack_accepted"),
    _double("persist_eagerly", "no_draining"),
    _double("persist_eagerly", "retry_behind"),
    _double("persist_eagerly", "held_overtaken"),
    _double("persist_eagerly", "dropped_key_stranded"),
    _double("persist_eagerly", "blocked_leak"),
    _double("persist_eagerly", "stale_ack_accepted"),
    _double("stale_ack_accepted", "head_of_line"),
)
"""A cheap bug (stats a tick behind, an early cursor write, an accepted stale ack) with a deep one: one run must
report both. The stats and the cursor write show in almost every example: a suite that stops an example at a
kind it found already never sees the deep bug behind them."""

SHAPE_MUTANTS: tuple[Mutant, ...] = (
    # two defects of one anomaly kind (retry-overtaken): a nack (or timeout) requeued behind later messages, and a
    # failover that serves new messages before the leaver's returned ones; one run reports a witness of each
    describe("retry_and_failover_behind", "KS-ORD-3", bugs.RetryBehindFailoverNewFirst, **BASE),
    # one nack in five passed over: replays reproduce it only sometimes (the adapter says `deterministic: false`)
    describe(
        "nack_sometimes_behind",
        "KS-ORD-3",
        bugs.NackSometimesBehind,
        adapter=bugs.NackSometimesBehindAdapter,
        **BASE,
        deterministic=False,
    ),
)
"""Mutants of tests/test_witness_shapes.py (issue 33): a kind with two shapes, and a bug that shows in a fraction of
runs. Not in the matrix of tests/test_conformance_mutants.py: a nondeterministic bug's saved scenario does not show
it on every replay."""

BY_NAME: dict[str, Mutant] = {mutant.name: mutant for mutant in (*MUTANTS, *DOUBLE_MUTANTS, *SHAPE_MUTANTS)}


def __getattr__(name: str) -> Callable[[], ReferenceAdapter]:
    """`py:conformance_mutants:<name>`: each mutant's adapter factory, by the mutant's name."""
    if name in BY_NAME:
        return BY_NAME[name].create
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
