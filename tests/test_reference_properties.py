"""Random operation sequences: every trace the reference writes passes the anomaly catalogue (spec/checking.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ks_conformance.checker import Checker, check_events
from ks_reference.simulate import Simulation
from ks_reference.store import SqliteStore
from ks_spec.trace import SequenceRules, schema_problem

KEYS = ["a", "b", "c", "eu-1", "eu-2"]
NAMES = ["c1", "c2", "c3"]


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    selector = draw(
        st.sampled_from(["ring", "pulsar-consistent", "danube", "pulsar-auto-split", "pulsar-sticky", "buckets"])
    )
    base = draw(st.integers(0, 2))
    config: dict[str, Any] = {
        "profile": draw(st.sampled_from(["strict", "owner", "owner", "strict", "best-effort"])),
        "selector": selector,
        "window": draw(st.integers(1, 6)),
        "ack_timeout": draw(st.integers(0, 3)),
        "max_redeliveries": draw(st.integers(0, 2)),
        "backoff_base": base,
        "backoff_max": base + draw(st.integers(0, 2)),
        "poison_policy": draw(st.sampled_from(["drop", "dead-letter", "block"])),
        "evict_after": draw(st.integers(0, 3)),
        "persist_interval": draw(st.integers(0, 2)),
        "persist_ack_holes": draw(st.booleans()),
    }
    if selector == "buckets":
        config.update(bucket_budget=draw(st.integers(1, 4)), bucket_max=8)
    return config


OP_WEIGHTS = {
    "publish": 26, "ack": 20, "nack": 7, "tick": 16, "add_consumer": 6, "remove_consumer": 3, "disconnect": 3,
    "stray_ack": 3, "operator": 5, "restart": 2, "layout": 3,
}  # fmt: skip


def draw_op(data: st.DataObject, simulation: Simulation) -> dict[str, Any]:
    """Draw the next op knowing the state, so that acks and nacks mostly come from holders."""
    dispatcher = simulation.dispatcher
    kinds = [k for k in OP_WEIGHTS if k != "layout" or dispatcher.layout is not None]
    kind = data.draw(st.sampled_from([k for k in kinds for _ in range(OP_WEIGHTS[k])]), label="kind")
    held = sorted((o, n) for n, m in dispatcher.members.items() for o in m.outstanding)
    if kind == "publish":
        return {"op": "publish", "key": data.draw(st.sampled_from(KEYS)), "offset": len(dispatcher.log)}
    if kind in ("ack", "nack") and held:
        offset, name = data.draw(st.sampled_from(held))
        return {"op": kind, "consumer": name, "offset": offset}
    if kind in ("ack", "nack", "stray_ack"):
        verb = "ack" if kind == "stray_ack" else kind
        return {"op": verb, "consumer": data.draw(st.sampled_from(NAMES)), "offset": data.draw(st.integers(0, 12))}
    if kind == "add_consumer":
        return join_op(data, simulation, data.draw(st.sampled_from(NAMES)))
    if kind in ("remove_consumer", "disconnect"):
        return {"op": kind, "consumer": data.draw(st.sampled_from(NAMES))}
    if kind == "operator":
        keys = sorted(dispatcher.blocked) or KEYS
        return {"op": data.draw(st.sampled_from(["release", "skip"])), "key": data.draw(st.sampled_from(keys))}
    if kind == "layout" and data.draw(st.booleans()):
        numbers = st.integers(0, 7)
        return {
            "op": "rollover",
            "segment": data.draw(numbers),
            "successor": data.draw(numbers),
            "buckets": data.draw(st.integers(1, 8)),
        }
    if kind == "layout":
        numbers = st.integers(0, 7)
        return {"op": "split", "segment": data.draw(numbers), "lower": data.draw(numbers), "upper": data.draw(numbers)}
    return {"op": kind}


STICKY = {"c1": [[0, 21844]], "c2": [[21845, 43689]], "c3": [[43690, 65535]]}
"""pulsar-sticky consumers declare these slot ranges (together they cover every slot)."""


def join_op(data: st.DataObject, simulation: Simulation, name: str) -> dict[str, Any]:
    """An add_consumer op fit for the selector: filters where it takes them, ranges for pulsar-sticky."""
    selector = simulation.dispatcher.selector
    filters = data.draw(st.sampled_from([[], [], ["eu-*"], ["a"]])) if selector.takes_filters else []
    op = {"op": "add_consumer", "consumer": name, "capacity": data.draw(st.integers(1, 3)), "filters": filters}
    if selector.name == "pulsar-sticky":
        op["ranges"] = STICKY[name]
    return op


def drive(data: st.DataObject, store: Any = None) -> Simulation:
    """A random run: a configuration, one or two consumers, then up to 60 state-aware ops."""
    simulation = Simulation(data.draw(configs(), label="config"), store)
    for name in NAMES[: data.draw(st.integers(1, 2))]:
        simulation.apply({**join_op(data, simulation, name), "filters": []})
    for _ in range(data.draw(st.integers(0, 60), label="steps")):
        simulation.apply(draw_op(data, simulation))
    return simulation


def settle(simulation: Simulation) -> Simulation:
    """Add a member that takes every key (pulsar-sticky: the slots nobody connected covers), then settle."""
    dispatcher = simulation.dispatcher
    settler: dict[str, Any] = {"op": "add_consumer", "consumer": "settler", "capacity": 2, "filters": []}
    if dispatcher.selector.name == "pulsar-sticky":
        for name, member in list(dispatcher.members.items()):
            if not member.connected:
                simulation.apply({"op": "remove_consumer", "consumer": name})
        free = [ranges for name, ranges in STICKY.items() if name not in dispatcher.members]
        if not free:
            simulation.settle()
            return simulation
        settler["ranges"] = [r for ranges in free for r in ranges]
    assert simulation.apply(settler) is not None
    simulation.settle()
    return simulation


def replay(config: dict[str, Any], steps: list[dict[str, Any]], store: Any = None) -> Simulation:
    simulation = Simulation(config, store)
    for step in steps:
        if step["op"] == "quiescent":
            simulation.apply_quiescent()
        else:
            assert simulation.apply(step) is not None, step
    return simulation


def judge(simulation: Simulation) -> list[str]:
    """The kit's checker on the run's trace: every anomaly and contradiction, by name and seq."""
    checker = check_events(simulation.events)
    found = [f"{a.name}@{a.seq}: {a.explanation.then}" for a in checker.anomalies]
    return found + [f"contradiction@{p.seq}: {p.message}" for p in checker.problems]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_runs_have_no_anomalies(data: st.DataObject) -> None:
    simulation = settle(drive(data))
    rules = SequenceRules()
    for event in simulation.events:
        assert (schema_problem(event) or rules.check(event)) is None, event
    assert judge(simulation) == []
    assert simulation.summary.quiescent


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_stats_gauges_agree_with_the_trace(data: st.DataObject) -> None:
    # req: KS-OBS-1, KS-OBS-2 (checked before settling, while work is in flight)
    simulation = drive(data)
    checker: Checker = check_events(simulation.events)
    stats = simulation.dispatcher.stats()
    assert {name: c["unacked"] for name, c in stats["consumers"].items()} == {
        name: len(inc.outstanding) for name, inc in checker.members.items()
    }
    assert {name: c["connected"] for name, c in stats["consumers"].items()} == {
        name: inc.connected for name, inc in checker.members.items()
    }
    if simulation.config.reliable:
        assert stats["cursor"] == checker.cursor()
        assert stats["persisted_cursor"] == checker.persisted_cursor
        read = simulation.dispatcher.read_position
        assert stats["window_used"] == sum(1 for o in checker.unresolved if o < read)
    else:
        assert "cursor" not in stats and "window_used" not in stats  # best-effort has neither
        # counters are totals since the last restart (spec section 16)
        restarts = [i for i, e in enumerate(simulation.events) if e["event"] == "restart"]
        since = simulation.events[restarts[-1] + 1 :] if restarts else simulation.events
        assert stats["dropped_total"] == dict(Counter(e["reason"] for e in since if e["event"] == "drop"))
    blocked = sorted({m.key for m in checker.messages if m.blocked and not m.resolved})
    assert stats["blocked_keys"] == blocked
    assert {s["key"] for s in stats["stuck_keys"] if s["reason"] == "blocked"} == set(blocked)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_the_sqlite_store_and_the_memory_store_give_the_same_trace(tmp_path: Path, data: st.DataObject) -> None:
    # req: KS-GEN-5; the durable store changes nothing observable, restarts included
    in_memory = settle(drive(data))
    path = tmp_path / f"store-{len(list(tmp_path.iterdir()))}.sqlite"
    store = SqliteStore(path)
    try:
        durable = replay(in_memory.config.as_dict(), in_memory.ops, store)
    finally:
        store.close()
    assert durable.events == in_memory.events


def test_a_restart_after_a_split_numbered_out_of_order_gives_the_same_trace_from_either_store(tmp_path: Path) -> None:
    """Found by the property above: a split whose lower child has the larger number (created first) came back from
    SQLite in number order and from memory in creation order, so the first restart assigned buckets in another
    order (KS-GEN-5). Both stores now give a restart the layout in segment-number order."""
    config = {"profile": "strict", "selector": "buckets", "window": 1, "bucket_budget": 1, "bucket_max": 8}
    simulation = Simulation(config, None)
    simulation.apply({"op": "add_consumer", "consumer": "c1", "capacity": 1, "filters": []})
    simulation.apply({"op": "publish", "key": "a", "offset": 0})
    simulation.apply({"op": "split", "segment": 0, "lower": 2, "upper": 1})
    for offset in range(1, 10):
        simulation.apply({"op": "publish", "key": "a", "offset": offset})
    simulation.apply({"op": "restart"})
    in_memory = settle(simulation)
    created = [e["segment"] for e in in_memory.events if e["event"] == "segment_created"]
    assert created == [0, 2, 1]  # the situation: creation order is not number order
    store = SqliteStore(tmp_path / "store.sqlite")
    try:
        durable = replay(in_memory.config.as_dict(), in_memory.ops, store)
    finally:
        store.close()
    assert durable.events == in_memory.events
