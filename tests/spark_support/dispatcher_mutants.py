"""Deliberately broken Spark dispatchers: the batch path of the conformance kit must catch each one.

Each is the Spark dispatcher's engine with one rule broken the way real dispatchers break it, and the
requirement IDs the suite must report failed. They run their key engines in process (`create_local`'s
runner), so the batch harness is tested without a JVM; one of them also runs on Spark in the tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ks_spark.dispatcher.adapter import SparkDispatcherAdapter
from ks_spark.dispatcher.engine import (
    Durable,
    Emitted,
    EraRunner,
    Event,
    KeyEngine,
    KeyItem,
    Plan,
    Version,
    persistence,
)
from ks_spark.dispatcher.runner import SparkEraRunner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class NoDraining(KeyEngine):
    """A key's new owner is served at once, while the old owner still holds earlier messages of it."""

    def _decide(self, version: Version) -> tuple[str, str | None, str | None]:
        holders, self.holders = self.holders, type(self.holders)()  # breaks KS-DRN-1: holders not consulted
        try:
            return super()._decide(version)
        finally:
            self.holders = holders


class AnyMemberAcks(KeyEngine):
    """An ack from any member resolves the message, not only one from the member that holds it."""

    def _ack(self, item: KeyItem) -> Event:
        message = self.messages.get(item.offset)
        if message is not None and message.outstanding:
            item = KeyItem(item.index, item.kind, item.offset, message.holder, item.consumer)  # breaks KS-ACK-2
        return super()._ack(item)


class StrictPipelines(KeyEngine):
    """The strict profile sends a key's next message before the previous one is acked."""

    def _dispatch(self, index: int, version: Version) -> Iterator[Emitted]:
        profile, self.profile = self.profile, "owner"  # breaks KS-ORD-2
        try:
            yield from super()._dispatch(index, version)
        finally:
            self.profile = profile


def cursor_at_highest_ack(
    plan: Plan, start: int, end: int, durable: Durable, resolved_at: Mapping[int, list[int]]
) -> tuple[list[tuple[int, Event]], Durable]:
    """The persisted cursor is one past the highest resolved offset, not the end of the resolved prefix."""
    events, stored = persistence(plan, start, end, durable, resolved_at)
    highest = durable.position
    moved: list[tuple[int, Event]] = []
    resolved = sorted((index, offset) for index, offsets in resolved_at.items() for offset in offsets)
    position = 0
    for index, event in events:
        while position < len(resolved) and resolved[position][0] <= index:
            highest = max(highest, resolved[position][1] + 1)
            position += 1
        moved.append((index, {**event, "cursor": max(int(event["cursor"]), highest)}))  # breaks KS-CUR-1
    return moved, stored


@dataclass(frozen=True)
class BatchMutant:
    """One broken Spark dispatcher and the requirements the suite must report failed."""

    name: str
    catches: frozenset[str]
    engine: type[KeyEngine] = KeyEngine
    persist: Any = None
    may: frozenset[str] = frozenset()
    """Requirements the suite may also report: consequences the bug has in some examples."""

    def create(self, session: SparkSession | None = None) -> SparkDispatcherAdapter:
        """The adapter: its key engines run in process, or as Spark jobs on `session`."""
        engine = self.engine

        def run_era(plan: Plan, start: int, end: int, items: dict[str, list[KeyItem]]) -> Iterator[tuple[str, Emitted]]:
            for key in sorted(items):
                for emitted in engine(key, plan.config.profile, plan.timeline, end).run(items[key], start):
                    yield key, emitted

        if session is not None:
            import sys

            from pyspark import cloudpickle

            # Spark's Python workers cannot import tests/: ship this module's classes by value.
            cloudpickle.register_pickle_by_value(sys.modules[__name__])
        runner: EraRunner = run_era if session is None else SparkEraRunner(session, engine=engine)
        adapter = SparkDispatcherAdapter(runner, self.persist)
        adapter.implementation = {"name": f"spark-mutant-{self.name}", "version": "0", "language": "python"}
        return adapter


BATCH_MUTANTS = (
    BatchMutant("no_draining", frozenset({"KS-DRN-1"}), NoDraining),
    BatchMutant("any_member_acks", frozenset({"KS-ACK-2"}), AnyMemberAcks),
    BatchMutant("strict_pipelines", frozenset({"KS-ORD-2"}), StrictPipelines),
    # a cursor past unacked offsets breaks every restart after it: the store skips what was never resolved and
    # re-reads what was (CUR-4, RES-1, RES-2), later writes move back or come early (CUR-2, CUR-5), and the
    # replayed deliveries meet the owners of the epoch before (DRN-1, ORD-*), or never settle (LIV-*, MEM-1)
    BatchMutant(
        "cursor_at_highest_ack",
        frozenset({"KS-CUR-1"}),
        persist=cursor_at_highest_ack,
        may=frozenset(
            "KS-CUR-2 KS-CUR-4 KS-CUR-5 KS-RES-1 KS-RES-2 KS-DRN-1 KS-ORD-1 KS-ORD-2 KS-ORD-3 KS-LIV-1 KS-LIV-2 "
            "KS-MEM-1".split()
        ),
    ),
)
