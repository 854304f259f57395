"""Buckets and segments (spec section 17), the best-effort variant (section 18), configuration (section 20)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ks_reference.config import Config, ConfigError
from ks_reference.core import Refusal
from ks_reference.filters import glob_match
from ks_reference.hashing import murmur3_32
from ks_reference.retries import backoff
from reference_support.harness import Harness


def _keys_in_bucket(bucket: int, buckets: int, count: int) -> list[str]:
    found = [f"k{i}" for i in range(10_000) if (murmur3_32(f"k{i}") & 0xFFFF) * buckets // 65536 == bucket]
    return found[:count]


# --- buckets ---


def test_publish_records_hash_segment_and_bucket() -> None:
    # req: KS-BKT-1
    h = Harness(selector="buckets", profile="owner", bucket_budget=4)
    h.d.publish("Order-3459134")
    publish = next(e for e in h.events if e["event"] == "publish")
    assert publish["hash"] == 3112179635 and publish["segment"] == 0
    assert publish["bucket"] == (3112179635 & 0xFFFF) * 4 // 65536
    assert h.events[1] == {
        "seq": 1, "tick": 0, "event": "segment_created", "segment": 0, "buckets": 4, "range_lo": 0, "range_hi": 65535,
    }  # fmt: skip


def test_a_moving_bucket_is_withheld_until_its_prior_owner_drains() -> None:
    # req: KS-BKT-3, KS-BKT-4, KS-BKT-7
    h = Harness(selector="buckets", profile="owner", bucket_budget=2)
    h.d.add_consumer("b", 5)
    key = _keys_in_bucket(0, 2, 1)[0]
    h.d.publish(key)
    assert h.deliveries() == [(0, "b", 1)]
    outcome = h.d.add_consumer("a", 5)  # sorted by name, a owns bucket 0 now
    assert {"event": "bucket_withheld", "segment": 0, "bucket": 0, "consumer": "a"} in outcome.events
    assert h.d.stats()["buckets_withheld"] == 1
    held = h.d.publish(key).events
    assert [(e["event"], e["reason"], e["consumer"]) for e in held] == [("held", "handoff", "a")]
    acked = h.d.ack("b", 0)
    assert [e["event"] for e in acked.events][:3] == ["ack", "bucket_assigned", "deliver"]
    assert acked.events[2]["consumer"] == "a"
    stats = h.d.stats()
    assert stats["buckets_withheld"] == 0 and stats["bucket_reassignments_total"] == 1
    assert h.anomalies() == []


def test_rollover_drains_the_sealed_predecessor_first() -> None:
    # req: KS-BKT-2, KS-BKT-5, KS-BKT-7
    h = Harness(selector="buckets", profile="strict", bucket_budget=1, bucket_max=8)
    h.d.add_consumer("c", 5)
    h.d.publish("k")
    with pytest.raises(Refusal):
        h.d.rollover(0, 1, 9)  # beyond bucket_max
    with pytest.raises(Refusal):
        h.d.rollover(0, 0, 2)  # the number is in use
    h.d.rollover(0, 1, 8)
    assert h.d.stats()["rollovers_total"] == 1 and h.d.stats()["drain_mode"] == 1
    other = next(f"x{i}" for i in range(100))  # any key: the successor covers the whole ring
    events = h.d.publish(other).events
    assert [(e["event"], e["reason"]) for e in events] == [("held", "predecessor")]
    h.d.ack("c", 0)
    assert h.deliveries()[-1] == (1, "c", 1)
    assert h.d.stats()["drain_mode"] == 0
    with pytest.raises(Refusal):
        h.d.rollover(0, 2, 4)  # a sealed segment cannot roll over again
    assert h.anomalies() == []


def test_split_halves_the_range_and_the_bucket_count() -> None:
    h = Harness(selector="buckets", profile="owner", bucket_budget=4)
    outcome = h.d.split(0, 1, 2)
    assert outcome.events == []
    created = [e for e in h.events if e["event"] == "segment_created"][1:]
    assert [(e["segment"], e["range_lo"], e["range_hi"], e["buckets"], e["predecessor"]) for e in created] == [
        (1, 0, 0x7FFF, 2, 0),
        (2, 0x8000, 0xFFFF, 2, 0),
    ]
    low, high = next(f"k{i}" for i in range(100) if murmur3_32(f"k{i}") >> 16 < 0x8000), "Order-3459134"
    h.d.publish(low)
    h.d.publish(high)
    segments = [e["segment"] for e in h.events if e["event"] == "publish"]
    assert segments == [1, 2]
    with pytest.raises(Refusal):
        h.d.split(1, 3, 3)


def test_a_reported_split_halves_the_unresolved_messages_and_a_merge_keeps_the_larger_n() -> None:
    # req: KS-BKT-11 (layout reported: the reference chooses the split point by load and the merged N itself)
    h = Harness(selector="buckets", profile="owner", bucket_budget=4, bucket_max=8, layout="reported")
    keys = [f"k{i}" for i in range(40)]
    highs = sorted(murmur3_32(key) >> 16 for key in keys)
    for key in keys:
        h.d.publish(key)  # nobody consumes: all 40 stay unresolved in segment 0
    outcome = h.d.split(0, 1, 2)
    middle = highs[19]  # the lower child ends at the slot holding the 20th of 40 messages
    assert middle != 0x7FFF
    assert outcome.segments == [
        {"segment": 1, "buckets": 2, "range_lo": 0, "range_hi": middle},
        {"segment": 2, "buckets": 2, "range_lo": middle + 1, "range_hi": 0xFFFF},
    ]
    h.d.rollover(1, 3, 3)
    merged = h.d.merge(3, 2, 4).segments
    assert merged == [{"segment": 4, "buckets": 3, "range_lo": 0, "range_hi": 0xFFFF}]  # max(3, 2), not min(5, 8)
    assert h.d.split(4, 5, 6).segments is not None  # the merged segment holds no message of its own: the midpoint
    assert [e["range_hi"] for e in h.events if e["event"] == "segment_created"][-2] == 0x7FFF
    assert h.anomalies() == []


def test_layout_needs_the_buckets_selector_and_is_recorded_only_when_reported() -> None:
    # req: KS-CFG-1
    with pytest.raises(ConfigError, match="layout"):
        Config.parse({"selector": "ring", "layout": "imposed"})
    with pytest.raises(ConfigError, match="layout"):
        Config.parse({"selector": "buckets", "layout": "chosen"})
    assert "layout" not in Config.parse({"selector": "buckets"}).as_dict()
    assert Config.parse({"selector": "buckets", "layout": "reported"}).as_dict()["layout"] == "reported"
    assert Harness(selector="buckets").d.split(0, 1, 2).segments is None  # imposed: nothing to report


def test_checkpoints_follow_the_durable_cursor_per_bucket() -> None:
    # req: KS-BKT-6
    h = Harness(selector="buckets", profile="owner", bucket_budget=2)
    h.d.add_consumer("c", 10)
    first, second = _keys_in_bucket(0, 2, 1)[0], _keys_in_bucket(1, 2, 1)[0]
    h.d.publish(first)
    h.d.publish(second)
    h.d.publish(first)
    h.d.ack("c", 1)  # bucket 1 done, but the cursor stays at 0: no durable progress yet
    assert [e for e in h.events if e["event"] == "checkpoint"] == []
    h.d.ack("c", 0)
    checkpoints = {(e["bucket"], e["cursor"]) for e in h.events if e["event"] == "checkpoint"}
    assert checkpoints == {(0, 2), (1, 2)}  # bucket 0 waits at offset 2; bucket 1 is past its last message
    assert h.anomalies() == []


def test_a_merge_joins_two_adjacent_segments_and_waits_for_both() -> None:
    # req: KS-BKT-5 (both predecessors), KS-GEN-4 (refusals change nothing)
    h = Harness(selector="buckets", profile="owner", bucket_budget=4, bucket_max=8)
    h.d.add_consumer("c", 10)
    h.d.split(0, 1, 2)
    low = next(f"k{i}" for i in range(100) if murmur3_32(f"k{i}") >> 16 < 0x8000)
    high = next(f"k{i}" for i in range(100) if murmur3_32(f"k{i}") >> 16 >= 0x8000)
    h.d.publish(low)
    h.d.publish(high)
    before = len(h.events)
    for lower, upper, successor in ((2, 1, 3), (1, 1, 3), (1, 2, 0), (1, 7, 3)):
        with pytest.raises(Refusal):
            h.d.merge(lower, upper, successor)  # not adjacent in that order, the same one, a used number, unknown
    assert len(h.events) == before
    h.d.rollover(1, 3, 7)  # the lower half now has 7 buckets; segment 1 is its predecessor
    with pytest.raises(Refusal):
        h.d.merge(1, 2, 4)  # segment 1 is sealed
    h.d.merge(3, 2, 4)
    created = [e for e in h.events if e["event"] == "segment_created"][-1]
    assert (created["range_lo"], created["range_hi"], created["buckets"]) == (0, 0xFFFF, 8)  # min(7 + 2, N_max)
    assert (created["predecessor"], created["second_predecessor"]) == (3, 2)
    assert [e["segment"] for e in h.events if e["event"] == "segment_sealed"] == [0, 1, 3, 2]
    for key in (low, high):
        events = h.d.publish(key).events
        assert [(e["event"], e["reason"]) for e in events] == [("held", "predecessor")]
    h.d.ack("c", 0)  # segment 1 (an ancestor through segment 3) drained, but segment 2 holds m1 of the range
    assert [d[0] for d in h.deliveries()] == [0, 1]
    h.d.ack("c", 1)
    assert [d[0] for d in h.deliveries()] == [0, 1, 2, 3]
    assert h.anomalies() == []


def test_a_merged_layout_survives_a_restart() -> None:
    h = Harness(selector="buckets", profile="owner", bucket_budget=2)
    h.d.split(0, 1, 2)
    h.d.merge(1, 2, 3)
    h.d.restart()  # the store keeps both predecessors
    layout = h.d.layout
    assert layout is not None and layout.segments[3].predecessors == (1, 2)
    assert [s.number for s in layout.segments.values() if not s.sealed] == [3]


@pytest.mark.parametrize("resume", [False, True])
def test_a_restart_resumes_each_bucket_from_its_checkpoint_only_with_checkpoint_resume(resume: bool) -> None:
    # req: KS-BKT-6, KS-BKT-9
    h = Harness(selector="buckets", profile="owner", bucket_budget=2, checkpoint_resume=resume)
    h.d.add_consumer("c", 10)
    first, second = _keys_in_bucket(0, 2, 1)[0], _keys_in_bucket(1, 2, 1)[0]
    h.d.publish(first)
    h.d.publish(second)
    h.d.ack("c", 1)  # bucket 1 is done; bucket 0's message holds the global cursor at 0
    checkpoints = {(e["bucket"], e["cursor"]) for e in h.events if e["event"] == "checkpoint"}
    assert checkpoints == ({(1, 2)} if resume else set())  # without it, checkpoints follow the persisted cursor
    h.d.restart()
    h.d.add_consumer("c", 10)
    again = [d[0] for d in h.deliveries()][2:]
    assert again == ([0] if resume else [0, 1])
    for offset in again:
        h.d.ack("c", offset)
    assert h.d.stats()["cursor"] == 2
    assert h.anomalies() == []


def test_checkpoint_resume_is_a_bucket_field_refused_under_best_effort() -> None:
    # req: KS-CFG-1
    with pytest.raises(ConfigError, match="checkpoint_resume"):
        Config.parse({"checkpoint_resume": True})
    with pytest.raises(ConfigError, match="checkpoint_resume"):
        Config.parse({"profile": "best-effort", "selector": "buckets", "checkpoint_resume": True})
    with pytest.raises(ConfigError, match="checkpoint_resume"):
        Config.parse({"selector": "buckets", "checkpoint_resume": 1})


# --- best-effort ---


def test_best_effort_decides_each_message_at_publish() -> None:
    # req: KS-BEF-1, KS-BEF-2
    h = Harness(profile="best-effort", evict_after=0)
    assert h.publish("k")[0] == {"event": "drop", "offset": 0, "key": "k", "reason": "no-consumer"}
    h.d.add_consumer("c", 1)
    assert h.publish("k")[0]["event"] == "deliver"
    assert h.publish("k")[0]["reason"] == "saturated"
    assert h.d.ack("c", 1).events == [{"event": "ack", "offset": 1, "key": "k", "consumer": "c"}]
    assert h.publish("k")[0]["event"] == "deliver"
    assert h.d.nack("c", 3).events[0]["event"] == "nack_ignored"
    h.d.disconnect("c")
    assert h.publish("k")[0]["reason"] == "inactive"
    for _ in range(20):
        assert h.d.tick().events == []  # no timeouts, retries or cursor
    stats = h.d.stats()
    assert stats["dropped_total"] == {"inactive": 1, "no-consumer": 1, "saturated": 1}
    assert stats["delivered_total"] == 2
    assert h.anomalies() == []


def test_best_effort_filters_keys_nobody_accepts() -> None:
    h = Harness(profile="best-effort")
    h.d.add_consumer("eu", 5, filters=["eu-*"])
    assert h.publish("us-1")[0]["event"] == "filter"
    assert h.publish("eu-1")[0]["event"] == "deliver"


# --- configuration ---


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"window": 0}, "window"),
        ({"points": 0}, "points"),
        ({"selector": "consistent"}, "selector"),
        ({"profile": "lenient"}, "profile"),
        ({"poison_policy": "ignore"}, "poison_policy"),
        ({"ack_timeout": -1}, "ack_timeout"),
        ({"evict_after": 1.5}, "evict_after"),
        ({"max_redeliveries": True}, "max_redeliveries"),
        ({"backoff_base": 9, "backoff_max": 3}, "backoff_base"),
        ({"bucket_max": 8}, "bucket_max"),
        ({"selector": "buckets", "bucket_budget": 9, "bucket_max": 8}, "bucket_budget"),
        ({"persist_ack_holes": "yes"}, "persist_ack_holes"),
        ({"shards": 3}, "shards"),
        ({"park_after": -1}, "park_after"),
        ({"profile": "best-effort", "park_after": 2}, "park_after"),
        ({"returns_as_failures": 1}, "returns_as_failures"),
        ({"profile": "best-effort", "returns_as_failures": True}, "returns_as_failures"),
        ({"read_trigger": "lazily"}, "read_trigger"),
        ({"profile": "best-effort", "read_trigger": "heartbeat"}, "read_trigger"),
        ({"timer_slack": -1}, "timer_slack"),
        ({"timer_slack": 1.5}, "timer_slack"),
    ],
)
def test_nonsense_configurations_are_refused_naming_the_field(raw: dict[str, object], field: str) -> None:
    # req: KS-CFG-1
    with pytest.raises(ConfigError) as refused:
        Config.parse(raw)
    assert refused.value.field == field and f"'{field}'" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_defaults_are_the_spec_defaults() -> None:
    assert Config.parse({}).as_dict() == {
        "profile": "strict", "selector": "ring", "points": 100, "window": 10000, "ack_timeout": 0,
        "max_redeliveries": 5, "backoff_base": 1, "backoff_max": 60, "poison_policy": "block", "evict_after": 6,
        "persist_interval": 0, "persist_ack_holes": False, "drain_granularity": "key", "tick_order": "standard",
        "flow_control": "capacity", "read_bound": "window", "park_after": 0,
    }  # fmt: skip
    assert Config.parse({"returns_as_failures": True}).as_dict()["returns_as_failures"] is True
    heartbeat = Config.parse({"read_trigger": "heartbeat", "timer_slack": 2}).as_dict()
    assert (heartbeat["read_trigger"], heartbeat["timer_slack"]) == ("heartbeat", 2)  # recorded when set
    lookahead = Config.parse({"read_bound": "lookahead"}).as_dict()
    assert (lookahead["lookahead_per_consumer"], lookahead["lookahead_per_subscription"]) == (0, 10000)
    buckets = Config.parse({"selector": "buckets"}).as_dict()
    assert (buckets["bucket_budget"], buckets["bucket_assignment"]) == (4, "sorted")


# --- pure helpers, against independent oracles ---


def oracle_glob(pattern: str, key: str) -> bool:
    """The glob of spec section 5 by dynamic programming: a different algorithm from the reference's and the regex."""
    matches = [True] + [False] * len(key)
    for char in pattern:
        if char == "*":
            for i in range(1, len(key) + 1):
                matches[i] = matches[i] or matches[i - 1]
        else:
            matches = [False] + [matches[i] and (char == "?" or char == key[i]) for i in range(len(key))]
    return matches[len(key)]


