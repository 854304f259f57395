"""The reference's in-process adapter speaks spec/adapter-protocol.md v1."""

from __future__ import annotations

from typing import Any

import pytest
from ks_reference.adapter import CAPABILITIES, create
from ks_spec.trace import event_kinds, schema_problem

EFFECTS = {"deliver", "held", "ack", "ack_ignored", "nack", "nack_ignored", "timeout", "drop", "dead_letter"}


@pytest.fixture
def adapter() -> Any:
    made = create()
    yield made
    made.stop()


def _well_formed_effects(events: list[dict[str, Any]]) -> None:
    for event in events:
        assert "seq" not in event and "tick" not in event
        assert event["event"] in event_kinds()
        assert schema_problem({"seq": 0, "tick": 0, **event}) is None, event


def test_start_declares_every_op_and_capability(adapter: Any) -> None:
    started = adapter.start()
    assert started["version"] == 2  # adapter protocol v2 (the kit still drives v1 adapters)
    assert started["implementation"]["name"] == "keyshared-reference"
    assert set(started["capabilities"]["ops"]) == {
        "publish", "add_consumer", "remove_consumer", "disconnect", "reconnect", "flow", "ack", "nack", "zombie_ack",
        "zombie_nack", "extend", "tick", "release", "skip", "restart", "seek", "rollover", "split", "merge",
        "publish_entry", "publish_delayed",
    }  # fmt: skip
    assert started["capabilities"] is CAPABILITIES


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"window": 0}, "window"),
        ({"selector": "nope"}, "selector"),
        ({"bucket_budget": 8}, "bucket_budget"),
        ({"backoff_base": 10, "backoff_max": 5}, "backoff_base"),
        ({"colour": "blue"}, "colour"),
        ({"ack_timeout": -1}, "ack_timeout"),
        ({"persist_ack_holes": 1}, "persist_ack_holes"),
    ],
)
def test_reset_refuses_nonsense_naming_the_field(adapter: Any, config: dict[str, Any], field: str) -> None:
    response = adapter.reset(config)
    assert response["ok"] is False
    assert response["error"]["code"] == "invalid_config"
    assert response["error"]["field"] == field
    assert field in response["error"]["message"]


def test_ops_return_effects_only_and_refusals_change_nothing(adapter: Any) -> None:
    assert adapter.reset({"profile": "strict", "window": 8}) == {"ok": True, "events": []}
    assert adapter.op({"op": "add_consumer", "consumer": "c1", "capacity": 4, "filters": []}) == {
        "ok": True,
        "events": [],
    }
    published = adapter.op({"op": "publish", "offset": 0, "key": "k1"})
    assert published["events"] == [{"event": "deliver", "offset": 0, "key": "k1", "consumer": "c1", "attempt": 1}]
    before = adapter.stats()["stats"]
    refused = adapter.op({"op": "ack", "consumer": "c9", "offset": 0})
    assert refused["ok"] is False and refused["error"]["code"] == "unknown_consumer"
    assert adapter.op({"op": "publish", "offset": 5, "key": "k"})["error"]["code"] == "invalid_argument"
    assert adapter.op({"op": "add_consumer", "consumer": "c1", "capacity": 1})["error"]["code"] == "duplicate_consumer"
    assert adapter.op({"op": "release", "key": "k1"})["error"]["code"] == "not_blocked"
    assert adapter.op({"op": "rollover", "segment": 0, "successor": 1, "buckets": 2})["error"]["code"] == (
        "invalid_argument"
    )
    assert adapter.stats()["stats"] == before
    acked = adapter.op({"op": "ack", "consumer": "c1", "offset": 0})
    assert [e["event"] for e in acked["events"]] == ["ack", "cursor_persisted"]
    _well_formed_effects(acked["events"])


def test_buckets_publish_reports_its_placement(adapter: Any) -> None:
    adapter.reset({"selector": "buckets", "profile": "owner"})
    adapter.op({"op": "add_consumer", "consumer": "a", "capacity": 2, "filters": []})
    response = adapter.op({"op": "publish", "offset": 0, "key": "Order-3459134"})
    # murmur3("Order-3459134") = 3112179635 (compat.md); one segment covers the ring; N = T = 4
    assert response["placement"] == {"hash": 3112179635, "segment": 0, "bucket": (3112179635 & 0xFFFF) * 4 // 65536}


def test_replay_gives_one_response_per_op(adapter: Any) -> None:
    ops = [
        {"op": "add_consumer", "consumer": "c1", "capacity": 1, "filters": []},
        {"op": "publish", "offset": 0, "key": "k"},
        {"op": "publish", "offset": 1, "key": "j"},
        {"op": "nack", "consumer": "c1", "offset": 0},
        {"op": "tick"},
    ]
    replayed = adapter.replay({"profile": "owner"}, ops)
    assert replayed["ok"] is True and len(replayed["results"]) == len(ops)
    again = create()
    try:
        again.reset({"profile": "owner"})
        assert [again.op(op) for op in ops] == replayed["results"]  # KS-GEN-5: same ops, same events
    finally:
        again.stop()
    for result in replayed["results"]:
        _well_formed_effects(result["events"])
