"""The checker's hook points (ks_conformance.checks.hooks): a check a rule module registers runs at every delivery,
every op's end and every quiescent point, after the checks the handlers call by name, and sees the state there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ks_conformance.builder import TraceBuilder
from ks_conformance.checker import check_events
from ks_conformance.checks import hooks


@contextmanager
def registered(points: list[list[Any]], check: Callable[..., None]) -> Iterator[None]:
    """Register `check` at each of `points` for the duration of a test (the registry is global)."""
    for point in points:
        point.append(check)
    try:
        yield
    finally:
        for point in points:
            point.remove(check)


def test_hooked_checks_see_each_delivery_op_end_and_quiescent_point() -> None:
    seen: list[tuple[str, object]] = []

    def delivery(st: Any, message: Any, event: dict[str, Any]) -> None:
        # before the delivery is recorded: the message has no delivery yet on its first one
        seen.append(("deliver", (message.offset, message.deliveries, event["consumer"])))

    def op_end(st: Any, op: Any) -> None:
        seen.append(("op", op.kind))

    def quiescence(st: Any, event: dict[str, Any]) -> None:
        seen.append(("quiescent", len(st.unresolved)))

    t = TraceBuilder(profile="owner", selector="ring").add("c1", capacity=2)
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1")
    t.persisted(1)
    t.quiescent()
    with (
        registered([hooks.DELIVERY_CHECKS], delivery),
        registered([hooks.END_OF_OP_CHECKS], op_end),
        registered([hooks.QUIESCENCE_CHECKS], quiescence),
    ):
        check_events(t.events)
    assert ("deliver", (0, 0, "c1")) in seen
    assert [kind for what, kind in seen if what == "op"] == ["config", "consumer_added", "publish", "ack", "quiescent"]
    assert ("quiescent", 0) in seen


def test_a_check_of_an_event_kind_runs_before_its_handler() -> None:
    seen: list[tuple[int, bool]] = []

    def before_ack(st: Any, event: dict[str, Any]) -> None:
        seen.append((int(event["offset"]), st.messages[int(event["offset"])].resolved))

    t = TraceBuilder(profile="owner", selector="ring").add("c1", capacity=2)
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1")
    hooks.EVENT_CHECKS.setdefault("ack", []).append(before_ack)
    try:
        check_events(t.events)
    finally:
        hooks.EVENT_CHECKS["ack"].remove(before_ack)
    assert seen == [(0, False)]  # once, for the one ack, before the ack resolved the message


def test_the_batch_check_is_registered_at_deliveries() -> None:
    """KS-BKT-10's check is the first rule that joins through a hook: it is registered, from its rule's module."""
    assert any(check.__module__ == "ks_conformance.rules.buckets" for check in hooks.DELIVERY_CHECKS)


def test_the_handler_table_has_exactly_the_event_kinds_of_the_trace_format() -> None:
    """The checker finds its handlers by name (`on_<kind>`): one per event kind of the trace schema, no stray one."""
    import json
    from pathlib import Path

    from ks_conformance.checker import HANDLERS

    path = Path(__file__).resolve().parent.parent / "spec" / "schemas" / "trace-event-v1.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    kinds: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            event = node.get("properties", {}).get("event") if isinstance(node.get("properties"), dict) else None
            if isinstance(event, dict):
                kinds.update([event["const"]] if "const" in event else event.get("enum", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert kinds and set(HANDLERS) == kinds


def test_a_check_hooked_to_an_unknown_event_kind_stops_the_import() -> None:
    """A typo in `at_event("akc")` would leave a rule that never runs: the checker refuses to load instead."""
    import subprocess
    import sys

    code = (
        "from ks_conformance.checks import hooks\n"
        "hooks.at_event('akc')(lambda st, event: None)\n"
        "import ks_conformance.checker\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert completed.returncode != 0
    assert "unknown event kinds: ['akc']" in completed.stderr