@given(st.text("ab*?[]\\", max_size=8), st.text("ab[]*?\\", max_size=10))
def test_glob_agrees_with_a_regex_and_with_a_second_algorithm(pattern: str, key: str) -> None:
    # req: KS-FLT-1
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    expected = re.fullmatch(regex, key, re.DOTALL) is not None
    assert glob_match(pattern, key) == expected == oracle_glob(pattern, key)


def test_glob_examples_of_the_spec() -> None:
    assert glob_match("eu-west-?", "eu-west-1") and not glob_match("eu-west-?", "eu-west-12")
    assert glob_match("ship*", "ship")
    assert glob_match("a[1]", "a[1]") and not glob_match("a[1]", "a1")
    assert glob_match("*", "key*with*stars") and glob_match("key\\*", "key\\*")


@given(st.integers(1, 200), st.integers(0, 50), st.integers(0, 50))
def test_backoff_doubles_and_caps(failures: int, base: int, extra: int) -> None:
    cap = base + extra
    assert backoff(failures, base, cap) == min(base * 2 ** (failures - 1), cap)


# --- batches (spec section 17, KS-BKT-10) ---


def _batch(h: Harness, keys: list[str]) -> Any:
    lows = [murmur3_32(key) & 0xFFFF for key in keys]
    return h.d.publish_entry(keys, min(lows), max(lows))


