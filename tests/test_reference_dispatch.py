"""The reference dispatcher, requirement by requirement (spec sections 3 to 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ks_conformance.checker import check_events
from ks_reference.config import ConfigError
from ks_reference.core import Refusal
from ks_reference.dispatcher import Outcome
from ks_reference.store import SqliteStore
from reference_support.harness import Harness


def _one_consumer(profile: str = "strict", capacity: int = 10, **config: object) -> Harness:
    h = Harness(profile=profile, **config)
    h.d.add_consumer("c1", capacity)
    return h


# --- section 3: operations and refusals ---


def test_refusals_change_nothing_and_emit_nothing() -> None:
    # req: KS-GEN-4
    h = _one_consumer()
    h.publish("k")
    before, events = h.d.stats(), len(h.events)
    for call, code in [
        (lambda: h.d.ack("nobody", 0), "unknown_consumer"),
        (lambda: h.d.add_consumer("c1", 1), "duplicate_consumer"),
        (lambda: h.d.add_consumer("c2", 0), "invalid_argument"),
        (lambda: h.d.publish("k", offset=7), "invalid_argument"),
        (lambda: h.d.release("k"), "not_blocked"),
        (lambda: h.d.skip("k"), "not_blocked"),
        (lambda: h.d.remove_consumer("ghost"), "unknown_consumer"),
        (lambda: h.d.disconnect("ghost"), "unknown_consumer"),
        (lambda: h.d.ack("c1", -1), "invalid_argument"),
        (lambda: h.d.rollover(0, 1, 2), "invalid_argument"),
        (lambda: h.d.publish("\ud800"), "invalid_argument"),
        (lambda: h.d.apply({"op": "frobnicate"}), "invalid_argument"),
        (lambda: h.d.apply({"op": "ack", "consumer": "c1"}), "invalid_argument"),
    ]:
        with pytest.raises(Refusal) as refused:
            call()
        assert refused.value.code == code
    assert h.d.stats() == before and len(h.events) == events


def test_every_operation_ends_with_a_dispatch_pass() -> None:
    # req: KS-GEN-6: a consumer joining receives the backlog within the join itself
    h = Harness()
    h.publish("a", "b", "c")
    assert h.deliveries() == []
    outcome = h.d.add_consumer("c1", 5)
    assert [(e["offset"], e["event"]) for e in outcome.events] == [(0, "deliver"), (1, "deliver"), (2, "deliver")]


def test_tick_phases_run_in_order() -> None:
    # req: KS-GEN-7, spec example: ack_timeout 2, max_redeliveries 0, drop
    h = _one_consumer(ack_timeout=2, max_redeliveries=0, poison_policy="drop", persist_interval=1)
    for _ in range(5):
        h.d.tick()
    h.publish("k", "k")
    assert h.deliveries() == [(0, "c1", 1)]
    h.d.tick()
    outcome = h.d.tick()  # tick 7: timeout (1), drop (2), deliver (5), persist (6)
    assert h.d.now == 7
    assert h.kinds(outcome) == ["timeout", "drop", "deliver", "cursor_persisted"]
    assert outcome.events[1]["reason"] == "poison" and outcome.events[2]["offset"] == 1
    assert h.anomalies() == []


@pytest.mark.parametrize("order", ["standard", "danube"])
def test_danube_tick_order_redelivers_before_it_evicts(order: str) -> None:
    # req: KS-GEN-7 (tick_order danube: phase 3 ends with a deliver step, before phase 4's eviction)
    h = Harness(tick_order=order, backoff_base=1, evict_after=1)
    h.d.add_consumer("c1", 5)
    h.d.add_consumer("c2", 5)
    holder = h.publish("k")[0]["consumer"]
    other = "c2" if holder == "c1" else "c1"
    h.d.nack(holder, 0)
    h.d.disconnect(other)
    kinds = h.kinds(h.d.tick())
    expected = ["deliver", "consumer_evicted"] if order == "danube" else ["consumer_evicted", "deliver"]
    assert [kind for kind in kinds if kind in expected] == expected
    assert h.anomalies() == []


def test_heartbeat_reads_leave_a_freed_place_to_the_next_tick() -> None:
    # req: KS-GEN-8 (only a tick's pass reads; the other ops deliver what is already read)
    h = Harness(window=1, read_trigger="heartbeat")
    h.d.add_consumer("c1", 5)
    h.publish("a", "b")
    assert h.deliveries() == []  # nothing read before the heartbeat
    h.d.tick()
    assert h.deliveries() == [(0, "c1", 1)]
    freed = h.mark()
    h.d.ack("c1", 0)  # the window has room again, but the log is read at the heartbeat
    assert h.deliveries(freed) == []
    h.d.tick()
    assert h.deliveries(freed) == [(1, "c1", 1)]
    assert h.anomalies() == []


def test_heartbeat_reads_still_deliver_what_was_read_at_once() -> None:
    # req: KS-GEN-8 (a message read and held for capacity goes out with the ack that frees its consumer)
    h = Harness(window=2, read_trigger="heartbeat", selector="any")
    h.d.add_consumer("c1", 1)
    h.publish("a", "b")
    h.d.tick()
    assert h.deliveries() == [(0, "c1", 1)]
    freed = h.mark()
    h.d.ack("c1", 0)
    assert h.deliveries(freed) == [(1, "c1", 1)]
    assert h.anomalies() == []


@pytest.mark.parametrize("slack", [0, 1, 2])
def test_timers_fire_at_the_heartbeat_within_the_slack(slack: int) -> None:
    # req: KS-GEN-9 (timeouts at every (slack + 1)-th tick: never before they are due, at most `slack` ticks after)
    h = Harness(ack_timeout=1, timer_slack=slack)
    h.d.add_consumer("c1", 5)
    h.publish("k")
    fired = next(tick for tick in range(1, 10) if "timeout" in h.kinds(h.d.tick()))
    assert 1 <= fired <= 1 + slack
    assert fired % (slack + 1) == 0
    assert h.anomalies() == []


def test_members_may_share_a_hash_name_under_pulsar_consistent_and_get_their_own_name_index() -> None:
    # req: KS-ASN-5 (Pulsar's consumer names need not be unique: the points hash the shared name with the smallest
    # free name index), KS-GEN-4 (a hash name under a selector that hashes none is refused)
    from ks_reference.selectors import PulsarConsistentSelector

    h = Harness(profile="owner", selector="pulsar-consistent", points=8)
    h.d.add_consumer("c1", 5, hash_name="x")
    h.d.add_consumer("c2", 5, hash_name="x")
    expected = PulsarConsistentSelector(8, names={"c1": "x", "c2": "x"})
    expected.add("c1")
    expected.add("c2")
    assert h.d.selector.ranges() == expected.ranges()
    assert h.d.selector.ranges()["c1"] != h.d.selector.ranges()["c2"]
    assert [e.get("hash_name") for e in h.events if e["event"] == "consumer_added"] == ["x", "x"]
    h.d.remove_consumer("c1")
    h.d.add_consumer("c3", 5, hash_name="x")  # takes the free index 0 back: c1's points
    assert h.d.selector.ranges()["c3"] == expected.ranges()["c1"]
    with pytest.raises(Refusal) as refused:
        Harness(selector="ring").d.add_consumer("c1", 5, hash_name="x")
    assert refused.value.code == "invalid_argument"


def _persisted(events: list[dict[str, object]]) -> list[tuple[int, int]]:
    return [(int(str(e["tick"])), int(str(e["cursor"]))) for e in events if e["event"] == "cursor_persisted"]


@pytest.mark.parametrize("flush", [0, 2])
def test_a_cursor_written_on_its_advance_waits_for_the_next_move_or_the_flush(flush: int) -> None:
    # req: KS-CUR-12 (persist_trigger advance: written on a move once the interval has passed since the last write,
    # a move within it waits for the next move or, with persist_flush, for the next tick that is a multiple of it)
    h = Harness(persist_trigger="advance", persist_interval=3, persist_flush=flush)
    h.d.add_consumer("c1", 5)
    h.publish("k")
    h.publish("k")
    h.d.ack("c1", 0)
    h.d.ack("c1", 1)
    for _ in range(3):
        h.d.tick()
    written = [(0, 1)] + ([(2, 2)] if flush else [])
    assert _persisted(h.events) == written
    h.publish("k")
    h.d.ack("c1", 2)  # at tick 3: 3 ticks after the first write, 1 after the flush's
    h.d.tick()
    assert _persisted(h.events) == [*written, (4, 3) if flush else (3, 3)]
    assert h.anomalies() == []


def _slot_mates_moving_to(joiner: str) -> tuple[str, str]:
    """Two keys of one pulsar-consistent slot whose target moves from c1 to `joiner` when it joins."""
    from ks_reference.selectors import make_selector
    from ks_spec.slots import slot_of

    selector = make_selector("pulsar-consistent", 100, 4)
    selector.add("c1")
    selector.add(joiner)
    first_of_slot: dict[int, str] = {}
    for i in range(10_000):
        key = f"k{i}"
        slot = slot_of("pulsar-consistent", key)
        mate = first_of_slot.setdefault(slot, key)
        if mate != key and selector.target(key, None) == joiner:
            return mate, key
    raise AssertionError("no colliding pair found")


@pytest.mark.parametrize("granularity", ["key", "hash"])
def test_hash_granularity_draining_holds_slot_mates(granularity: str) -> None:
    # req: KS-DRN-3 (PIP-379: a key waits while a key of its slot drains at its old owner)
    mate, key = _slot_mates_moving_to("c2")
    h = Harness(profile="owner", selector="pulsar-consistent", drain_granularity=granularity)
    h.d.add_consumer("c1", 5)
    h.publish(mate)
    h.d.add_consumer("c2", 5)  # the slot moves to c2 while c1 still holds the mate's message
    effects = h.publish(key)
    if granularity == "hash":
        assert [(e["event"], e.get("reason"), e.get("consumer")) for e in effects] == [("held", "draining", "c2")]
        assert h.deliveries() == [(0, "c1", 1)]
        h.d.ack("c1", 0)  # the slot drained: the held key goes within the ack's own dispatch pass (KS-DRN-2)
    assert h.deliveries() == [(0, "c1", 1), (1, "c2", 1)]
    assert h.anomalies() == []


def test_hash_granularity_draining_needs_a_slot_selector() -> None:
    # req: KS-CFG-1
    with pytest.raises(ConfigError, match="drain_granularity"):
        Harness(selector="ring", drain_granularity="hash")


def test_a_reconnected_member_keeps_what_it_holds() -> None:
    # req: KS-MEM-4 (connected again with its deliveries; no eviction unless it disconnects again)
    h = Harness(evict_after=2)
    h.d.add_consumer("c1", 5)
    h.publish("k")
    h.d.disconnect("c1")
    h.d.tick()
    h.publish("j")  # held: its target is inactive
    outcome = h.d.reconnect("c1")
    assert [(e["event"], e["offset"]) for e in outcome.events] == [("deliver", 1)]
    for _ in range(3):
        assert "consumer_evicted" not in h.kinds(h.d.tick())
    h.d.disconnect("c1")
    assert "consumer_evicted" not in h.kinds(h.d.tick())
    assert "consumer_evicted" in h.kinds(h.d.tick())  # a new clock: evict_after ticks after the new disconnection
    assert h.anomalies() == []


def test_reconnect_names_a_member() -> None:
    # req: KS-GEN-4
    h = _one_consumer()
    with pytest.raises(Refusal) as refused:
        h.d.reconnect("ghost")
    assert refused.value.code == "unknown_consumer"
    assert h.kinds(h.d.reconnect("c1")) == []  # a connected member's reconnect changes nothing


def test_a_zombie_result_is_ignored_whoever_holds_the_message_now() -> None:
    # req: KS-ACK-3 (an ended delivery's late ack or nack: recorded, nothing else, even under a reused name)
    h = Harness(profile="owner")
    h.d.add_consumer("c1", 5)
    h.publish("k")
    h.d.remove_consumer("c1")
    h.d.add_consumer("c1", 5)  # the name joins again and gets the message, attempt 2
    for op in ("zombie_ack", "zombie_nack"):
        outcome = h.d.zombie_result(op, "c1", 0, 1)
        ignored = op.replace("zombie_", "") + "_ignored"
        assert [(e["event"], e["reason"]) for e in outcome.events] == [(ignored, "ended")]
    assert h.d.stats()["consumers"]["c1"]["unacked"] == 1
    assert h.kinds(h.d.ack("c1", 0)) == ["ack", "cursor_persisted"]
    assert h.anomalies() == []


def test_a_zombie_ack_under_ack_by_id_resolves_the_message_once() -> None:
    # req: KS-ACK-3 (ack_by_id: the ack names the message; the holder's own ack is then ignored as resolved)
    h = Harness(profile="owner", ack_by_id=True)
    h.d.add_consumer("c1", 5)
    h.d.add_consumer("c2", 5)
    h.publish("k")
    holder = h.deliveries()[0][1]
    other = "c2" if holder == "c1" else "c1"
    h.d.remove_consumer(holder)
    assert h.kinds(h.d.zombie_result("zombie_nack", holder, 0, 1)) == ["nack_ignored"]
    assert h.kinds(h.d.zombie_result("zombie_ack", holder, 0, 1))[0] == "ack"
    assert [(e["event"], e["reason"]) for e in h.d.ack(other, 0).events] == [("ack_ignored", "resolved")]
    assert h.anomalies() == []


def test_a_zombie_op_naming_no_ended_delivery_is_refused() -> None:
    # req: KS-GEN-4 (outside the op's domain: invalid_argument; never unknown_consumer)
    h = _one_consumer(profile="owner")
    h.publish("k")
    # the outstanding delivery; an offset never published; attempt 0; a delivery never made to that name
    for consumer, offset, attempt in (("c1", 0, 1), ("c1", 1, 1), ("c1", 0, 0), ("gone", 0, 1), ("c1", 0, 2)):
        with pytest.raises(Refusal) as refused:
            h.d.zombie_result("zombie_ack", consumer, offset, attempt)
        assert refused.value.code == "invalid_argument"
    h.d.remove_consumer("c1")
    assert h.kinds(h.d.zombie_result("zombie_ack", "c1", 0, 1)) == ["ack_ignored"]


# --- section 14, seek ---


def _acked(h: Harness, *keys: str) -> None:
    """Publish `keys` and ack every delivery they cause, and those the acks cause."""
    events = h.publish(*keys)
    while events:
        event = events.pop(0)
        if event["event"] == "deliver":
            events += h.d.ack(event["consumer"], event["offset"]).events


@pytest.mark.parametrize("profile", ["strict", "owner"])
def test_a_backwards_seek_replays_acked_messages_in_key_order_with_fresh_attempts(profile: str) -> None:
    # req: KS-CUR-8 (at and after the target everything is delivered again, acknowledged or not), KS-RTY-5
    h = _one_consumer(profile=profile, persist_interval=3)
    _acked(h, "a", "b", "a", "c")
    h.d.tick()
    h.d.tick()
    h.d.tick()
    assert h.d.stats()["persisted_cursor"] == 4
    mark = h.mark()
    outcome = h.d.seek(1)
    assert h.kinds(outcome)[:2] == ["cursor_persisted", "deliver"]
    assert outcome.events[0]["cursor"] == 1  # persisted within the op, backwards, whatever persist_interval says
    assert sorted(offset for offset, _, attempt in h.deliveries(mark) if attempt == 1) == [1, 2, 3]
    assert h.d.stats()["persisted_cursor"] == 1
    assert h.anomalies() == []


def test_a_forwards_seek_gives_up_what_is_below_it() -> None:
    # req: KS-CUR-9 (below the target: resolved as seeked, never delivered again), KS-CUR-8 (the cut delivery ends)
    h = _one_consumer(profile="owner", capacity=1)
    h.publish("a", "b", "c")
    assert h.deliveries() == [(0, "c1", 1)]
    mark = h.mark()
    h.d.seek(2)
    assert h.deliveries(mark) == [(2, "c1", 1)]
    assert [(e["event"], e["reason"]) for e in h.d.ack("c1", 0).events] == [("ack_ignored", "resolved")]
    h.d.ack("c1", 2)
    assert h.d.stats()["persisted_cursor"] == 3
    assert h.anomalies() == []


def test_an_ack_of_a_delivery_the_seek_ended_changes_nothing_even_by_id() -> None:
    # req: KS-CUR-11 (the seek fences what was delivered before it, ack_by_id or not), KS-ACK-3 (zombie domain)
    h = _one_consumer(profile="owner", capacity=1, ack_by_id=True)
    _acked(h, "a")
    h.publish("b")  # delivered to c1, attempt 1
    h.d.seek(0)  # c1 gets m0 again; m1 waits for room
    assert [(e["event"], e["reason"]) for e in h.d.ack("c1", 1).events] == [("ack_ignored", "not-holder")]
    with pytest.raises(Refusal) as refused:
        h.d.zombie_result("zombie_ack", "c1", 1, 1)  # a delivery made before the seek: outside the op's domain
    assert refused.value.code == "invalid_argument"
    h.d.ack("c1", 0)
    assert (1, "c1", 1) in h.deliveries()[-1:]
    assert h.anomalies() == []


def test_a_checkpoint_consumer_resumes_by_a_restart_then_a_seek_to_its_older_checkpoint() -> None:
    # req: KS-CUR-8, KS-CUR-10 (the resume of a stream processor: the store's cursor is past its own checkpoint)
    h = _one_consumer(profile="owner")
    _acked(h, "a", "b", "c", "d")
    h.d.restart()
    h.d.seek(1)  # the consumer's own checkpoint
    mark = h.mark()
    h.d.add_consumer("c1", 10)
    assert sorted(offset for offset, _, _ in h.deliveries(mark)) == [1, 2, 3]
    assert h.anomalies() == []


def test_a_seek_is_refused_past_the_log_in_best_effort_and_with_buckets() -> None:
    # req: KS-GEN-4 (section 14: a published offset or the end of the log; strict and owner, not buckets)
    for config, offset in (({"profile": "owner"}, 2), ({"profile": "best-effort"}, 0), ({"selector": "buckets"}, 0)):
        h = Harness(**config)
        h.publish("k")
        with pytest.raises(Refusal) as refused:
            h.d.seek(offset)
        assert refused.value.code == "invalid_argument"
    assert _one_consumer().d.seek(0).events[0]["event"] == "cursor_persisted"  # the end of the log: nothing to replay


def test_same_operations_same_events() -> None:
    # req: KS-GEN-5
    def run() -> list[dict[str, object]]:
        h = Harness(profile="owner", ack_timeout=2)
        h.d.add_consumer("a", 2)
        h.d.add_consumer("b", 1)
        h.publish(*[f"k{i % 5}" for i in range(12)])
        h.d.nack("a", 0)
        for _ in range(4):
            h.d.tick()
        h.d.remove_consumer("b")
        return h.events

    assert run() == run()


# --- section 5: filters ---


def test_filters_route_only_to_accepting_members_and_filter_the_rest() -> None:
    # req: KS-FLT-2, KS-FLT-3
    h = Harness()
    h.d.add_consumer("eu", 10, filters=["eu-?"])
    h.d.add_consumer("ships", 10, filters=["ship*"])
    events = h.publish("eu-1", "eu-12", "ship", "a[1]")
    delivered = {e["key"]: e["consumer"] for e in events if e["event"] == "deliver"}
    assert delivered == {"eu-1": "eu", "ship": "ships"}
    assert sorted(e["key"] for e in events if e["event"] == "filter") == ["a[1]", "eu-12"]
    assert h.d.stats()["resolved_total"]["filtered"] == 2
    assert h.anomalies() == []


def test_with_no_members_messages_wait() -> None:
    # req: KS-FLT-4
    h = Harness()
    events = h.publish("k1", "k2")
    assert [(e["event"], e["reason"]) for e in events] == [("held", "no-consumer"), ("held", "no-consumer")]
    assert h.d.stats()["window_used"] == 2
    assert h.kinds(h.d.add_consumer("c", 5)) == ["deliver", "deliver"]


def test_selectors_that_cannot_project_refuse_filters() -> None:
    # req: KS-FLT-5
    for selector in ("pulsar-auto-split", "buckets"):
        h = Harness(selector=selector)
        with pytest.raises(Refusal) as refused:
            h.d.add_consumer("c", 1, filters=["x*"])
        assert refused.value.code == "invalid_argument"


# --- section 6: ordering ---


def test_strict_delivers_one_message_of_a_key_at_a_time() -> None:
    # req: KS-ORD-2
    h = _one_consumer("strict")
    h.publish("k", "k", "j")
    assert h.deliveries() == [(0, "c1", 1), (2, "c1", 1)]
    h.d.ack("c1", 0)
    assert h.deliveries()[-1] == (1, "c1", 1)


def test_owner_prefetches_but_a_redelivery_goes_first() -> None:
    # req: KS-ORD-3, KS-ORD-4: c holds m1 and m2, nacks m1; m3 waits until m1 is redelivered
    h = _one_consumer("owner", capacity=3, backoff_base=2, backoff_max=2)
    h.publish("k", "k")
    h.d.nack("c1", 0)
    mark = h.mark()
    h.publish("k")
    assert h.deliveries(mark) == []  # m3 waits behind the retrying m1
    h.d.ack("c1", 1)  # m2 finishes first (KS-ORD-4)
    h.d.tick()
    assert h.deliveries(mark) == []
    h.d.tick()
    assert h.deliveries(mark) == [(0, "c1", 2), (2, "c1", 1)]
    assert h.anomalies() == []


def test_held_messages_keep_their_place() -> None:
    # req: KS-FLW-3, KS-ORD-1: a message held for capacity is not overtaken by a later one of its key
    h = Harness(profile="owner")
    h.d.add_consumer("c1", 1)
    h.publish("a", "k", "k")
    held = [e for e in h.events if e["event"] == "held"]
    assert [(e["offset"], e["reason"]) for e in held] == [(1, "capacity")]
    assert h.deliveries() == [(0, "c1", 1)]
    h.d.ack("c1", 0)
    assert h.deliveries()[-1] == (1, "c1", 1)
    assert h.anomalies() == []


# --- section 7: draining ---


def test_a_moved_key_drains_before_its_new_owner_gets_it() -> None:
    # req: KS-DRN-1, KS-DRN-2 (the spec's example)
    h = Harness(profile="owner")
    h.d.add_consumer("c1", 10)
    key = next(f"k{i}" for i in range(500) if _target_after_join(f"k{i}"))
    h.publish(key)
    h.d.add_consumer("c2", 10)
    events = h.publish(key)
    assert [(e["event"], e.get("reason")) for e in events] == [("held", "draining")]
    stats = h.d.stats()  # PIP-379's names (spec section 16)
    assert stats["draining_hashes_count"] == 1 and stats["draining_hashes_pending_messages"] == 1
    from ks_reference.hashing import murmur3_32

    assert stats["consumers"]["c1"]["draining_hashes"] == [{"hash": murmur3_32(key), "pending": 1}]
    assert stats["consumers"]["c2"]["draining_hashes"] == [] and stats["held_keys"] == 1
    outcome = h.d.ack("c1", 0)
    assert [(e["event"], e.get("consumer")) for e in outcome.events][:2] == [("ack", "c1"), ("deliver", "c2")]
    stats = h.d.stats()
    assert stats["draining_hashes_cleared_total"] == 1 and stats["draining_hashes_count"] == 0
    assert stats["consumers"]["c1"]["draining_hashes"] == [] and stats["held_keys"] == 0
    assert h.anomalies() == []


def _target_after_join(key: str) -> bool:
    from ks_reference.selectors import RingSelector

    ring = RingSelector()
    ring.add("c1")
    ring.add("c2")
    return ring.target(key) == "c2"


# --- section 8: flow control ---


def test_capacity_is_never_exceeded_and_the_window_bounds_reading() -> None:
    # req: KS-FLW-1, KS-FLW-2, KS-ISO-2
    h = Harness(profile="owner", window=3)
    h.d.add_consumer("c1", 2)
    h.publish("a", "b", "c", "d", "e")
    assert [o for o, _, _ in h.deliveries()] == [0, 1]
    assert h.d.stats()["window_used"] == 3 and h.d.read_position == 3
    h.d.ack("c1", 0)
    assert h.d.read_position == 4 and [o for o, _, _ in h.deliveries()] == [0, 1, 2]
    assert h.anomalies() == []


def test_a_stuck_key_blocks_only_itself_up_to_the_window() -> None:
    # req: KS-ISO-1: a consumer that never acks its key does not stop the other keys
    h = Harness(profile="strict", window=4)
    h.d.add_consumer("c1", 10)
    h.publish("stuck", "stuck", "a", "b", "stuck", "c")
    assert [o for o, _, _ in h.deliveries()] == [0, 2, 3]
    stuck = h.d.stats()["stuck_keys"]
    assert stuck == [] or stuck[0]["key"] == "stuck"
    for offset in (2, 3):
        h.d.ack("c1", offset)
    h.d.tick()
    assert [o for o, _, _ in h.deliveries()] == [0, 2, 3, 5]  # the window slides past the stuck key's queue
    assert {s["key"]: s["reason"] for s in h.d.stats()["stuck_keys"]} == {"stuck": "unacked"}
    assert h.anomalies() == []


# --- section 15: parking a hot key's backlog ---


@pytest.mark.parametrize("park_after", [0, 2])
def test_parking_keeps_healthy_keys_flowing_behind_a_stuck_key(park_after: int) -> None:
    # req: KS-ISO-4: without parking a stuck key's queue fills the window; with it, only its first two count
    h = Harness(profile="strict", window=5, park_after=park_after)
    h.d.add_consumer("c1", 10)
    h.publish("stuck", *["stuck"] * 5, "a", "b", "c")
    delivered = [o for o, _, _ in h.deliveries()]
    assert delivered == ([0, 6, 7, 8] if park_after else [0])
    assert h.anomalies() == []


def test_a_message_read_past_parked_ones_waits_when_they_are_delivered() -> None:
    # req: KS-FLW-2, KS-ISO-4: delivering parked messages makes them count again, so a message read while they
    # were parked finds the window full at its first delivery
    h = Harness(profile="owner", window=3, park_after=1, flow_control="permits")
    h.d.add_consumer("c1", 1)
    h.publish("k", "k", "k", "x", "y")  # m0 takes c1's permit; m1, m2 are parked, so x and y are read
    assert [o for o, _, _ in h.deliveries()] == [0]
    h.d.flow("c1", 5)  # m1 and m2 go to the holder and count again: m0, m1, m2 fill the window
    assert [o for o, _, _ in h.deliveries()] == [0, 1, 2]
    h.d.ack("c1", 0)
    assert [o for o, _, _ in h.deliveries()] == [0, 1, 2, 3]  # x, with two counted before it; y still waits
    assert h.anomalies() == []


# --- section 9: acks ---


def test_only_the_holders_ack_resolves() -> None:
    # req: KS-ACK-1, KS-ACK-2, KS-GEN-3
    h = Harness(profile="owner")
    h.d.add_consumer("c1", 5)
    h.d.add_consumer("c2", 5)
    h.publish("k")
    holder = h.deliveries()[0][1]
    other = "c2" if holder == "c1" else "c1"
    assert h.d.ack(other, 0).events[0]["reason"] == "not-holder"
    assert h.d.ack(holder, 99).events[0]["reason"] == "unknown-offset"
    h.d.remove_consumer(holder)
    h.d.add_consumer(holder, 5)  # a new incarnation under the old name
    mark = h.mark()
    redelivered_to = h.deliveries()[-1][1]
    if redelivered_to != holder:
        assert h.d.ack(holder, 0).events[0]["reason"] == "not-holder"
    assert h.d.ack(redelivered_to, 0).events[0]["event"] == "ack"
    assert h.d.ack(redelivered_to, 0).events[0]["reason"] == "resolved"
    assert h.mark() > mark
    assert h.d.stats()["ack_ignored_total"]["resolved"] == 1
    assert h.anomalies() == []


# --- section 10: retries ---


def test_backoff_doubles_up_to_the_cap_and_attempts_count() -> None:
    # req: KS-RTY-1, KS-RTY-4, KS-RTY-5
    h = _one_consumer(backoff_base=1, backoff_max=4, max_redeliveries=10)
    h.publish("k")
    retry_ticks = []
    for _ in range(5):
        h.d.nack("c1", 0)
        failed_at = h.d.now
        while not h.d.tick().events:
            pass
        retry_ticks.append(h.d.now - failed_at)
    assert retry_ticks == [1, 2, 4, 4, 4]
    assert [a for _, _, a in h.deliveries()] == [1, 2, 3, 4, 5, 6]
    assert h.anomalies() == []


def test_timeouts_happen_exactly_on_time() -> None:
    # req: KS-RTY-2, KS-RTY-3
    h = _one_consumer(ack_timeout=3)
    h.publish("k")
    assert h.kinds(h.d.tick()) == [] and h.kinds(h.d.tick()) == []
    outcome = h.d.tick()
    assert h.kinds(outcome)[0] == "timeout" and h.d.now == 3
    assert h.anomalies() == []


def test_an_extension_from_the_holder_moves_its_timeout_from_now() -> None:
    # req: KS-RTY-8 (the deadline becomes now + ticks, replacing the old one, longer or shorter)
    h = _one_consumer(ack_timeout=3)
    h.publish("k")
    h.d.tick()  # tick 1: the old deadline is tick 3
    assert [(e["event"], e["consumer"]) for e in h.d.extend("c1", 0, 4).events] == [("extended", "c1")]
    ticks = [h.d.now + 1]
    while "timeout" not in h.kinds(h.d.tick()):
        ticks.append(h.d.now + 1)
    assert h.d.now == 5  # 1 + 4, not 3 and not 3 + 4
    h.d.tick()  # the back-off of the default config is 0: delivered again at once, attempt 2
    extended_at = h.d.now
    h.d.extend("c1", 0, 1)  # shorter than what is left of ack_timeout: it replaces the deadline all the same
    assert "timeout" in h.kinds(h.d.tick()) and h.d.now == extended_at + 1
    assert h.anomalies() == []


def test_an_extension_from_a_consumer_that_does_not_hold_the_delivery_changes_nothing() -> None:
    # req: KS-RTY-9 (a timed-out holder, another member, a resolved message: recorded, nobody's deadline moves)
    h = Harness(profile="owner", ack_timeout=2, backoff_base=1, backoff_max=1)
    h.d.add_consumer("c1", 5)
    h.publish("k")
    h.d.tick()
    h.d.tick()  # tick 2: c1's delivery times out; the message is retrying (back-off 1)
    assert [(e["event"], e["reason"]) for e in h.d.extend("c1", 0, 5).events] == [("extend_ignored", "ended")]
    h.d.add_consumer("c2", 5)
    h.d.tick()  # tick 3: delivered again, attempt 2
    holder = h.deliveries()[-1][1]
    other = "c2" if holder == "c1" else "c1"
    reason = "ended" if other == "c1" else "not-holder"
    assert [(e["event"], e["reason"]) for e in h.d.extend(other, 0, 9).events] == [("extend_ignored", reason)]
    h.d.tick()
    assert "timeout" in h.kinds(h.d.tick()) and h.d.now == 5  # at 3 + ack_timeout: the ignored extension moved nothing
    h.d.tick()
    h.d.tick()
    holder = h.deliveries()[-1][1]
    h.d.ack(holder, 0)
    assert [(e["event"], e["reason"]) for e in h.d.extend(holder, 0, 1).events] == [("extend_ignored", "resolved")]
    assert h.anomalies() == []


def test_extend_outside_its_domain_is_refused() -> None:
    # req: KS-GEN-4 (no timeouts to move, ticks < 1, an offset never published: invalid_argument; a non-member:
    # unknown_consumer)
    h = _one_consumer(ack_timeout=0)
    h.publish("k")
    with pytest.raises(Refusal) as refused:
        h.d.extend("c1", 0, 2)
    assert refused.value.code == "invalid_argument"
    h = _one_consumer(ack_timeout=3)
    h.publish("k")
    for consumer, offset, ticks, code in (
        ("c1", 0, 0, "invalid_argument"),
        ("c1", 0, True, "invalid_argument"),
        ("c1", 1, 2, "invalid_argument"),
        ("gone", 0, 2, "unknown_consumer"),
    ):
        with pytest.raises(Refusal) as refused:
            h.d.extend(consumer, offset, ticks)
        assert refused.value.code == code
    assert h.anomalies() == []


def test_no_timeouts_when_disabled() -> None:
    h = _one_consumer(ack_timeout=0)
    h.publish("k")
    for _ in range(50):
        assert "timeout" not in h.kinds(h.d.tick())


def test_a_leaving_consumers_messages_are_pending_at_once_without_a_failure() -> None:
    # req: KS-RTY-7, KS-MEM-1
    h = Harness(profile="strict", max_redeliveries=0, poison_policy="drop")
    h.d.add_consumer("c1", 5)
    h.publish("k", "j")
    h.d.add_consumer("c2", 5)
    outcome = h.d.remove_consumer("c1")
    assert sorted(e["offset"] for e in outcome.events if e["event"] == "deliver") == [0, 1]
    h.d.tick()
    assert h.d.stats()["resolved_total"]["dropped"] == 0  # no failure was counted
    assert h.anomalies() == []


def test_with_returns_as_failures_a_return_uses_up_a_retry_and_can_poison() -> None:
    # req: KS-RTY-6, KS-RTY-7 (the declared departure: returns count as failures)
    h = Harness(profile="strict", max_redeliveries=1, poison_policy="dead-letter", returns_as_failures=True)
    h.d.add_consumer("c1", 5)
    h.publish("k")
    h.d.add_consumer("c2", 5)
    first = h.d.remove_consumer("c1")  # one return: within the budget of 1, pending at once
    assert [e["consumer"] for e in first.events if e["event"] == "deliver"] == ["c2"]
    second = h.d.remove_consumer("c2")  # the second return takes it over: poisoned, not delivered again
    assert [e["event"] for e in second.events if e["event"] == "deliver"] == []
    h.d.add_consumer("c3", 5)
    letters = [e for e in h.d.tick().events if e["event"] == "dead_letter"]
    assert [(e["offset"], e["reason"], e["attempt"]) for e in letters] == [(0, "left", 2)]
    assert h.anomalies() == []


def test_out_of_order_hands_a_key_to_its_new_target_at_once() -> None:
    # req: KS-ASN-1 (out_of_order: no draining, as Pulsar's allowOutOfOrderDelivery; routing per key kept)
    for out_of_order, expected in ((False, ["held"]), (True, ["deliver"])):
        h = Harness(profile="owner", out_of_order=out_of_order)
        h.d.add_consumer("c1", 5)
        key = "k"
        h.publish(key)
        joiner = next(f"c{n}" for n in range(2, 200) if h.d.target_name(key, None) == "c1" and _takes(h, key, f"c{n}"))
        h.d.add_consumer(joiner, 5)
        kinds = [e["event"] for e in h.publish(key) if e["event"] in ("held", "deliver")]
        assert kinds == expected, out_of_order
        assert h.anomalies() == []


def _takes(h: Harness, key: str, name: str) -> bool:
    """Whether `name`, joining, would become the target of `key` (the selector's own answer)."""
    from ks_reference.selectors import make_selector

    selector = make_selector(h.d.config.selector)
    for member in [*h.d.members_by_name, name]:
        selector.add(member)
    return selector.target(key) == name


def test_max_unacked_blocks_a_consumer_at_the_limit_until_half_is_acked() -> None:
    # req: KS-FLW-1 (Pulsar's maxUnackedMessagesPerConsumer: blocked at the limit, unblocked at half of it)
    h = Harness(profile="owner", max_unacked=3)
    h.d.add_consumer("c1", 10)
    h.publish("k0", "k1", "k2", "k3", "k4")
    assert [offset for offset, _, _ in h.deliveries()] == [0, 1, 2]  # room for 10, blocked at 3
    since = h.mark()
    h.d.ack("c1", 0)  # holds 2: above half of 3, still blocked
    assert h.deliveries(since) == []
    h.d.ack("c1", 1)  # holds 1 = floor(3 / 2): resumed, and takes up to the limit again
    assert [offset for offset, _, _ in h.deliveries(since)] == [3, 4]
    assert h.anomalies() == []


def test_the_controller_moves_a_drained_bucket_between_staying_consumers() -> None:
    # req: KS-BKT-3, KS-BKT-4 (controller_moves: PIP-486's controller evens the load between membership changes)
    h = Harness(profile="owner", selector="buckets", bucket_assignment="controller", controller_moves=True)
    h.d.add_consumer("c1", 1)
    h.d.add_consumer("c2", 1)
    layout = h.d.layout
    assert layout is not None
    by_bucket: dict[int, list[str]] = {}
    for key in (f"k{i}" for i in range(200)):
        if layout.target(layout.place(key), ["c1", "c2"]) == "c1":
            by_bucket.setdefault(layout.place(key).bucket, []).append(key)
    assert len(by_bucket) == 2  # sticky placement: two buckets each
    for keys in by_bucket.values():
        h.publish(*keys[:3])  # every message in c1's buckets: c2 idles while c1 works through them one at a time
    since = h.mark()
    h.d.tick()
    moves = [e for e in h.events[since:] if e["event"] == "bucket_assigned"]
    assert [e["consumer"] for e in moves] == ["c2"]  # no join or leave: the controller's own move
    moved = (moves[0]["segment"], moves[0]["bucket"])
    delivered = [e for e in h.events if e["event"] == "deliver" and e["seq"] > moves[0]["seq"]]
    assert delivered and all(e["consumer"] == "c2" for e in delivered)
    assert {(layout.place(e["key"]).segment, layout.place(e["key"]).bucket) for e in delivered} == {moved}
    assert h.anomalies() == []
    undeclared = [dict(e) for e in h.events]
    config = json.loads(undeclared[0]["detail"])
    del config["config"]["controller_moves"]
    undeclared[0]["detail"] = json.dumps(config)
    found = {a.name for a in check_events(undeclared).anomalies}
    assert found & {"key-moved", "bucket-misassigned", "unstable-buckets"}


# --- section 11: poison ---


@pytest.mark.parametrize("policy", ["drop", "dead-letter", "block"])
def test_poison_policies(policy: str) -> None:
    # req: KS-RTY-6, KS-POI-1, KS-POI-2, KS-POI-3
    h = _one_consumer(max_redeliveries=1, poison_policy=policy, backoff_base=0, backoff_max=0)
    h.publish("bad", "bad", "good")
    h.d.nack("c1", 0)
    h.d.tick()
    assert h.deliveries()[-1] == (0, "c1", 2)
    h.d.nack("c1", 0)
    outcome = h.d.tick()
    kinds = h.kinds(outcome)
    if policy == "drop":
        assert kinds[:2] == ["drop", "deliver"] and outcome.events[1]["offset"] == 1
    elif policy == "dead-letter":
        assert outcome.events[0] == {
            "event": "dead_letter", "offset": 0, "key": "bad", "attempt": 2, "reason": "nack",
        }  # fmt: skip
        assert outcome.events[1]["offset"] == 1
    else:
        assert kinds == ["key_blocked"]
        stats = h.d.stats()
        assert stats["blocked_keys"] == ["bad"]  # req: KS-OBS-2
        assert {"key": "bad", "reason": "blocked", "held": 2, "since": 2} in stats["stuck_keys"]
        assert h.d.publish("other").events[0]["event"] == "deliver"  # other keys continue
    assert h.anomalies() == []


def test_release_gives_a_fresh_budget_and_skip_resolves() -> None:
    # req: KS-POI-4, KS-POI-5
    h = _one_consumer(max_redeliveries=0, poison_policy="block", backoff_base=0, backoff_max=0)
    h.publish("bad", "bad")
    h.d.nack("c1", 0)
    h.d.tick()
    assert h.d.blocked == {"bad": [0]}
    released = h.d.release("bad")
    assert released.events == [{"event": "deliver", "offset": 0, "key": "bad", "consumer": "c1", "attempt": 2}]
    h.d.nack("c1", 0)
    h.d.tick()
    skipped = h.d.skip("bad")
    assert h.kinds(skipped)[:2] == ["drop", "deliver"] and skipped.events[0]["reason"] == "operator"
    assert h.d.blocked == {}
    assert h.anomalies() == []


# --- section 12: membership ---


def test_disconnected_members_receive_nothing_and_are_evicted_on_time() -> None:
    # req: KS-MEM-2, KS-MEM-3
    h = Harness(evict_after=3)
    h.d.add_consumer("c1", 5)
    h.d.disconnect("c1")
    events = h.publish("k")
    assert [(e["event"], e["reason"]) for e in events] == [("held", "inactive")]
    assert h.kinds(h.d.tick()) == [] and h.kinds(h.d.tick()) == []
    outcome = h.d.tick()
    assert h.kinds(outcome) == ["consumer_evicted", "held"] and outcome.events[1]["reason"] == "no-consumer"
    with pytest.raises(Refusal):
        h.d.ack("c1", 0)
    assert h.anomalies() == []


# --- section 14: the cursor ---


def test_cursor_example_of_the_spec_with_holes() -> None:
    # req: KS-CUR-1, KS-CUR-6: offsets 10-13 delivered, 10, 12, 13 acked -> cursor 11, holes {12, 13}
    h = Harness(profile="owner", persist_ack_holes=True)
    h.d.add_consumer("c1", 100)
    h.publish(*[f"k{i}" for i in range(14)])
    for offset in range(10):
        h.d.ack("c1", offset)
    for offset in (10, 12, 13):
        h.d.ack("c1", offset)
    persisted = [e for e in h.events if e["event"] == "cursor_persisted"][-1]
    assert persisted["cursor"] == 11 and persisted["ranges"] == [[12, 13]]
    h.d.ack("c1", 11)
    assert [e for e in h.events if e["event"] == "cursor_persisted"][-1] == {
        **persisted, "seq": h.events[-1]["seq"], "cursor": 14, "ranges": [],
    }  # fmt: skip
    assert h.anomalies() == []


def test_persistence_is_debounced() -> None:
    # req: KS-CUR-5
    h = Harness(persist_interval=3)
    h.d.add_consumer("c1", 10)
    h.publish("a", "b")
    assert "cursor_persisted" not in h.kinds(h.d.ack("c1", 0))
    persisted_at = []
    for _ in range(8):
        outcome = h.d.tick()
        if "cursor_persisted" in h.kinds(outcome):
            persisted_at.append(h.d.now)
        if h.d.now == 1:
            h.d.ack("c1", 1)
    assert persisted_at == [1, 4]  # the ack at tick 1 waits for tick 1 + 3
    h.publish("c")
    h.d.ack("c1", 2)
    for _ in range(5):
        if "cursor_persisted" in h.kinds(h.d.tick()):
            persisted_at.append(h.d.now)
    assert persisted_at == [1, 4, 9]  # due since tick 7, changed at tick 8: the next tick
    assert h.anomalies() == []


def test_restart_resumes_from_the_store() -> None:
    # req: KS-CUR-3, KS-CUR-4: persisted holes are not read again; unpersisted resolutions come back
    h = Harness(profile="owner", persist_interval=2, persist_ack_holes=True)
    h.d.add_consumer("c1", 10)
    h.publish("a", "b", "c", "d")
    h.d.ack("c1", 1)
    h.d.tick()
    h.d.tick()  # persisted: cursor 0, holes {1}
    h.d.ack("c1", 0)
    h.d.ack("c1", 3)  # not persisted yet
    h.d.restart()
    assert h.d.stats()["cursor"] == 0 and h.d.stats()["ack_holes"] == 1
    outcome = h.d.add_consumer("c1", 10)
    assert sorted(e["offset"] for e in outcome.events if e["event"] == "deliver") == [0, 2, 3]
    assert all(e["attempt"] == 1 for e in outcome.events if e["event"] == "deliver")
    assert h.anomalies() == []


# --- section 16: stats ---


def test_stats_agree_with_the_events() -> None:
    # req: KS-OBS-1, KS-OBS-3
    h = Harness(profile="owner")
    h.d.add_consumer("c1", 2)
    h.d.add_consumer("c2", 1)
    h.publish(*[f"k{i % 3}" for i in range(9)])
    stats = h.d.stats()
    outstanding: dict[str, int] = {}
    for e in h.events:
        if e["event"] == "deliver":
            outstanding[e["consumer"]] = outstanding.get(e["consumer"], 0) + 1
    assert {c: v["unacked"] for c, v in stats["consumers"].items()} == {c: outstanding.get(c, 0) for c in ("c1", "c2")}
    assert stats["delivered_total"] == sum(outstanding.values())
    held = [e for e in h.events if e["event"] == "held"]
    assert len({e["offset"] for e in held}) == len(held)  # reported once per message while the reason holds
    assert sum(v["held"] for v in stats["consumers"].values()) == len(stats["held_by_key"])


# --- section 17: bucket assignment policies ---


@pytest.mark.parametrize("buckets", [1, 4, 7])
def test_the_sticky_policy_moves_only_what_a_membership_change_must(buckets: int) -> None:
    # req: KS-BKT-3, KS-BKT-8 (a join moves buckets only to the joiner, at most ceil(N/k); a leave only the leaver's)
    import random

    from ks_reference.buckets import BucketLayout

    rng = random.Random(buckets)
    layout = BucketLayout(buckets, 64, policy="sticky")
    members: list[str] = []
    pool = [f"c{i}" for i in range(9)]
    for _ in range(60):
        before = {b: layout.owners.get((0, b)) for b in range(buckets)}
        joining = not members or (len(members) < len(pool) and rng.random() < 0.6)
        if joining:
            changed = rng.choice([name for name in pool if name not in members])
            members.append(changed)
        else:
            changed = rng.choice(members)
            members.remove(changed)
        if not members:
            continue
        layout.members_changed(sorted(members))
        after = {b: layout.owner_of((0, b), sorted(members)) for b in range(buckets)}
        moved = [b for b in range(buckets) if before[b] is not None and before[b] != after[b]]
        if joining:
            assert all(after[b] == changed for b in moved)
            assert len(moved) <= -(-buckets // len(members))
        else:
            assert all(before[b] == changed for b in moved)
        counts = [sum(owner == name for owner in after.values()) for name in members]
        assert max(counts) - min(counts) <= 1  # balanced: every member within one bucket of the others


def test_the_sorted_policy_can_move_buckets_between_members_that_stay() -> None:
    # req: KS-BKT-3 (why `sorted` is exempt from KS-BKT-8: a joiner sorting first shifts every position)
    from ks_reference.buckets import BucketLayout

    layout = BucketLayout(6, 64)
    before = {b: layout.owner_of((0, b), ["b", "c"]) for b in range(6)}
    after = {b: layout.owner_of((0, b), ["a", "b", "c"]) for b in range(6)}
    assert any(before[b] != after[b] and after[b] != "a" for b in range(6))


@pytest.mark.parametrize("policy", ["sorted", "sticky"])
def test_a_bucket_policy_passes_the_checker_under_churn(policy: str) -> None:
    # req: KS-BKT-3, KS-BKT-4, KS-BKT-8
    h = Harness(profile="owner", selector="buckets", bucket_budget=4, bucket_assignment=policy)
    h.d.add_consumer("b", 3)
    h.d.add_consumer("d", 3)
    h.publish(*[f"k{i}" for i in range(12)])
    h.d.add_consumer("a", 3)  # sorts first: under `sorted` it shifts every position
    h.d.add_consumer("c", 3)
    h.d.remove_consumer("d")  # its buckets move while it still holds some: they drain first (KS-BKT-4)
    for _ in range(6):
        for name, member in list(h.d.members.items()):
            for offset in sorted(member.outstanding)[:2]:
                h.d.ack(name, offset)
        h.publish("x", "y")
    assert sum(e["event"] == "deliver" for e in h.events) >= 12
    assert h.anomalies() == []


@pytest.mark.parametrize("policy", ["sorted", "sticky"])
def test_only_the_sticky_policy_keeps_the_stability_bound(policy: str) -> None:
    # req: KS-BKT-8: the same churn, judged as if each policy had promised the bound
    import json

    from ks_conformance.checker import check_events

    h = Harness(profile="owner", selector="buckets", bucket_budget=6, bucket_assignment=policy)
    h.d.add_consumer("b", 30)
    h.d.add_consumer("c", 30)
    keys = [f"k{i}" for i in range(40)]
    h.publish(*keys)
    for name, member in list(h.d.members.items()):
        for offset in sorted(member.outstanding):
            h.d.ack(name, offset)
    h.d.add_consumer("a", 30)  # sorts first: `sorted` moves buckets between b and c too
    h.publish(*keys)
    events = [dict(e) for e in h.events]
    detail = json.loads(events[0]["detail"])
    detail["config"]["bucket_assignment"] = "sticky"
    events[0]["detail"] = json.dumps(detail)
    found = {a.name for a in check_events(events).anomalies}
    assert found == ({"unstable-buckets"} if policy == "sorted" else set())


@pytest.mark.parametrize("policy", ["sorted", "sticky"])
def test_single_bucket_segments_spread_over_the_members(policy: str) -> None:
    # req: KS-BKT-3: after splits down to one bucket per segment, the segments do not all go to one member
    from ks_reference.buckets import BucketLayout

    layout = BucketLayout(1, 64, policy=policy)
    members = ["a", "b", "c"]
    layout.members_changed(members)
    layout.split(0, 1, 2)
    layout.split(1, 3, 4)
    layout.split(2, 5, 6)
    layout.members_changed(members)
    owners = [layout.owner_of((segment, 0), members) for segment in (3, 4, 5, 6)]
    assert set(owners) == set(members)


# --- section 6: delayed delivery ---


def _delivered(outcome: Outcome) -> list[int]:
    return [int(e["offset"]) for e in outcome.events if e["event"] == "deliver"]


@pytest.mark.parametrize("profile", ["strict", "owner"])
def test_a_delayed_message_waits_for_its_due_tick_and_its_key_goes_on_without_it(profile: str) -> None:
    # req: KS-ORD-5, KS-ORD-6, KS-ORD-7
    h = _one_consumer(profile)
    assert _delivered(h.d.publish_delayed("k", 2)) == []
    assert _delivered(h.d.publish("k")) == [1]  # the later message of its key does not wait
    assert _delivered(h.d.tick()) == []  # tick 1: not due
    h.d.ack("c1", 1)
    assert _delivered(h.d.tick()) == [0]  # tick 2: due, delivered in the tick's pass
    h.d.ack("c1", 0)
    assert h.anomalies() == []


def test_a_delayed_message_counts_in_the_window_and_holds_the_cursor() -> None:
    # req: KS-ORD-6 (read in offset order, counted in the window), KS-CUR-1
    h = _one_consumer("owner", window=1)
    h.d.publish_delayed("k", 1)
    assert _delivered(h.d.publish("j")) == []  # the window holds the delayed message: m1 is not read yet
    assert _delivered(h.d.tick()) == [0]
    assert _delivered(h.d.ack("c1", 0)) == [1]
    assert h.d.stats()["cursor"] == 1
    assert h.anomalies() == []


def test_a_due_message_falls_due_within_the_timer_slack() -> None:
    # req: KS-ORD-7, KS-GEN-9 (the reference runs its timers at every (slack + 1)-th tick)
    h = _one_consumer("owner", timer_slack=1)
    h.d.publish_delayed("k", 1)
    assert _delivered(h.d.tick()) == []  # tick 1 runs no timers
    assert _delivered(h.d.tick()) == [0]
    assert h.anomalies() == []


def test_a_delay_survives_a_restart(tmp_path: Path) -> None:
    # req: KS-ORD-5, KS-CUR-3 (the due tick is in the durable log)
    store = SqliteStore(tmp_path / "store.db")
    h = Harness(store, profile="owner")
    h.d.publish_delayed("k", 3)
    h.d.restart()
    h.d.add_consumer("c1", 5)
    assert _delivered(h.d.tick()) == []
    assert h.d.log[0].deliver_at == 3
    h.d.tick()
    assert _delivered(h.d.tick()) == [0]
    assert h.anomalies() == []


@pytest.mark.parametrize(
    ("config", "deliver_at"),
    [({"profile": "best-effort"}, 1), ({"profile": "owner", "selector": "buckets"}, 1), ({"profile": "owner"}, -1)],
)
def test_publish_delayed_is_refused_where_it_is_not_specified(config: dict[str, object], deliver_at: int) -> None:
    # req: KS-GEN-4 (spec section 6: delayed delivery is specified for strict and owner, selectors but buckets)
    h = Harness(**config)
    with pytest.raises(Refusal) as refused:
        h.d.apply({"op": "publish_delayed", "offset": 0, "key": "k", "deliver_at": deliver_at})
    assert refused.value.code == "invalid_argument"
    assert h.d.log == []


def test_a_seek_forgets_the_delayed_messages_it_gives_up_or_reads_again() -> None:
    # req: KS-CUR-8, KS-CUR-9, KS-ORD-7 (the seek forgets the read messages, the delayed-delivery tracker included: a
    # delayed message below the target is given up, one at or after it is read again and waits for its due tick;
    # found when the two ops were merged: the tracker kept an offset the seek had dropped)
    for target, expected in ((1, [1, 1]), (0, [1, 1, 0])):
        h = _one_consumer("owner")
        h.d.publish_delayed("k", 3)
        h.publish("k")
        h.d.ack("c1", 1)
        h.d.seek(target)
        for _ in range(3):
            h.d.tick()
        delivered = [offset for offset, _, _ in h.deliveries()]
        assert delivered == expected, (target, delivered)  # offset 1 again after the seek; offset 0 only when due
        assert h.anomalies() == []
