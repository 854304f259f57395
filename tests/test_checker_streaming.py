"""The Python checker forgets what is settled and still judges exactly as if it kept everything.

Settled messages are archived in chunks and revived when named again; keys with nothing left are put to
rest (ks_conformance.checks.messages, CheckerState._rest_keys). Every trace the tests know (the vector
corpus, the checker's bad and good cases, reference workloads with each injected fault) is judged twice:
archiving after every op (chunks of one offset) and keys put to rest, then with nothing forgotten. Every
anomaly (witness, explanation, details), contradiction, exercised count and verdict must be equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from ks_conformance.builder import TraceBuilder
from ks_conformance.checker import Checker
from ks_conformance.vectors import VECTORS_DIR, find_vectors
from ks_reference.store import MemoryStore
from ks_reference.workloads import run_named
from ks_spec.trace import read_events
from spark_support.faults import INJECTIONS
from test_checker import ALL_CASES

Event = dict[str, Any]


class Forgetful(Checker):
    """Archives every settled message at once (a chunk is one offset) and rests every emptied key."""

    archive_chunk = 1
    settle_every = 1


class Sparse(Checker):
    """Archives at once too, but settles only every third op (the default checker settles every 64th)."""

    archive_chunk = 1
    settle_every = 3


class Hoarder(Checker):
    """Keeps every message and every key on the heap (the checker before streaming)."""

    archive_chunk = 1 << 62
    rest_keys = False


def judged(checker: Checker, events: Iterable[Event]) -> dict[str, Any]:
    for event in events:
        checker.feed(event)
    checker.finish()
    return {
        "anomalies": [(a.name, a.seq, a.witness, a.explanation.text(), repr(a.details)) for a in checker.anomalies],
        "problems": checker.problems,
        "exercised": dict(checker.exercised),
        "verdict": checker.verdict,
    }


def assert_same_judgment(events: list[Event]) -> Forgetful:
    forgetful = Forgetful()
    kept = judged(Hoarder(), events)
    assert judged(forgetful, events) == kept
    assert judged(Sparse(), events) == kept
    return forgetful


VECTOR_TRACES = sorted(trace.path for vector in find_vectors(VECTORS_DIR) for trace in vector.traces)


@pytest.mark.parametrize("path", VECTOR_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_vector_traces_are_judged_the_same(path: Path) -> None:
    assert_same_judgment([event for _, event in read_events(path)])


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_checker_cases_are_judged_the_same(name: str, number: int, pair: Any) -> None:
    for recipe in pair:
        assert_same_judgment(recipe().events)


@pytest.mark.parametrize("target", sorted(INJECTIONS))
def test_injected_faults_are_judged_the_same(target: str) -> None:
    workload, inject = INJECTIONS[target]
    events = run_named(workload, size=300, seed=3, store=MemoryStore()).events
    mutated = inject(events)
    assert mutated is not None
    assert_same_judgment(events)
    assert_same_judgment(mutated)


def test_a_long_valid_run_keeps_only_its_live_state() -> None:
    """Over a steady run the heap holds the unsettled messages and the keys in use, not the trace."""
    events = run_named("steady", size=3000, seed=5, store=MemoryStore()).events
    forgetful = assert_same_judgment(events)
    published = len(forgetful.messages)
    assert published >= 3000
    assert forgetful.messages.live_count <= len(forgetful.unresolved) + 64
    assert len(forgetful.keys) <= len(forgetful.unresolved) + 64


def settle(trace: TraceBuilder, numbers: range, consumer: str) -> None:
    """Publish key k<n> for each number, deliver and ack it, and persist the cursor past it: settled messages."""
    for number in numbers:
        offset = trace.publish(f"k{number}")
        trace.deliver(offset, consumer)
        trace.ack(offset, consumer)
        trace.persisted(offset + 1)


def test_a_message_named_after_it_was_archived_is_judged_with_every_fact() -> None:
    """A duplicate delivery of a long-settled message: revived from the archive, reported as if never gone."""
    trace = TraceBuilder(profile="strict", selector="ring", persist_interval=0)
    trace.add("c1")
    settle(trace, range(10), "c1")
    trace.deliver(2, "c1", attempt=2)  # its second delivery: only the revived facts know that
    trace.remove("c1")  # ends that delivery: the message is settled again
    trace.add("c2")
    settle(trace, range(10, 12), "c2")  # new chunks archived: the revived message goes back, as it is now
    trace.deliver(2, "c2", attempt=3)  # its third: the archive must hold the revived message's new facts
    forgetful = Forgetful()
    for event in trace.events[:-1]:
        forgetful.feed(event)
    assert forgetful.messages.peek(2) is None  # archived again
    forgetful = assert_same_judgment(trace.events)
    assert [a.name for a in forgetful.anomalies].count("duplicate") == 2
    assert "attempt-miscount" not in [a.name for a in forgetful.anomalies]


def test_a_restart_from_a_cursor_persisted_below_the_archive_restores_what_it_must() -> None:
    """A persisted cursor moved back below archived messages: the restart brings them back, unresolved."""
    trace = TraceBuilder(profile="strict", selector="ring", persist_interval=0)
    trace.add("c1")
    settle(trace, range(10), "c1")
    trace.persisted(3)
    trace.restart()
    trace.add("c1")
    trace.quiescent()
    forgetful = Forgetful()
    for event in trace.events[:-3]:
        forgetful.feed(event)
    assert forgetful.messages.archived_below >= 9  # 3..8 archived before the restart restores them
    forgetful = assert_same_judgment(trace.events)
    assert {"cursor-regress", "restart-skip"} <= {a.name for a in forgetful.anomalies}