def test_a_batch_is_refused_outside_one_bucket_or_with_a_wrong_range_or_form() -> None:
    # req: KS-GEN-4 (refusals change nothing), KS-BKT-10
    h = Harness(selector="buckets", profile="owner", bucket_budget=2)
    low, high = _keys_in_bucket(0, 2, 1)[0], _keys_in_bucket(1, 2, 1)[0]
    before = len(h.events)
    for keys, hash_min, hash_max in (([], 0, 0), ([low, high], 0, 0xFFFF), ([low], 0, 0xFFFF), (["x", 3], 0, 0)):
        with pytest.raises(Refusal):
            h.d.publish_entry(keys, hash_min, hash_max)
    assert len(h.events) == before
    for config in ({"profile": "strict"}, {"park_after": 1}):
        other = Harness(selector="buckets", bucket_budget=2, **{"profile": "owner", **config})
        with pytest.raises(Refusal, match="publish_entry"):
            _batch(other, [low])
    for config in ({"flow_control": "permits"}, {"read_bound": "lookahead", "lookahead_per_consumer": 1}):
        accepted = Harness(selector="buckets", bucket_budget=2, profile="owner", **config)  # since spec 1.7
        _batch(accepted, [low, low])
        assert [e["entry"] for e in accepted.events if e["event"] == "publish"] == [0, 0]


def test_a_batch_goes_whole_to_its_bucket_owner_past_the_capacity() -> None:
    # req: KS-BKT-10, KS-FLW-1 (the batch follows its first message)
    h = Harness(selector="buckets", profile="owner", bucket_budget=2, window=2)
    keys = _keys_in_bucket(0, 2, 3)
    h.d.add_consumer("c", 1)
    outcome = _batch(h, keys)
    assert [e["entry"] for e in h.events if e["event"] == "publish"] == [0, 0, 0]
    assert outcome.placements is not None and len(outcome.placements) == 3
    assert h.deliveries() == [(0, "c", 1), (1, "c", 1), (2, "c", 1)]  # capacity 1 and window 2: the batch is whole
    h.d.publish(keys[0])
    assert h.deliveries()[3:] == []  # a message outside the batch finds the consumer full
    for offset in range(3):
        h.d.ack("c", offset)
    assert h.deliveries()[3:] == [(3, "c", 1)]
    assert h.anomalies() == []


def test_a_batch_waits_for_a_retry_of_one_of_its_keys() -> None:
    # req: KS-BKT-10, KS-ORD-3
    h = Harness(selector="buckets", profile="owner", bucket_budget=1, backoff_base=2, backoff_max=2)
    first, second = _keys_in_bucket(0, 1, 2)
    h.d.add_consumer("c", 10)
    h.d.publish(second)
    h.d.nack("c", 0)  # m0 of `second` awaits its redelivery for two ticks
    _batch(h, [first, second])
    assert [d[0] for d in h.deliveries()] == [0]  # m1 could go, but m2 waits behind m0: the batch waits whole
    h.d.tick()
    h.d.tick()
    assert [d[0] for d in h.deliveries()] == [0, 0, 1, 2]
    assert h.anomalies() == []


def test_a_restart_delivers_what_is_left_of_a_batch_whole() -> None:
    # req: KS-BKT-10, KS-CUR-3
    h = Harness(selector="buckets", profile="owner", bucket_budget=1, persist_ack_holes=True)
    keys = _keys_in_bucket(0, 1, 3)
    h.d.add_consumer("c", 10)
    _batch(h, keys)
    h.d.ack("c", 1)  # a hole: after the restart m0 and m2 come again, together
    h.d.restart()
    h.d.add_consumer("c", 10)
    assert h.deliveries()[3:] == [(0, "c", 1), (2, "c", 1)]
    assert h.anomalies() == []


# --- key-based batches outside buckets (spec section 17, PIP-34) ---


@pytest.mark.parametrize("selector", ["ring", "pulsar-consistent", "pulsar-auto-split", "danube", "any", "partitions"])
def test_a_key_batch_goes_whole_to_its_key_s_consumer_under_every_selector(selector: str) -> None:
    # req: KS-BKT-10, KS-FLW-1, KS-FLW-2 (a key-based batch follows its first message past capacity and window)
    h = Harness(selector=selector, profile="owner", window=2)
    h.d.add_consumer("c1", 1)
    h.d.add_consumer("c2", 1)
    outcome = _batch(h, ["k", "k", "k"])
    assert outcome.placements is None
    assert [(e["offset"], e["entry"]) for e in h.events if e["event"] == "publish"] == [(0, 0), (1, 0), (2, 0)]
    deliveries = h.deliveries()
    assert [d[0] for d in deliveries] == [0, 1, 2] and len({d[1] for d in deliveries}) == 1
    assert h.anomalies() == []


def test_a_key_batch_mixing_keys_or_with_another_range_is_refused_outside_buckets() -> None:
    # req: KS-GEN-4 (refusals change nothing)
    h = Harness(selector="ring", profile="owner")
    low = murmur3_32("k") & 0xFFFF
    before = len(h.events)
    for keys, hash_min, hash_max in ((["k", "j"], low, low), (["k", "k"], 0, 0xFFFF), ([], 0, 0)):
        with pytest.raises(Refusal):
            h.d.publish_entry(keys, hash_min, hash_max)
    assert len(h.events) == before
    for config in ({"profile": "strict"}, {"park_after": 1}):
        other = Harness(selector="ring", **{"profile": "owner", **config})
        with pytest.raises(Refusal, match="publish_entry"):
            _batch(other, ["k", "k"])


def test_a_key_batch_needs_one_permit_and_is_charged_whole() -> None:
    # req: KS-FLW-4, KS-BKT-10 (the first message needs a permit; the batch takes the consumer's permits below zero)
    h = Harness(selector="ring", profile="owner", flow_control="permits")
    h.d.add_consumer("c", 1)
    _batch(h, ["k", "k", "k"])
    assert [d[0] for d in h.deliveries()] == [0, 1, 2]
    h.d.publish("k")
    h.d.flow("c", 2)  # permits -2 + 2 = 0: still none
    assert [d[0] for d in h.deliveries()] == [0, 1, 2]
    h.d.flow("c", 1)
    assert [d[0] for d in h.deliveries()] == [0, 1, 2, 3]
    assert h.anomalies() == []


def test_a_key_batch_is_read_whole_under_the_look_ahead() -> None:
    # req: KS-FLW-5, KS-ISO-3, KS-BKT-10 (reading may overshoot the limit by the rest of a batch)
    h = Harness(selector="ring", profile="owner", read_bound="lookahead", lookahead_per_consumer=1)
    h.d.add_consumer("c", 1)
    h.d.publish("a")  # outstanding at c, which is then full
    _batch(h, ["b", "b", "b"])  # L = 1: the batch's first message is read, the rest with it
    h.d.publish("d")
    assert [d[0] for d in h.deliveries()] == [0]
    h.d.ack("c", 0)
    assert [d[0] for d in h.deliveries()] == [0, 1, 2, 3]
    assert h.anomalies() == []


def test_a_key_batch_is_not_held_back_by_a_delayed_message_of_its_key() -> None:
    # req: KS-ORD-6, KS-BKT-10
    h = Harness(selector="ring", profile="owner")
    h.d.add_consumer("c", 10)
    h.d.publish_delayed("k", 5)
    _batch(h, ["k", "k"])
    assert [d[0] for d in h.deliveries()] == [1, 2]
    assert h.anomalies() == []


def test_a_restart_delivers_what_is_left_of_a_key_batch_whole() -> None:
    # req: KS-BKT-10, KS-CUR-3 (the store keeps each message's batch outside buckets too)
    h = Harness(selector="pulsar-consistent", profile="owner", persist_ack_holes=True)
    h.d.add_consumer("c", 10)
    _batch(h, ["k", "k", "k"])
    h.d.ack("c", 1)  # a hole: after the restart m0 and m2 come again, together
    h.d.restart()
    h.d.add_consumer("c", 1)
    assert h.deliveries()[3:] == [(0, "c", 1), (2, "c", 1)]  # past the capacity of 1: the batch follows its first
    assert h.anomalies() == []
