"""The trace checker on hand-written traces: for every anomaly of spec/checking.md, a trace that must show it
and a close valid counterpart that must not (and that is valid as a whole)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ks_conformance.anomalies import Verdict, requirement_levels
from ks_conformance.builder import TraceBuilder
from ks_conformance.checker import Checker, check_events
from ks_conformance.rules import BY_NAME, RULES, Stage

Pair = tuple[Callable[[], TraceBuilder], Callable[[], TraceBuilder]]
CASES: dict[str, list[Pair]] = {}


def case(name: str) -> Callable[[Callable[[bool], TraceBuilder]], Callable[[bool], TraceBuilder]]:
    """Register a trace recipe: called with bad=True it must show `name`, with bad=False it must be valid."""

    def register(recipe: Callable[[bool], TraceBuilder]) -> Callable[[bool], TraceBuilder]:
        CASES.setdefault(name, []).append((lambda: recipe(True), lambda: recipe(False)))
        return recipe

    return register


def owner(**config: object) -> TraceBuilder:
    return TraceBuilder(profile="owner", selector="ring", **config)


def strict(**config: object) -> TraceBuilder:
    return TraceBuilder(profile="strict", selector="ring", **config)


# --- 2.1 checked at each event ------------------------------------------------------------------


@case("key-reorder")
def _key_reorder(bad: bool) -> TraceBuilder:
    t = owner().add("c1", capacity=2)
    if bad:
        t.publish("k")
        t.publish("k")
        t.deliver(1, "c1")
    else:
        t.deliver(t.publish("k"), "c1")
        t.deliver(t.publish("k"), "c1")
    return t


@case("overtaken-hold")
def _overtaken_hold(bad: bool) -> TraceBuilder:
    t = owner().add("c1", capacity=1)
    t.deliver(t.publish("x"), "c1")
    t.held(t.publish("k"), "capacity", "c1")
    t.ack(0, "c1")
    if not bad:
        t.deliver(1, "c1")
    t.persisted(1)
    two = t.publish("k")
    if bad:
        t.deliver(two, "c1")
    else:
        t.held(two, "capacity", "c1")
    return t


@case("strict-overlap")
def _strict_overlap(bad: bool) -> TraceBuilder:
    t = strict().add("c1", capacity=2)
    t.deliver(t.publish("k"), "c1")
    one = t.publish("k")
    if bad:
        t.deliver(one, "c1")
    else:
        t.ack(0, "c1").deliver(one, "c1").persisted(1)
    return t


@case("retry-overtaken")
def _retry_overtaken(bad: bool) -> TraceBuilder:
    t = owner().add("c1", capacity=3)
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    two = t.publish("k")
    if bad:
        t.deliver(two, "c1")
    else:
        t.tick().deliver(0, "c1", attempt=2).deliver(two, "c1")
    return t


@case("split-owner")
def _split_owner(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.add("c2")
    one = t.publish("k")
    if bad:
        t.deliver(one, "c2")
    else:
        t.held(one, "draining", "c2").ack(0, "c1").deliver(one, "c2").persisted(1)
    return t


@case("blocked-key-leak")
def _blocked_key_leak(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="block").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().blocked(0, attempt=1)
    one = t.publish("k")
    if bad:
        t.deliver(one, "c1")
    return t


@case("unjustified-block")
def _unjustified_block(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=1, poison_policy="block", backoff_base=0, backoff_max=0).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    if bad:
        t.tick().blocked(0, attempt=1)  # one failure, max_redeliveries = 1: not poisoned yet
    else:
        t.tick().deliver(0, "c1", attempt=2)
    return t


@case("stale-budget")
def _stale_budget(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=1, poison_policy="block", backoff_base=0, backoff_max=0).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1").tick().deliver(0, "c1", attempt=2)
    t.nack(0, "c1", attempt=2).tick().blocked(0, attempt=2)
    t.release("k").deliver(0, "c1", attempt=3)
    t.nack(0, "c1", attempt=3)
    if bad:
        t.tick().blocked(0, attempt=3)  # one failure since the release: the old budget was kept
    else:
        t.tick().deliver(0, "c1", attempt=4)
    return t


@case("duplicate")
def _duplicate(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    if not bad:
        t.nack(0, "c1")
    t.tick().deliver(0, "c1", attempt=2)
    return t


@case("resurrected")
def _resurrected(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    if bad:
        t.ack(0, "c1").persisted(1)
    t.restart().add("c1")
    if bad:
        t.deliver(0, "c1")
    else:
        t.deliver(0, "c1", attempt=1)
    return t


@case("restart-skip")
def _restart_skip(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1")  # resolved above the cursor (0 is outstanding), and holes are not persisted: volatile
    t.restart().add("c1")
    t.deliver(0, "c1")
    if not bad:
        t.deliver(1, "c1")  # the restart resumes from the store: m1 is dispatched again
    return t


@case("restart-skip")
def _restart_skip_at_quiescence(bad: bool) -> TraceBuilder:
    t = strict().add("c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1")
    t.restart().add("c1", capacity=1)
    t.deliver(0, "c1")
    t.ack(0, "c1").persisted(1)
    if not bad:
        t.deliver(1, "c1").ack(1, "c1").persisted(2)
    else:
        t.held(1, "capacity", "c1")
    return t.quiescent()


@case("return-counted")
def _return_counted(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=1, poison_policy="dead-letter", backoff_base=0, backoff_max=0).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").add("c2")
    t.deliver(0, "c2", attempt=2)
    t.nack(0, "c2", attempt=2)  # the first failure: a leave is not one
    if bad:
        t.tick().dead_letter(0, attempt=2, reason="nack").persisted(1)
    else:
        t.tick().deliver(0, "c2", attempt=3)
    return t


def test_out_of_order_gives_up_draining_and_key_order_but_not_routing() -> None:
    """KS-DRN-1 / KS-ASN-1 with out_of_order (Pulsar's allowOutOfOrderDelivery): a key on two consumers across a
    join is the declared departure; a key sent to another consumer within one epoch is still key-moved."""

    def handed_over(**config: object) -> TraceBuilder:
        t = owner(**config).add("c1")
        t.deliver(t.publish("k"), "c1")
        t.add("c2")
        return t.deliver(t.publish("k"), "c2")  # c1 still holds offset 0 of k

    assert _anomaly_names(handed_over()) == ["split-owner"]
    assert _anomaly_names(handed_over(out_of_order=True)) == []
    moved = handed_over(out_of_order=True)
    moved.deliver(moved.publish("k"), "c1")  # the same epoch: k went to c2, now to c1
    assert _anomaly_names(moved) == ["key-moved"]


def test_with_durable_attempts_a_delivery_a_restart_ended_is_a_counted_return() -> None:
    """KS-RTY-7 with returns_as_failures and durable_attempts (procrastinate: the stalled-job recovery after a crash
    retries the job, one more attempt): the restart's lost delivery counts, so one failure more poisons."""

    def crashed(**config: object) -> TraceBuilder:
        t = TraceBuilder(
            declared={"durable_attempts": True},
            profile="strict",
            max_redeliveries=1,
            poison_policy="dead-letter",
            backoff_base=0,
            backoff_max=0,
            **config,
        ).add("c1")
        t.deliver(t.publish("k"), "c1")
        t.restart().add("c2")
        t.deliver(0, "c2", attempt=2).nack(0, "c2", attempt=2)
        return t.dead_letter(0, attempt=2, reason="nack").persisted(1)

    assert "unjustified-resolution" in _anomaly_names(crashed())
    assert _anomaly_names(crashed(returns_as_failures=True)) == []
    # a return (here the restart's) that used up the budget may leave the message to go again (KS-RTY-6)
    again = TraceBuilder(
        declared={"durable_attempts": True}, profile="strict", max_redeliveries=0, returns_as_failures=True
    ).add("c1")
    again.deliver(again.publish("k"), "c1")
    again.restart().add("c2")
    again.deliver(0, "c2", attempt=2).ack(0, "c2").persisted(1)
    assert _anomaly_names(again) == []


def _two_returns(**config: object) -> TraceBuilder:
    """A message returned twice by leaving holders, with max_redeliveries = 1 and no failure."""
    t = owner(max_redeliveries=1, poison_policy="dead-letter", **config).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").add("c2")
    t.deliver(0, "c2", attempt=2)
    t.remove("c2").add("c3")
    return t


def test_returns_as_failures_turns_a_counted_return_into_the_options_own_rule() -> None:
    """KS-RTY-7 / KS-RTY-6: two returns over a budget of 1 poison the message only where the option is declared."""
    undeclared = _two_returns()
    undeclared.tick().dead_letter(0, attempt=2, reason="left").persisted(1)
    # undeclared, the returned message was due to c3 at once (idle-while-ready) and its poisoning is return-counted
    assert _anomaly_names(undeclared) == ["idle-while-ready", "return-counted"]
    declared = _two_returns(returns_as_failures=True)
    declared.tick().dead_letter(0, attempt=2, reason="left").persisted(1)
    assert _anomaly_names(declared) == []


def test_returns_as_failures_is_judged_by_its_own_rule() -> None:
    """KS-RTY-6 under the option: a message its returns took over the budget may go again (a return is no failure),
    but its next failure poisons it: delivered again after that failure it is retry-overrun, left unpoisoned past
    phase 2 poison-ignored; one return within the budget leaves it pending (no early poisoning)."""
    again = _two_returns(returns_as_failures=True, backoff_base=0, backoff_max=0)
    again.deliver(0, "c3", attempt=3)
    assert _anomaly_names(again) == []
    again.nack(0, "c3", attempt=3)
    overrun = _two_returns(returns_as_failures=True, backoff_base=0, backoff_max=0)
    overrun.deliver(0, "c3", attempt=3).nack(0, "c3", attempt=3).deliver(0, "c3", attempt=4)
    assert "retry-overrun" in _anomaly_names(overrun)
    ignored = _two_returns(returns_as_failures=True, backoff_base=0, backoff_max=0)
    ignored.deliver(0, "c3", attempt=3).nack(0, "c3", attempt=3).tick()
    assert _anomaly_names(ignored) == ["poison-ignored"]
    early = owner(max_redeliveries=1, poison_policy="dead-letter", returns_as_failures=True).add("c1")
    early.deliver(early.publish("k"), "c1")
    early.remove("c1").add("c2")
    early.tick().dead_letter(0, attempt=1, reason="left").persisted(1)
    assert _anomaly_names(early)[-1:] == ["unjustified-resolution"]


def _blocked_at_the_limit(**config: object) -> TraceBuilder:
    """c1 (capacity 5) takes two messages; with max_unacked = 3 it is at the limit after a third."""
    t = owner(**config).add("c1", capacity=5)
    for key in ("k0", "k1", "k2"):
        t.deliver(t.publish(key), "c1")
    t.ack(0, "c1").persisted(1)
    t.publish("k3")  # offset 3 waits: c1 holds 2, above half of 3 (1)
    return t


def test_max_unacked_blocks_at_the_limit_and_resumes_at_half() -> None:
    """KS-FLW-1 with max_unacked (Pulsar's unacked limit): idling at the limit is the option's rule (undeclared it is
    idle-while-ready); a delivery before the consumer is down to half is capacity-overrun; at half it resumes."""
    assert _anomaly_names(_blocked_at_the_limit()) == ["idle-while-ready"]
    assert _anomaly_names(_blocked_at_the_limit(max_unacked=3)) == []
    early = _blocked_at_the_limit(max_unacked=3)
    early.deliver(3, "c1")
    assert _anomaly_names(early) == ["capacity-overrun"]
    resumed = _blocked_at_the_limit(max_unacked=3)
    resumed.ack(1, "c1").persisted(2).deliver(3, "c1")  # c1 holds 1 = floor(3 / 2): resumed
    assert _anomaly_names(resumed) == []
    idle = _blocked_at_the_limit(max_unacked=3).ack(1, "c1").persisted(2)  # resumed, offset 3 ready, room
    assert _anomaly_names(idle) == ["idle-while-ready"]


@case("filter-violation")
def _filter_violation(bad: bool) -> TraceBuilder:
    t = owner().add("c1", filters=["a*"])
    t.deliver(t.publish("b1" if bad else "a1"), "c1")
    return t


@case("inactive-delivery")
def _inactive_delivery(bad: bool) -> TraceBuilder:
    t = owner(evict_after=0).add("c1").disconnect("c1")
    zero = t.publish("k")
    if bad:
        t.deliver(zero, "c1")
    else:
        t.held(zero, "inactive", "c1")
    return t


@case("inactive-delivery")
def _delivery_to_a_consumer_that_left(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2").remove("c1")
    t.deliver(t.publish("k"), "c1" if bad else "c2")
    return t


@case("capacity-overrun")
def _capacity_overrun(bad: bool) -> TraceBuilder:
    t = owner().add("c1", capacity=1)
    t.deliver(t.publish("a"), "c1")
    one = t.publish("b")
    if bad:
        t.deliver(one, "c1")
    else:
        t.held(one, "capacity", "c1")
    return t


@case("permit-overrun")
def _permit_overrun(bad: bool) -> TraceBuilder:
    t = owner(flow_control="permits").add("c1", capacity=1)
    t.deliver(t.publish("a"), "c1")
    t.ack(0, "c1").persisted(1)  # an ack grants nothing under permits
    one = t.publish("b")
    if not bad:
        t.flow("c1", 1)
    t.deliver(one, "c1")
    return t


@case("idle-while-ready")
def _idle_within_the_lookahead(bad: bool) -> TraceBuilder:
    """KS-ISO-3: outstanding messages do not count in the look-ahead (with a window of 2, m3 could wait)."""
    t = owner(read_bound="lookahead", lookahead_per_subscription=2).add("c1", capacity=4)
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    three = t.publish("c")
    if not bad:
        t.deliver(three, "c1")
    return t


@case("window-overrun")
def _window_overrun(bad: bool) -> TraceBuilder:
    t = owner(window=1).add("c1")
    t.deliver(t.publish("a"), "c1")
    one = t.publish("b")
    if bad:
        t.deliver(one, "c1")
    return t


@case("window-overrun")
def _window_overrun_once_parked_messages_count_again(bad: bool) -> TraceBuilder:
    """KS-ISO-4: parked messages leave the window's count, and count again once delivered."""
    t = owner(window=3, park_after=1, flow_control="permits").add("c1", capacity=1)
    t.deliver(t.publish("k"), "c1")
    t.publish("k")
    t.publish("k")  # m1, m2 parked: the window counts m0 only
    x = t.publish("x")
    t.flow("c1", 5)
    if bad:  # m1 and m2 delivered first count again: m0, m1, m2 fill the window before x
        t.deliver(1, "c1").deliver(2, "c1")
    t.deliver(x, "c1")
    return t


@case("idle-while-ready")
def _idle_while_parked_messages_leave_room(bad: bool) -> TraceBuilder:
    """KS-ISO-4: with a window of 2, a stuck key's parked messages do not fill it."""
    t = owner(window=2, park_after=1).add("c1", capacity=4)
    t.deliver(t.publish("k"), "c1")
    t.publish("k")
    t.publish("k")  # m1, m2 parked behind m0: the window of 2 counts m0 only, so x is in it
    x = t.publish("x")
    if not bad:
        t.deliver(x, "c1")
    return t


@case("attempt-miscount")
def _attempt_miscount(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().deliver(0, "c1", attempt=3 if bad else 2)
    return t


@case("key-moved")
def _key_moved(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").persisted(1)
    t.deliver(t.publish("k"), "c2" if bad else "c1")
    return t


@case("unstable-assignment")
def _unstable_assignment(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").persisted(1)
    t.add("c3")
    t.deliver(t.publish("k"), "c2" if bad else "c3")
    return t


@case("unstable-assignment")
def _unstable_after_a_leave(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2").add("c3")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").persisted(1)
    t.remove("c2" if bad else "c1")
    t.deliver(t.publish("k"), "c3")
    return t


@case("early-retry")
def _early_retry(bad: bool) -> TraceBuilder:
    t = owner(backoff_base=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick()
    if not bad:
        t.tick()
    t.deliver(0, "c1", attempt=2)
    return t


@case("early-retry")
def _early_retry_with_a_back_off(bad: bool) -> TraceBuilder:
    """A retry within the nack is allowed only when the back-off is 0 (KS-RTY-4)."""
    t = owner(backoff_base=1 if bad else 0, backoff_max=1 if bad else 0).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1").deliver(0, "c1", attempt=2)
    return t


@case("retry-overrun")
def _retry_overrun(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="drop").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    if bad:
        t.tick().deliver(0, "c1", attempt=2)
    else:
        t.tick().drop(0, "poison").persisted(1)
    return t


@case("stale-ack-accepted")
def _stale_ack_accepted(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    if bad:
        t.ack(0, "c2").persisted(1)
    else:
        t.ack_ignored(0, "c2")
    return t


@case("stale-ack-accepted")
def _ack_from_a_reused_name(bad: bool) -> TraceBuilder:
    """KS-GEN-3: a consumer that rejoins under an old name is a new consumer."""
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").deliver(0, "c2", attempt=2).add("c1")
    if bad:
        t.ack(0, "c1").persisted(1)
    else:
        t.ack_ignored(0, "c1")
    return t


@case("holder-ack-ignored")
def _holder_ack_ignored(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    if bad:
        t.ack_ignored(0, "c1")
    else:
        t.ack(0, "c1").persisted(1)
    return t


@case("stale-nack-accepted")
def _stale_nack_accepted(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    if bad:
        t.nack(0, "c2")
    else:
        t.nack_ignored(0, "c2")
    return t


@case("holder-nack-ignored")
def _holder_nack_ignored(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    if bad:
        t.nack_ignored(0, "c1")
    else:
        t.nack(0, "c1")
    return t


@case("zombie-accepted")
def _zombie_ack_after_a_leave(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").deliver(0, "c2", attempt=2)
    t.zombie("zombie_ack", 0, "c1")
    if bad:
        return t.ack(0, "c1")
    t.ack_ignored(0, "c1", reason="ended")
    return t.ack(0, "c2").persisted(1)


@case("zombie-accepted")
def _zombie_nack_of_a_reused_name(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").add("c1").deliver(0, "c1", attempt=2)
    t.zombie("zombie_nack", 0, "c1")
    if bad:
        return t.nack(0, "c1", attempt=2)
    return t.nack_ignored(0, "c1", reason="ended")


@case("zombie-ack-ignored")
def _zombie_ack_ignored_under_ack_by_id(bad: bool) -> TraceBuilder:
    t = owner(ack_by_id=True).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").deliver(0, "c2", attempt=2)
    t.zombie("zombie_ack", 0, "c1")
    if bad:
        return t.ack_ignored(0, "c1", reason="ended")
    t.ack(0, "c1").persisted(1)
    return t.ack_ignored(0, "c2", reason="resolved")


@case("seek-skip")
def _seek_back_keeps_acked(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1").ack(0, "c1").persisted(1)
    t.seek(0).persisted(0)
    if bad:
        return t
    return t.deliver(0, "c1").ack(0, "c1").persisted(1)


@case("seek-resurrected")
def _seek_forward_delivers_below(bad: bool) -> TraceBuilder:
    t = owner().add("c1", capacity=1)
    t.deliver(t.publish("k"), "c1")
    t.publish("k")
    t.seek(1).persisted(1)
    if bad:
        return t.deliver(0, "c1")
    return t.deliver(1, "c1")


@case("seek-unpersisted")
def _seek_not_persisted(bad: bool) -> TraceBuilder:
    t = owner(persist_interval=3).add("c1")
    t.deliver(t.publish("k"), "c1").deliver(t.publish("j"), "c1")
    t.seek(1)
    if not bad:
        t.persisted(1)
    return t.deliver(1, "c1")


@case("seek-stale-ack")
def _ack_of_a_delivery_the_seek_cut(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1").disconnect("c1")
    t.seek(0).persisted(0).held(0, "inactive", "c1")
    if bad:
        return t.ack(0, "c1").persisted(1)
    return t.ack_ignored(0, "c1")


@case("extended-timeout-early")
def _extended_timeout_early(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick()
    t.extend(0, "c1", 3).extended(0, "c1")  # tick 1: the deadline moves from 2 to 4
    t.tick(2)
    if not bad:
        t.tick()
    return t.timeout(0, "c1")


@case("extension-lost")
def _extension_ignored_for_the_holder(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.extend(0, "c1", 3)
    return t.extend_ignored(0, "c1", reason="not-holder") if bad else t.extended(0, "c1")


@case("extension-lost")
def _extension_unanswered(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.extend(0, "c1", 3)
    if not bad:
        t.extended(0, "c1")
    return t.tick()


@case("zombie-extension")
def _extension_by_a_timed_out_consumer(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=1, backoff_base=2, backoff_max=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick().timeout(0, "c1")  # the message is retrying: nobody holds it
    t.extend(0, "c1", 5)
    return t.extended(0, "c1") if bad else t.extend_ignored(0, "c1", reason="ended")


@case("zombie-extension")
def _extension_by_another_member(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=2).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.extend(0, "c2", 5)
    if bad:
        return t.extended(0, "c2")
    return t.extend_ignored(0, "c2").tick(2).timeout(0, "c1")  # at c1's own deadline: c2's extension moved nothing


@case("premature-timeout")
def _premature_timeout(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick()
    if not bad:
        t.tick()
    t.timeout(0, "c1")
    return t


@case("premature-timeout")
def _timeout_without_ack_timeout(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=0 if bad else 1).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick().timeout(0, "c1")
    return t


@case("double-resolution")
def _double_resolution(bad: bool) -> TraceBuilder:
    t = owner().add("c1", filters=["x*"])
    t.filter(t.publish("k"))
    if bad:
        t.filter(0)
    t.persisted(1)
    return t


@case("unjustified-resolution")
def _poison_drop_under_block(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="block" if bad else "drop").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().drop(0, "poison").persisted(1)
    return t


@case("unjustified-resolution")
def _poison_drop_within_budget(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=1 if bad else 0, poison_policy="drop").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().drop(0, "poison").persisted(1)
    return t


@case("unjustified-resolution")
def _operator_drop_without_skip(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="block").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().blocked(0, attempt=1)
    if bad:
        t.tick().drop(0, "operator").persisted(1)
    else:
        t.skip("k").drop(0, "operator").persisted(1)
    return t


@case("unjustified-resolution")
def _best_effort_reason_outside_best_effort(bad: bool) -> TraceBuilder:
    t = owner().add("c1").disconnect("c1")
    zero = t.publish("k")
    if bad:
        t.drop(zero, "inactive").persisted(1)
    else:
        t.held(zero, "inactive", "c1")
    return t


@case("unjustified-resolution")
def _dead_letter_while_outstanding(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="dead-letter", ack_timeout=1).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick()
    if not bad:
        t.timeout(0, "c1")
    t.dead_letter(0, attempt=1, reason="timeout").persisted(1)
    return t


@case("unjustified-filter")
def _unjustified_filter(bad: bool) -> TraceBuilder:
    t = owner().add("c1", filters=["a*"])
    t.filter(t.publish("a1" if bad else "b1")).persisted(1)
    return t


@case("unfiltered-wait")
def _unfiltered_wait(bad: bool) -> TraceBuilder:
    t = owner().add("c1", filters=["a*"])
    zero = t.publish("b1")
    if bad:
        t.held(zero, "no-consumer")
    else:
        t.filter(zero).persisted(1)
    return t


@case("unjustified-outcome")
def _unjustified_outcome(bad: bool) -> TraceBuilder:
    declared = {"terminal_outcomes": {"discarded": None if bad else "dropped"}}
    t = TraceBuilder(profile="owner", selector="ring", max_redeliveries=0, poison_policy="drop", declared=declared)
    t.add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().emit("outcome", offset=0, key="k", reason="discarded").persisted(1)
    return t


@case("idle-while-ready")
def _idle_without_affinity(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="strict", selector="any").add("c1", capacity=1).add("c2", capacity=1)
    t.deliver(t.publish("x"), "c1")
    one = t.publish("y")
    if bad:
        t.held(one, "capacity", "c1")  # c2 is free: with no key affinity it must take y
    else:
        t.deliver(one, "c2")
    return t


@case("filtered-without-members")
def _filtered_without_members(bad: bool) -> TraceBuilder:
    t = owner()
    zero = t.publish("k")
    if bad:
        t.filter(zero).persisted(1)
    else:
        t.held(zero, "no-consumer")
    return t


@case("dead-letter-mismatch")
def _dead_letter_attempt(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="dead-letter").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().dead_letter(0, attempt=2 if bad else 1, reason="nack").persisted(1)
    return t


@case("dead-letter-mismatch")
def _dead_letter_reason(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="dead-letter").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().dead_letter(0, attempt=1, reason="timeout" if bad else "nack").persisted(1)
    return t


@case("cursor-skip")
def _cursor_skip(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1")
    if bad:
        t.persisted(2)
    return t


@case("cursor-skip")
def _hole_skip(bad: bool) -> TraceBuilder:
    t = owner(persist_ack_holes=True).add("c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1").persisted(0, [[0, 1]] if bad else [[1, 1]])
    return t


@case("cursor-regress")
def _cursor_regress(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("a"), "c1")
    t.ack(0, "c1").persisted(1)
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1").persisted(0 if bad else 2)
    return t


@case("phase-order")
def _phase_order(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=1).add("c1", capacity=1)
    t.deliver(t.publish("a"), "c1")
    t.held(t.publish("b"), "capacity", "c1")
    t.tick()
    if bad:
        t.deliver(1, "c1").timeout(0, "c1")
    else:
        t.timeout(0, "c1").deliver(1, "c1")
    return t


@case("premature-eviction")
def _premature_eviction(bad: bool) -> TraceBuilder:
    t = owner(evict_after=2).add("c1").disconnect("c1")
    t.tick()
    if not bad:
        t.tick()
    return t.evicted("c1")


@case("premature-eviction")
def _eviction_of_a_connected_member(bad: bool) -> TraceBuilder:
    t = owner(evict_after=1).add("c1")
    if not bad:
        t.disconnect("c1")
    return t.tick().evicted("c1")


@case("reconnect-ignored")
def _evicted_after_a_reconnect(bad: bool) -> TraceBuilder:
    t = owner(evict_after=1).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.disconnect("c1").reconnect("c1")
    t.tick()
    if bad:
        t.evicted("c1").deliver(0, "c2", attempt=2)
    return t


@case("reconnect-ignored")
def _inactive_after_a_reconnect(bad: bool) -> TraceBuilder:
    t = owner().add("c1").disconnect("c1")
    zero = t.publish("k")
    t.held(zero, "inactive", "c1")
    t.reconnect("c1")
    if bad:
        t.held(t.publish("j"), "inactive", "c1")
    else:
        t.deliver(zero, "c1")
        t.deliver(t.publish("j"), "c1")
    return t


@case("misrouted-bucket")
def _misrouted_bucket(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4)
    t.publish("k", hash=0xC000, segment=0, bucket=1 if bad else 3)
    return t


@case("bucket-misassigned")
def _bucket_misassigned(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1").add("c2")
    t.deliver(t.publish("k", hash=0xC000, segment=0, bucket=3), "c1" if bad else "c2")
    return t


@case("bucket-misassigned")
def _single_bucket_segments_rotate(bad: bool) -> TraceBuilder:
    """KS-BKT-3 `sorted`: segment s's members are rotated by s places, so single-bucket segments spread out."""
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=2).add("c1").add("c2")
    t.seal(0).segment(1, 1, 0, 0x7FFF, predecessor=0).segment(2, 1, 0x8000, 0xFFFF, predecessor=0)
    t.deliver(t.publish("a", hash=0x10000, segment=1, bucket=0), "c2" if bad else "c1")  # segment order c2, c1
    t.deliver(t.publish("b", hash=0x90000000, segment=2, bucket=0), "c2")  # segment order c1, c2
    return t


def _sticky(**config: object) -> TraceBuilder:
    return TraceBuilder(profile="owner", selector="buckets", bucket_budget=4, bucket_assignment="sticky", **config)


def _entry(t: TraceBuilder, key: str, bucket: int) -> int:
    """Publish an entry of segment 0's bucket `bucket` (N = 4: hashB = bucket * 0x4000)."""
    return t.publish(key, hash=bucket * 0x4000, segment=0, bucket=bucket)


@case("bucket-misassigned")
def _bucket_with_two_owners(bad: bool) -> TraceBuilder:
    """KS-BKT-3 under a policy the checker cannot predict: still one target per bucket within an epoch."""
    t = _sticky().add("c1").add("c2")
    t.deliver(_entry(t, "a", 0), "c1").ack(0, "c1").persisted(1)
    t.deliver(_entry(t, "b", 0), "c2" if bad else "c1")
    return t


@case("idle-while-ready")
def _bucket_that_stays_is_not_withheld(bad: bool) -> TraceBuilder:
    """KS-BKT-4 withholds a moving bucket only: after a join that leaves bucket 3 with c2 (`sorted` over c0, c1, c2),
    another key of the bucket goes at once although c2 still holds a delivery of the earlier epoch; broken: it
    waits for that delivery's ack as if the bucket were moving."""
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1").add("c2")
    t.deliver(t.publish("a", hash=0xC000, segment=0, bucket=3), "c2")
    t.add("c0")
    later = t.publish("b", hash=0xC001, segment=0, bucket=3)
    if bad:
        t.tick().ack(0, "c2").persisted(1)
    t.deliver(later, "c2")
    return t


@case("unstable-buckets")
def _bucket_moved_between_stayers(bad: bool) -> TraceBuilder:
    t = _sticky().add("c1").add("c2")
    t.deliver(_entry(t, "a", 2), "c2").ack(0, "c2").persisted(1)
    t.add("c3")  # only c3 joined: bucket 2 may stay with c2 or move to c3, not to c1
    t.deliver(_entry(t, "b", 2), "c1" if bad else "c3")
    return t


@case("unstable-buckets")
def _joiner_takes_more_than_its_share(bad: bool) -> TraceBuilder:
    t = _sticky().add("c1")
    for bucket in range(4):
        t.deliver(_entry(t, f"k{bucket}", bucket), "c1").ack(bucket, "c1").persisted(bucket + 1)
    t.add("c2")  # k = 2: the joiner's share is ceil(4/2) = 2 buckets
    for bucket in range(4):
        t.deliver(_entry(t, f"j{bucket}", bucket), "c2" if bad or bucket >= 2 else "c1")
    return t


def _assigned(t: TraceBuilder, bucket: int, consumer: str, kind: str = "bucket_assigned") -> TraceBuilder:
    return t.emit(kind, segment=0, bucket=bucket, consumer=consumer)


@case("unstable-buckets")
def _join_hands_a_bucket_to_a_stayer(bad: bool) -> TraceBuilder:
    """Judged on the implementation's own handoffs, before any delivery shows the move."""
    t = _sticky().add("c1")
    for bucket in range(4):
        _assigned(t, bucket, "c1")
    t.add("c2")  # announces every bucket's target again (only the last change before a decision is judged)
    for bucket, owner in enumerate(("c1", "c1", "c1", "c2")):
        _assigned(t, bucket, owner)
    t.add("c3")  # c1: 0-2, c2: 3; the joiner c3 may take a bucket of c1, nothing may move to c2
    _assigned(t, 2, "c2" if bad else "c3", kind="bucket_withheld")
    return t


@case("unstable-buckets")
def _leave_moves_only_the_leavers_buckets(bad: bool) -> TraceBuilder:
    t = _sticky().add("c1")
    for bucket in range(4):
        _assigned(t, bucket, "c1")
    _assigned(_assigned(t.add("c2"), 2, "c2"), 3, "c2")
    t.add("c3")
    for bucket, owner in enumerate(("c1", "c1", "c2", "c3")):  # every bucket announced again
        _assigned(t, bucket, owner)
    t.remove("c3")  # c3's bucket 3 goes to c2; c1's buckets stay
    _assigned(t, 3, "c2")
    if bad:
        _assigned(t, 0, "c2")
    return t


@case("bucket-split-owner")
def _bucket_split_owner(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c2")
    t.deliver(t.publish("a", hash=0x10000, segment=0, bucket=0), "c2")
    t.add("c1")
    one = t.publish("b", hash=0x20000, segment=0, bucket=0)
    if bad:
        t.deliver(one, "c1")
    else:
        t.emit("bucket_withheld", segment=0, bucket=0, consumer="c1").held(one, "handoff", "c1")
    return t


def _successor_goes(t: TraceBuilder, one: int, bad: bool) -> TraceBuilder:
    """m`one` of a successor segment goes while m0, of an ancestor, is outstanding (bad), or after its ack."""
    if bad:
        return t.deliver(one, "c1")
    return t.held(one, "predecessor", "c1").ack(0, "c1").deliver(one, "c1").persisted(1)


@case("successor-first")
def _successor_first(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1")
    t.deliver(t.publish("k", hash=0x10000, segment=0, bucket=0), "c1")
    t.seal(0).segment(1, 4, 0, 0xFFFF, predecessor=0)
    one = t.publish("k", hash=0x10000, segment=1, bucket=0)
    return _successor_goes(t, one, bad)


@case("successor-first")
def _merged_successor_first(bad: bool) -> TraceBuilder:
    """A merged segment waits for its second (upper) predecessor too."""
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=2).add("c1")
    t.seal(0).segment(1, 1, 0, 0x7FFF, predecessor=0).segment(2, 1, 0x8000, 0xFFFF, predecessor=0)
    t.deliver(t.publish("k", hash=0x90000000, segment=2, bucket=0), "c1")
    t.seal(1).seal(2).segment(3, 2, 0, 0xFFFF, predecessor=1, second_predecessor=2)
    one = t.publish("k", hash=0x90000000, segment=3, bucket=0)
    return _successor_goes(t, one, bad)


@case("successor-first")
def _grandparent_successor_first(bad: bool) -> TraceBuilder:
    """A rollover of a segment that received nothing: its successor still waits for the grandparent."""
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1")
    t.deliver(t.publish("k", hash=0x10000, segment=0, bucket=0), "c1")
    t.seal(0).segment(1, 4, 0, 0xFFFF, predecessor=0).seal(1).segment(2, 4, 0, 0xFFFF, predecessor=1)
    one = t.publish("k", hash=0x10000, segment=2, bucket=0)
    return _successor_goes(t, one, bad)


@case("checkpoint-skip")
def _checkpoint_skip(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1")
    t.deliver(t.publish("k", hash=0x10000, segment=0, bucket=0), "c1")
    if not bad:
        t.ack(0, "c1").persisted(1)
    t.checkpoint(0, 0, 1)
    return t


@case("checkpoint-skip")
def _checkpoint_regress(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1")
    t.deliver(t.publish("k", hash=0x10000, segment=0, bucket=0), "c1")
    t.ack(0, "c1").persisted(1).checkpoint(0, 0, 1)
    t.deliver(t.publish("k", hash=0x10000, segment=0, bucket=0), "c1")
    t.ack(1, "c1").persisted(2).checkpoint(0, 0, 0 if bad else 2)
    return t


@case("checkpoint-resurrected")
def _checkpoint_resurrected(bad: bool) -> TraceBuilder:
    """Bucket 1's message is acked and checkpointed while bucket 0's holds the global cursor back: after a restart
    with checkpoint_resume only bucket 0's message comes again."""
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=2, checkpoint_resume=True).add("c1")
    t.deliver(t.publish("a", hash=0x10, segment=0, bucket=0), "c1")
    t.deliver(t.publish("b", hash=0x8010, segment=0, bucket=1), "c1")
    t.ack(1, "c1").persisted(0).checkpoint(0, 1, 2)
    t.restart().add("c1")
    t.deliver(0, "c1")
    if bad:
        t.deliver(1, "c1")
    t.ack(0, "c1")
    if bad:
        t.ack(1, "c1")
    return t.persisted(2)


def _batch_of_three() -> TraceBuilder:
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=2).add("c1", capacity=1).add("c2")
    for key in ("a", "b", "c"):
        t.publish(key, hash=0x10, segment=0, bucket=0, entry=0)
    return t


def _ack_in_order(t: TraceBuilder, holders: list[str]) -> TraceBuilder:
    for offset, holder in enumerate(holders):
        t.ack(offset, holder).persisted(offset + 1)
    return t


@case("entry-split")
def _entry_split_interrupted(bad: bool) -> TraceBuilder:
    """A batch goes whole to one consumer, past its capacity; broken: its second message goes elsewhere."""
    t = _batch_of_three()
    t.deliver(0, "c1").deliver(1, "c2" if bad else "c1").deliver(2, "c1")
    return _ack_in_order(t, ["c1", "c2" if bad else "c1", "c1"])


@case("entry-split")
def _entry_split_later_first(bad: bool) -> TraceBuilder:
    """Broken: the batch's second message is delivered first."""
    t = _batch_of_three()
    order = (1, 0, 2) if bad else (0, 1, 2)
    for offset in order:
        t.deliver(offset, "c1")
    return _ack_in_order(t, ["c1"] * 3)


@case("entry-split")
def _entry_split_unfinished(bad: bool) -> TraceBuilder:
    """Broken: the op ends with the batch's last message undelivered (delivered only at the next tick)."""
    t = _batch_of_three()
    t.deliver(0, "c1").deliver(1, "c1")
    if bad:
        t.tick()
    t.deliver(2, "c1")
    return _ack_in_order(t, ["c1"] * 3)


def _key_batch(capacity: int = 1, **config: object) -> TraceBuilder:
    """A key-based batch outside buckets (spec section 17, PIP-34): three messages of one key, one entry."""
    t = owner(**config).add("c1", capacity=capacity)
    for _ in range(3):
        t.publish("k", entry=0)
    return t


@case("entry-split")
def _entry_split_key_batch(bad: bool) -> TraceBuilder:
    """A key-based batch goes whole to one consumer; broken: its last message waits for the next op. (Capacity 3; a
    batch past the capacity is test_key_batch_past_the_capacity_is_not_an_overrun below.)"""
    t = _key_batch(capacity=3)
    t.deliver(0, "c1").deliver(1, "c1")
    if bad:
        t.tick()
    t.deliver(2, "c1")
    return _ack_in_order(t, ["c1"] * 3)


@case("permit-overrun")
def _permit_overrun_after_a_key_batch(bad: bool) -> TraceBuilder:
    """A key-based batch rides on one permit and takes the consumer below zero; broken: the next message is sent
    with the permits still at or below zero (a grant of two after a batch of three leaves none)."""
    t = _key_batch(flow_control="permits")
    t.deliver(0, "c1").deliver(1, "c1").deliver(2, "c1")
    one = t.publish("j")
    t.flow("c1", 2 if bad else 3)
    t.deliver(one, "c1")
    return t


@case("idle-while-ready")
def _idle_key_batch(bad: bool) -> TraceBuilder:
    """A key-based batch is judged like any message of its key: broken, it waits with its consumer free."""
    t = owner().add("c1", capacity=5)
    for _ in range(2):
        t.publish("k", entry=0)
    if bad:
        t.tick().tick()  # the first tick ends with the batch undelivered
    t.deliver(0, "c1").deliver(1, "c1")
    return _ack_in_order(t, ["c1", "c1"])


@case("best-effort-redelivery")
def _best_effort_redelivery(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="best-effort", selector="ring").add("c1")
    t.deliver(t.publish("k"), "c1")
    if bad:
        t.tick().deliver(0, "c1")
    else:
        t.ack(0, "c1")
    return t


@case("best-effort-redelivery")
def _best_effort_late_outcome(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="best-effort", selector="ring").add("c1")
    zero = t.publish("k")
    if bad:
        t.tick()
    t.deliver(zero, "c1")
    return t


# --- 2.2 checked at the end of each op -------------------------------------------------------------


@case("missed-timeout")
def _missed_timeout(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=1).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick()
    if not bad:
        t.timeout(0, "c1")
    return t


@case("extended-timeout-missed")
def _extended_timeout_missed(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=3).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.extend(0, "c1", 2).extended(0, "c1")  # tick 0: the deadline moves from 3 to 2 (it replaces, from now)
    t.tick(2)
    if not bad:
        t.timeout(0, "c1")
    return t


@case("missed-timeout")
def _missed_timeout_after_an_ignored_extension(bad: bool) -> TraceBuilder:
    t = owner(ack_timeout=2).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.extend(0, "c2", 5).extend_ignored(0, "c2")  # another member's extension moves nobody's deadline (KS-RTY-9)
    t.tick(2)
    if not bad:
        t.timeout(0, "c1")
    return t


@case("poison-ignored")
def _poison_ignored(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="drop").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick()
    if not bad:
        t.drop(0, "poison").persisted(1)
    return t


@case("missed-eviction")
def _missed_eviction(bad: bool) -> TraceBuilder:
    t = owner(evict_after=1).add("c1").disconnect("c1").tick()
    if not bad:
        t.evicted("c1")
    return t


@case("skip-ignored")
def _skip_ignored(bad: bool) -> TraceBuilder:
    t = owner(max_redeliveries=0, poison_policy="block").add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().blocked(0, attempt=1).skip("k")
    if not bad:
        t.drop(0, "operator").persisted(1)
    return t


@case("persist-late")
def _persist_late(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1")
    if not bad:
        t.persisted(1)
    return t.tick()


@case("persist-late")
def _persist_late_debounced(bad: bool) -> TraceBuilder:
    t = owner(persist_interval=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").tick()
    if not bad:
        t.persisted(1)
    return t


@case("persist-late")
def _persist_late_holes(bad: bool) -> TraceBuilder:
    t = owner(persist_ack_holes=True).add("c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1")
    if not bad:
        t.persisted(0, [[1, 1]])
    return t.tick()


@case("persist-early")
def _persist_early(bad: bool) -> TraceBuilder:
    t = owner(persist_interval=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1")
    if not bad:
        t.tick()
    return t.persisted(1)


@case("persist-early")
def _persist_too_often(bad: bool) -> TraceBuilder:
    t = owner(persist_interval=2).add("c1")
    t.deliver(t.publish("a"), "c1")
    t.ack(0, "c1").tick().persisted(1)
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1").tick()
    if bad:
        t.persisted(2)
    else:
        t.tick().persisted(2)
    return t


@case("idle-while-ready")
def _idle_while_ready(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    zero = t.publish("k")
    if not bad:
        t.deliver(zero, "c1")
    return t


@case("idle-while-ready")
def _idle_after_a_leave(bad: bool) -> TraceBuilder:
    """KS-RTY-7: messages returned by a leaving consumer are pending at once."""
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1")
    if not bad:
        t.deliver(0, "c2", attempt=2)
    return t


@case("idle-while-ready")
def _idle_under_buckets(bad: bool) -> TraceBuilder:
    """KS-ISO-1 under selector buckets: a message of a bucket neither withheld nor behind a predecessor goes."""
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=4).add("c1").add("c2")
    t.deliver(t.publish("a", hash=0x10000, segment=0, bucket=0), "c1")
    one = t.publish("b", hash=0xC000, segment=0, bucket=3)
    if not bad:
        t.deliver(one, "c2")
    return t


SLOT_MATES = ("k355", "k930")
"""Two keys of one `pulsar-consistent` slot (58605): the test below proves it with the spec's formula."""


def test_the_slot_mates_share_a_slot() -> None:
    from ks_spec.slots import slot_of

    mate, key = SLOT_MATES
    assert slot_of("pulsar-consistent", mate) == slot_of("pulsar-consistent", key)


@case("idle-while-ready")
def _idle_behind_a_slot_mate_of_this_epoch(bad: bool) -> TraceBuilder:
    """KS-DRN-3: a slot-mate delivered in this epoch sits at the slot's target, so it explains no hold."""
    mate, key = SLOT_MATES
    t = TraceBuilder(profile="owner", selector="pulsar-consistent", drain_granularity="hash").add("c1", capacity=5)
    t.deliver(t.publish(mate), "c1")
    if not bad:
        t.add("c2", capacity=5)  # a new epoch: the slot-mate may now sit at its old owner
    t.held(t.publish(key), "draining", "c2" if not bad else "c1")
    return t


@case("idle-while-ready")
def _idle_behind_a_slot_mate_per_key(bad: bool) -> TraceBuilder:
    """KS-DRN-3: only `drain_granularity = "hash"` lets a slot-mate hold a key back."""
    mate, key = SLOT_MATES
    granularity = "key" if bad else "hash"
    t = TraceBuilder(profile="owner", selector="pulsar-consistent", drain_granularity=granularity)
    t.add("c1", capacity=5)
    t.deliver(t.publish(mate), "c1")
    t.add("c2", capacity=5)
    t.held(t.publish(key), "draining", "c2")
    return t


@case("unjustified-hold")
def _unjustified_hold_at_the_target(bad: bool) -> TraceBuilder:
    """KS-DRN-2, KS-DRN-3: PIP-379 holds only hashes whose owner changed; a slot whose target still holds its
    slot-mate's delivery has nothing to drain."""
    mate, key = SLOT_MATES
    t = TraceBuilder(profile="owner", selector="pulsar-consistent", drain_granularity="hash").add("c1", capacity=5)
    t.deliver(t.publish(mate), "c1")
    t.add("c2", capacity=5)  # a new epoch, which may or may not have moved the slot
    t.held(t.publish(key), "draining", "c1" if bad else "c2")
    return t


@case("unjustified-hold")
def _unjustified_hold_after_a_leave(bad: bool) -> TraceBuilder:
    """KS-DRN-3: the leave of another member moves no key of c2's; with the slot-mate at c2 nothing drains."""
    mate, key = SLOT_MATES
    t = TraceBuilder(profile="owner", selector="pulsar-consistent", drain_granularity="hash")
    t.add("c1", capacity=5).add("c2", capacity=5)
    t.deliver(t.publish(mate), "c2")
    t.remove("c1")
    one = t.publish(key)
    if bad:
        t.held(one, "draining", "c2")
    else:
        t.deliver(one, "c2")
    return t


@case("unjustified-hold")
def _unjustified_hold_behind_a_slot_mate_of_this_epoch(bad: bool) -> TraceBuilder:
    """KS-DRN-3: a slot-mate delivered in this epoch (no filters) sits at the slot's target, wherever the hold says
    the target is; only a slot-mate delivered before the last membership change may sit at an old owner."""
    mate, key = SLOT_MATES
    t = TraceBuilder(profile="owner", selector="pulsar-consistent", drain_granularity="hash")
    t.add("c1", capacity=1)
    if not bad:
        t.deliver(t.publish(mate), "c1")
    t.add("c2", capacity=5)  # the bad trace delivers the slot-mate after the join: the slot's target is c1 then
    if bad:
        t.deliver(t.publish(mate), "c1")
    t.held(t.publish(key), "draining", "c2")  # c1 is full, so idle-while-ready cannot tell
    return t


@case("unjustified-hold")
def _unjustified_hold_without_a_target(bad: bool) -> TraceBuilder:
    """KS-DRN-2: a hold for draining that names no target is judged all the same: nothing of its slot is
    outstanding from an earlier epoch, awaiting or blocked, so nothing can drain."""
    mate, key = SLOT_MATES
    t = TraceBuilder(profile="owner", selector="pulsar-consistent", drain_granularity="hash")
    t.add("c1", capacity=1)
    t.deliver(t.publish(mate), "c1")
    if not bad:
        t.add("c2", capacity=5)  # a new epoch: the slot-mate may now sit at its old owner
    t.held(t.publish(key), "draining")
    return t


@case("phase-order")
def _phase_order_of_danube(bad: bool) -> TraceBuilder:
    """KS-GEN-7: only `tick_order = "danube"` redelivers a ready retry before phase 4's eviction."""
    order = "standard" if bad else "danube"
    t = strict(tick_order=order, backoff_base=1, evict_after=1).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.disconnect("c2")
    t.tick()
    t.deliver(0, "c1", attempt=2).evicted("c2")
    return t


@case("missing-outcome")
def _missing_outcome(bad: bool) -> TraceBuilder:
    t = TraceBuilder(profile="best-effort", selector="ring").add("c1")
    zero = t.publish("k")
    if not bad:
        t.deliver(zero, "c1")
    return t


def _reported(**config: object) -> TraceBuilder:
    """A `buckets` trace whose split points and merged N are the dispatcher's (layout reported, KS-BKT-11)."""
    return TraceBuilder(profile="owner", selector="buckets", bucket_budget=4, layout="reported", **config)


@case("invalid-layout")
def _split_children_overlap(bad: bool) -> TraceBuilder:
    """A split off the midpoint is valid; children that both claim the split point are not."""
    t = _reported().add("c1")
    t.seal(0).segment(1, 2, 0, 0x2FFF, predecessor=0).segment(2, 2, 0x2FFF if bad else 0x3000, 0xFFFF, predecessor=0)
    t.deliver(t.publish("k", hash=0x40000000, segment=2, bucket=0), "c1")  # routed by the reported split point
    return t


@case("invalid-layout")
def _split_point_outside(bad: bool) -> TraceBuilder:
    """The split point must lie strictly inside the parent: a child over the whole range and an empty one is no
    split, nor is a lower child reaching past the parent."""
    t = _reported()
    t.seal(0).segment(1, 2, 0, 0xFFFF if bad else 0xFFFE, predecessor=0).segment(2, 2, 0xFFFF, 0xFFFF, predecessor=0)
    t.publish("k", hash=0x10000, segment=1, bucket=0)
    return t


@case("invalid-layout")
def _merged_range(bad: bool) -> TraceBuilder:
    """A merged segment's N is the dispatcher's (1, not the imposed 2 + 2); its range must cover both parents."""
    t = _reported()
    t.seal(0).segment(1, 2, 0, 0x7FFF, predecessor=0).segment(2, 2, 0x8000, 0xFFFF, predecessor=0)
    t.seal(1).seal(2).segment(3, 1, 0, 0xFFFE if bad else 0xFFFF, predecessor=1, second_predecessor=2)
    t.publish("k", hash=0x10000, segment=3, bucket=0)
    return t


@case("invalid-layout")
def _reported_n_above_max(bad: bool) -> TraceBuilder:
    """A merged segment's N is the dispatcher's choice within 1 .. bucket_max."""
    t = _reported(bucket_max=8)
    t.seal(0).segment(1, 2, 0, 0x7FFF, predecessor=0).segment(2, 2, 0x8000, 0xFFFF, predecessor=0)
    t.seal(1).seal(2).segment(3, 9 if bad else 8, 0, 0xFFFF, predecessor=1, second_predecessor=2)
    t.publish("k", hash=0x10000, segment=3, bucket=0)
    return t


@case("invalid-layout")
def _split_children_keep_half(bad: bool) -> TraceBuilder:
    """The split point is the dispatcher's; a child's N is still max(1, N / 2) (spec section 17)."""
    t = _reported()
    t.seal(0).segment(1, 3 if bad else 2, 0, 0x0FFF, predecessor=0).segment(2, 2, 0x1000, 0xFFFF, predecessor=0)
    t.publish("k", hash=0x10000, segment=1, bucket=0)
    return t


@case("invalid-layout")
def _routed_before_reported(bad: bool) -> TraceBuilder:
    """A segment is reported (segment_created) before anything is routed by it."""
    t = _reported()
    t.seal(0)
    if bad:
        t.publish("k", hash=0x10000, segment=1, bucket=0)
    t.segment(1, 2, 0, 0x7FFF, predecessor=0).segment(2, 2, 0x8000, 0xFFFF, predecessor=0)
    if not bad:
        t.publish("k", hash=0x10000, segment=1, bucket=0)
    return t


def test_a_reported_split_point_is_the_layout_routing_is_judged_by() -> None:
    """KS-BKT-1 against the reported layout: a key above the reported split point belongs to the upper child, so
    placing it in the lower child (as the imposed midpoint would) is misrouted."""
    t = _reported()
    t.seal(0).segment(1, 2, 0, 0x2FFF, predecessor=0).segment(2, 2, 0x3000, 0xFFFF, predecessor=0)
    t.publish("k", hash=0x40000000, segment=1, bucket=0)
    assert [a.name for a in check_events(t.events).anomalies] == ["misrouted-bucket"]


# --- 2.3 checked at a quiescent event ------------------------------------------------------------


@case("lost")
def _lost(bad: bool) -> TraceBuilder:
    t = owner().add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1")
    if not bad:
        t.deliver(0, "c2", attempt=2).ack(0, "c2").persisted(1)
    return t.quiescent()


@case("drain-stuck")
def _drain_stuck(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.add("c2")
    t.held(t.publish("k"), "draining", "c2")
    t.ack(0, "c1")
    if not bad:
        t.deliver(1, "c2")
    t.persisted(1)
    if not bad:
        t.ack(1, "c2").persisted(2)
    return t.quiescent()


@case("stuck-key")
def _stuck_key(bad: bool) -> TraceBuilder:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    if not bad:
        t.ack(0, "c1").persisted(1)
    return t.quiescent()


@case("stuck-key")
def _returned_behind_a_full_member(bad: bool) -> TraceBuilder:
    """KS-LIV-1, not KS-MEM-1: a returned message whose only eligible member never frees a place is pending."""
    t = owner().add("c1", capacity=1).add("c2", capacity=1)
    t.deliver(t.publish("x"), "c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1")
    if not bad:
        t.ack(0, "c2").deliver(1, "c2", attempt=2).persisted(1).ack(1, "c2").persisted(2)
    return t.quiescent()


@case("stuck-key")
def _returned_behind_a_blocked_key(bad: bool) -> TraceBuilder:
    """KS-LIV-1, not KS-MEM-1: a returned message of a blocked key waits for the operator."""
    t = owner(max_redeliveries=0, poison_policy="block").add("c1", capacity=2).add("c2")
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().blocked(0, attempt=1)
    t.remove("c1")
    if not bad:
        t.skip("k").drop(0, "operator").deliver(1, "c2", attempt=2).persisted(1).ack(1, "c2").persisted(2)
    return t.quiescent()


@case("cursor-stall")
def _cursor_stall(bad: bool) -> TraceBuilder:
    t = owner(persist_interval=5).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1")
    if not bad:
        t.tick().persisted(1)
    return t.quiescent()


# --- heartbeat-driven systems (KS-GEN-8, KS-GEN-9): what each option allows, and its own rule -------------


def _freed_by_an_ack(read_trigger: str, read_at_the_next_tick: bool) -> TraceBuilder:
    """A window of 1: an ack frees it while m1 is unread; m1 is delivered only by the next tick's pass."""
    t = owner(window=1, read_trigger=read_trigger).add("c1", capacity=2)
    zero, one = t.publish("k"), t.publish("x")
    t.tick().deliver(zero, "c1")
    t.ack(zero, "c1").persisted(1)  # the ack ends with m1 unread: allowed with heartbeat reads only
    t.tick()
    if read_at_the_next_tick:
        t.deliver(one, "c1")
    return t


@case("idle-while-ready")
def _idle_when_a_heartbeat_skips_its_read(bad: bool) -> TraceBuilder:
    """KS-GEN-8: with heartbeat reads, the tick after the ack that freed the window must read and deliver."""
    return _freed_by_an_ack("heartbeat", read_at_the_next_tick=not bad)


def test_an_ack_that_frees_the_window_may_leave_the_read_to_the_next_tick_only_with_heartbeat_reads() -> None:
    """KS-GEN-6 / KS-GEN-8: the trace Danube gives is valid under heartbeat reads and a violation under every-op."""
    assert _anomaly_names(_freed_by_an_ack("heartbeat", read_at_the_next_tick=True)) == []
    events = _freed_by_an_ack("every-op", read_at_the_next_tick=True).events
    ack = next(int(e["seq"]) for e in events if e["event"] == "ack")
    idle_ops = {a.seq for a in check_events(events).anomalies if a.name == "idle-while-ready"}
    assert ack in idle_ops  # under every-op the ack's own pass had to read and deliver m1


@case("idle-while-ready")
def _idle_when_a_read_message_waits_for_the_heartbeat(bad: bool) -> TraceBuilder:
    """KS-GEN-8: a message already read (held) is delivered by the ack that frees its consumer, not at a tick."""
    t = owner(window=2, read_trigger="heartbeat").add("c1", capacity=1)
    zero, one = t.publish("k"), t.publish("x")
    t.tick().deliver(zero, "c1").held(one, "capacity", "c1")
    t.ack(zero, "c1")
    if not bad:
        t.deliver(one, "c1")
    return t.persisted(1)


def _late_timeout(slack: int, late: int) -> TraceBuilder:
    """An ack timeout of 1 for a delivery at tick 0: it times out `late` ticks after tick 1."""
    t = owner(ack_timeout=1, timer_slack=slack).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.tick(1 + late)
    return t.timeout(0, "c1")


@case("missed-timeout")
def _missed_timeout_beyond_the_slack(bad: bool) -> TraceBuilder:
    """KS-GEN-9: with timer_slack 1 a timeout may come one tick late, not two."""
    return _late_timeout(slack=1, late=2 if bad else 1)


def test_a_timeout_one_tick_late_is_missed_without_slack() -> None:
    """KS-RTY-3: the trace a one-tick slack allows is a missed timeout when no slack is declared."""
    assert _anomaly_names(_late_timeout(slack=0, late=1)) == ["missed-timeout"]


@case("premature-timeout")
def _premature_timeout_despite_the_slack(bad: bool) -> TraceBuilder:
    """KS-GEN-9: the slack lets a timer fire late, never early (KS-RTY-2 stands)."""
    t = owner(ack_timeout=2, timer_slack=2).add("c1")
    t.deliver(t.publish("k"), "c1")
    return t.tick(1 if bad else 3).timeout(0, "c1")


@case("missed-eviction")
def _missed_eviction_beyond_the_slack(bad: bool) -> TraceBuilder:
    """KS-GEN-9: with timer_slack 1 an eviction due at tick 1 may come at tick 2, not later."""
    t = owner(evict_after=1, timer_slack=1).add("c1").disconnect("c1")
    return t.tick(3 if bad else 2).evicted("c1")


@case("persist-late")
def _persist_late_beyond_the_slack(bad: bool) -> TraceBuilder:
    """KS-GEN-9: with timer_slack 1 a persistence due after an ack at tick 0 may wait until phase 6 of tick 1."""
    t = owner(timer_slack=1).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").tick()
    if not bad:
        t.persisted(1)
    return t.tick()


@case("idle-while-ready")
def _idle_when_a_retry_is_later_than_the_slack(bad: bool) -> TraceBuilder:
    """KS-GEN-9: a retry made ready at tick 1 (back-off 1) may wait one tick with timer_slack 1, not two."""
    t = owner(backoff_base=1, backoff_max=1, timer_slack=1).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick(3 if bad else 2)
    return t.deliver(0, "c1", attempt=2)


# --- a cursor written on its advance (KS-CUR-12): Danube's and Pulsar's debounces ---------------------------------


def _two_acks_at_tick_0(t: TraceBuilder, persist_first: bool = True) -> TraceBuilder:
    """Two messages of one key acked at tick 0: the first ack moves the cursor to 1, the second to 2."""
    t.add("c1")
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1")
    if persist_first:
        t.persisted(1)
    return t.ack(1, "c1")


@case("persist-late")
def _advance_written_at_the_move(bad: bool) -> TraceBuilder:
    """KS-CUR-12: with persist_trigger advance the first move (nothing persisted yet) is written at its own op."""
    return _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=2), persist_first=not bad)


@case("persist-late")
def _advance_within_the_interval_waits_for_the_next_move(bad: bool) -> TraceBuilder:
    """KS-CUR-12: a move within the interval may wait for the next move (advance); by the tick rule it is late."""
    trigger = {} if bad else {"persist_trigger": "advance"}
    t = _two_acks_at_tick_0(owner(persist_interval=2, **trigger))
    return t.tick().tick().tick()


@case("persist-late")
def _advance_due_at_a_later_move(bad: bool) -> TraceBuilder:
    """KS-CUR-12: the next move after the interval writes the cursor at once."""
    t = _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=2))
    t.tick().tick()
    t.deliver(t.publish("k"), "c1")
    t.ack(2, "c1")
    return t if bad else t.persisted(3)


@case("persist-late")
def _flush_writes_what_the_debounce_held(bad: bool) -> TraceBuilder:
    """KS-CUR-12: with persist_flush 2 a cursor still unpersisted is written in phase 6 of tick 2."""
    t = _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=3, persist_flush=2))
    t.tick().tick()
    if not bad:
        t.persisted(2)
    return t.tick()


@case("persist-late")
def _flush_may_wait_for_the_slack(bad: bool) -> TraceBuilder:
    """KS-CUR-12, KS-GEN-9: with timer_slack 1 the flush due at tick 2 may come at tick 3, not later."""
    t = _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=5, persist_flush=2, timer_slack=1))
    t.tick().tick().tick()
    if not bad:
        t.persisted(2)
    return t.tick()


@case("persist-early")
def _advance_write_without_a_move(bad: bool) -> TraceBuilder:
    """KS-CUR-7: with persist_trigger advance a write in a tick that moved nothing, and no flush due, is early."""
    t = _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=2))
    t.tick().tick()
    if bad:
        t.persisted(2)
    return t.tick()


def test_cursor_stall_is_not_judged_under_a_declared_advance_trigger_without_a_flush() -> None:
    """KS-LIV-2 given up by persist_trigger advance alone (section 21.1): an idle cursor may stay unwritten."""
    t = _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=2))
    t.tick().tick().tick().quiescent()
    assert check_events(t.events).verdict is Verdict.VALID
    flushed = _two_acks_at_tick_0(owner(persist_trigger="advance", persist_interval=2, persist_flush=3))
    flushed.tick().tick().quiescent()
    assert "cursor-stall" in _anomaly_names(flushed)


# --- delayed delivery (KS-ORD-5 to KS-ORD-7) ---


@case("delivered-before-due")
def _delivered_before_due(bad: bool) -> TraceBuilder:
    """KS-ORD-5: a message due at tick 2 goes at tick 2, not at tick 1."""
    t = owner().add("c1")
    m = t.publish_delayed("k", 2)
    t.tick(1 if bad else 2)
    return t.deliver(m, "c1")


@case("delivered-before-due")
def _delivered_before_due_despite_the_slack(bad: bool) -> TraceBuilder:
    """KS-GEN-9: the slack lets a delayed message go late, never early."""
    t = owner(timer_slack=2).add("c1")
    m = t.publish_delayed("k", 2)
    t.tick(1 if bad else 4)
    return t.deliver(m, "c1")


@case("blocked-behind-delayed")
def _blocked_behind_delayed(bad: bool) -> TraceBuilder:
    """KS-ORD-6: a later message of the key goes while the delayed one waits (the kit's own example)."""
    t = owner().add("c1")
    t.publish_delayed("k", 3)
    later = t.publish("k")
    if not bad:
        t.deliver(later, "c1")
    return t


@case("blocked-behind-delayed")
def _blocked_behind_delayed_in_the_strict_profile(bad: bool) -> TraceBuilder:
    """KS-ORD-6, strict: a message not yet due is not an earlier unresolved one (no strict-overlap either)."""
    t = strict().add("c1")
    t.publish_delayed("k", 2)
    later = t.publish("k")
    if not bad:
        t.deliver(later, "c1")
    return t


@case("due-left-waiting")
def _due_left_waiting(bad: bool) -> TraceBuilder:
    """KS-ORD-7: due at tick 1, the message must go in tick 1's pass."""
    t = owner().add("c1")
    m = t.publish_delayed("k", 1)
    t.tick()
    if not bad:
        t.deliver(m, "c1")
    return t


@case("due-left-waiting")
def _due_left_waiting_beyond_the_slack(bad: bool) -> TraceBuilder:
    """KS-ORD-7, KS-GEN-9: with timer_slack 1 a message due at tick 1 may wait until tick 2, not tick 3."""
    t = owner(timer_slack=1).add("c1")
    m = t.publish_delayed("k", 1)
    t.tick(3 if bad else 2)
    return t.deliver(m, "c1")


def _anomaly_names(trace: TraceBuilder) -> list[str]:
    return [a.name for a in check_events(trace.events).anomalies]


ALL_CASES = [(name, n, pair) for name, pairs in CASES.items() for n, pair in enumerate(pairs)]


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_bad_trace_shows_the_anomaly(name: str, number: int, pair: Pair) -> None:
    checker = check_events(pair[0]().events)
    found = [a for a in checker.anomalies if a.name == name]
    assert found, f"expected {name}, got {[a.name for a in checker.anomalies]}"
    anomaly = found[0]
    assert anomaly.requirement == BY_NAME[name].requirement
    assert anomaly.witness and all(0 <= s <= anomaly.seq for s in anomaly.witness)
    text = anomaly.explanation.text()
    assert text.startswith(("Let ", "Then ")) and text.endswith(": a contradiction.")
    assert anomaly.requirement in text
    must = requirement_levels()[anomaly.requirement] == "MUST"
    assert checker.verdict is (Verdict.INVALID if must else Verdict.VALID)  # a SHOULD anomaly is a warning
    assert checker.exercised[name] > 0


@pytest.mark.parametrize(("name", "number", "pair"), ALL_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALL_CASES])
def test_close_valid_trace_does_not(name: str, number: int, pair: Pair) -> None:
    checker = check_events(pair[1]().events)
    assert [a.explanation.text() for a in checker.anomalies] == []
    assert checker.problems == []
    assert checker.verdict is Verdict.VALID


def test_every_trace_anomaly_has_a_case() -> None:
    judged_from_traces = {k.name for k in RULES if k.stage is not Stage.HARNESS}
    assert judged_from_traces - set(CASES) == set()


def test_found_at_the_event_that_shows_it_when_fed_one_at_a_time() -> None:
    """Incremental: an event-level anomaly is reported by the time its last witness event is fed."""
    for _, pairs in CASES.items():
        for bad, _good in pairs:
            events = bad().events
            checker = Checker()
            for event in events:
                before = len(checker.anomalies)
                checker.feed(event)
                for anomaly in checker.anomalies[before:]:
                    if BY_NAME[anomaly.name].stage is Stage.EVENT:
                        assert anomaly.seq == event["seq"]
            checker.finish()
            assert [a.name for a in checker.anomalies] == _anomaly_names(bad())


@pytest.mark.parametrize("durable", [False, True])
def test_a_batch_is_judged_again_after_a_restart_even_with_durable_attempts(durable: bool) -> None:
    """KS-BKT-10 counts deliveries since the last restart: attempt counts that survive it do not hide the batch."""
    declared = {"durable_attempts": True} if durable else None
    t = TraceBuilder(profile="owner", selector="buckets", bucket_budget=1, declared=declared).add("c1")
    for key in ("a", "b", "c"):
        t.publish(key, hash=0x10, segment=0, bucket=0, entry=0)
    t.deliver(0, "c1").deliver(1, "c1").deliver(2, "c1")
    t.restart().add("c1")
    attempt = 2 if durable else 1
    t.deliver(2, "c1", attempt).deliver(0, "c1", attempt)  # the batch's last message first
    assert "entry-split" in [a.name for a in check_events(t.events).anomalies]


def test_key_batch_past_the_capacity_is_not_an_overrun() -> None:
    """KS-BKT-10, KS-FLW-1: a key-based batch follows its first message past the consumer's capacity; a message
    outside the batch at the full consumer is an overrun."""
    t = _key_batch()
    t.deliver(0, "c1").deliver(1, "c1").deliver(2, "c1")
    assert check_events(t.events).anomalies == []
    t.deliver(t.publish("j"), "c1")
    assert [a.name for a in check_events(t.events).anomalies] == ["capacity-overrun"]


def test_the_op_after_a_tick_does_not_smear_its_phases() -> None:
    """An ack right after a tick that persisted is its own op: its delivery is not a phase-order anomaly."""
    t = owner(persist_interval=1).add("c1", capacity=1)
    t.deliver(t.publish("a"), "c1")
    t.held(t.publish("b"), "capacity", "c1")
    t.ack(0, "c1").deliver(1, "c1").tick().persisted(1)
    t.ack(1, "c1").tick().persisted(2)
    checker = check_events(t.events)
    assert checker.anomalies == []


def test_a_key_other_than_the_published_one_makes_the_verdict_unknown() -> None:
    t = owner().add("c1")
    t.publish("k")
    t.emit("deliver", offset=0, key="other", consumer="c1", attempt=1)
    checker = check_events(t.events)
    assert checker.verdict is Verdict.UNKNOWN
    assert "key" in checker.problems[0].message


def test_invalid_outranks_unknown_and_judging_stops_at_a_contradiction() -> None:
    t = owner().add("c1")
    t.publish("k")
    t.publish("k")
    t.deliver(1, "c1")
    t.add("c1")
    t.publish("k")
    t.deliver(2, "c1")
    checker = check_events(t.events)
    assert checker.problems and checker.verdict is Verdict.INVALID
    assert max(a.seq for a in checker.anomalies) < checker.problems[0].seq, "nothing is judged after a contradiction"


def test_requirements_that_do_not_apply_to_the_profile_are_not_reported() -> None:
    """KS-ORD-2 binds only the strict profile: the same overlap in the owner profile is fine."""
    t = owner().add("c1", capacity=2)
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    checker = check_events(t.events)
    assert checker.anomalies == []
    assert "strict-overlap" not in {n for n, c in checker.exercised.items() if c}


def test_restart_makes_unpersisted_resolutions_unresolved_again() -> None:
    """KS-CUR-3: after a restart, a message resolved above the persisted cursor is owed again."""
    t = owner(persist_ack_holes=True).add("c1")
    t.deliver(t.publish("a"), "c1")
    t.deliver(t.publish("b"), "c1")
    t.ack(1, "c1").persisted(0, [[1, 1]])
    t.restart().add("c1").deliver(0, "c1")
    t.ack(0, "c1").persisted(2, [])
    assert check_events(t.events).anomalies == []
    stuck = owner().add("c1")
    stuck.deliver(stuck.publish("a"), "c1")
    stuck.ack(0, "c1").restart().add("c1").quiescent()
    assert "restart-skip" in [a.name for a in check_events(stuck.events).anomalies]


def test_glob_filters_are_literal_except_star_and_question_mark() -> None:
    """KS-FLT-1: `a[1]` matches only the key `a[1]`; the checker does not use fnmatch."""
    t = owner().add("c1", filters=["a[1]", "eu-west-?"])
    t.deliver(t.publish("a[1]"), "c1")
    t.deliver(t.publish("eu-west-1"), "c1")
    t.filter(t.publish("a1"))
    t.filter(t.publish("eu-west-12"))
    assert check_events(t.events).anomalies == []


@case("skip-ignored")
def _skip_with_two_blocked_messages(bad: bool) -> TraceBuilder:
    """Owner profile: two prefetched messages of a key poisoned together; a skip resolves both."""
    t = owner(max_redeliveries=0, poison_policy="block").add("c1", capacity=2)
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1").nack(1, "c1")
    t.tick().blocked(0, attempt=1).blocked(1, attempt=1).skip("k").drop(0, "operator")
    if not bad:
        t.drop(1, "operator")
    return t.persisted(1 if bad else 2)


def test_a_release_frees_every_blocked_message_of_the_key() -> None:
    t = owner(max_redeliveries=0, poison_policy="block").add("c1", capacity=2)
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1").nack(1, "c1")
    t.tick().blocked(0, attempt=1).blocked(1, attempt=1)
    t.release("k").deliver(0, "c1", attempt=2).deliver(1, "c1", attempt=2)
    assert check_events(t.events).anomalies == []


def test_a_persisted_hole_ahead_of_the_resolved_set_is_cursor_skip_only() -> None:
    """KS-CUR-1 / KS-CUR-5: a persist that claims an unresolved offset is ahead, not late (checking.md 2.2)."""
    t = owner(persist_ack_holes=True).add("c1", capacity=3)
    for key in ("a", "b", "c"):
        t.deliver(t.publish(key), "c1")
    t.ack(1, "c1").persisted(0, [[1, 2]])  # offset 2 is unresolved: the hole is ahead
    t.tick()
    assert _anomaly_names(t) == ["cursor-skip"]


def test_a_returned_message_its_only_consumer_is_too_stuck_to_take_is_stuck_not_lost() -> None:
    """KS-MEM-1 / KS-LIV-1: the returned message is pending; the full consumer that never times out holds it back
    (liveness, checking.md 2.3), so it is stuck-key, not lost."""
    t = owner(ack_timeout=2).add("c1", capacity=1).add("c2", capacity=1)
    t.deliver(t.publish("x"), "c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1")  # offset 1 is returned; c2, the only member, is full
    t.tick(3)  # offset 0 is due to time out at tick 2 and does not
    t.quiescent()
    names = _anomaly_names(t)
    assert "lost" not in names
    assert names.count("stuck-key") == 2 and "missed-timeout" in names


def test_a_returned_message_of_a_blocked_key_is_stuck_not_lost() -> None:
    """KS-MEM-1 / KS-POI-3: a returned message whose key is blocked must not be delivered until an operator acts;
    it is pending behind the blocked message (liveness, checking.md 2.3), so it is stuck-key, not lost."""
    t = owner(max_redeliveries=0, poison_policy="block").add("c1", capacity=2).add("c2")
    t.deliver(t.publish("k"), "c1")
    t.deliver(t.publish("k"), "c1")
    t.nack(0, "c1")
    t.tick().blocked(0, attempt=1)
    t.remove("c1")  # offset 1 is returned while its key is blocked; c2 has room but must not take it
    t.quiescent()
    assert _anomaly_names(t) == ["stuck-key", "stuck-key"]


def test_a_resurrected_delivery_ends_when_its_holder_acks_it_again() -> None:
    """KS-RES-1 / KS-ACK-1: after a restart loses an ack (resurrected, KS-CUR-4), the holder's second ack is a double
    resolution, and it still ends the delivery it answers: a later ack the system ignores is not holder-ack-ignored
    (the checker used to keep the delivery outstanding, and the kit's settle then acked it again: seen on RabbitMQ)."""
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").persisted(1)
    t.restart().add("c1")
    t.deliver(0, "c1")  # resurrected
    t.ack(0, "c1")  # double resolution
    t.ack_ignored(0, "c1", reason="resolved")
    names = _anomaly_names(t)
    assert "double-resolution" in names and "resurrected" in names
    assert "holder-ack-ignored" not in names, names


def test_a_resurrected_delivery_ends_when_its_holder_nacks_it() -> None:
    """KS-RTY-1: a nack of a resurrected delivery (the message was resolved before a restart that lost it) ends it
    too: a later nack the system ignores is not holder-nack-ignored (seen on RabbitMQ's crash run as well)."""
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").persisted(1)
    t.restart().add("c1")
    t.deliver(0, "c1")  # resurrected
    t.nack(0, "c1")
    t.nack_ignored(0, "c1", reason="resolved")
    names = _anomaly_names(t)
    assert "resurrected" in names and "holder-nack-ignored" not in names, names


def test_a_zombie_ack_under_ack_by_id_ends_the_current_delivery_so_a_redelivery_is_a_duplicate() -> None:
    """KS-ACK-3 with ack_by_id: the zombie ack resolves the message once; delivering it again is not allowed."""
    t = owner(ack_by_id=True).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").deliver(0, "c2", attempt=2)
    t.zombie("zombie_ack", 0, "c1").ack(0, "c1").persisted(1)
    t.remove("c2").add("c3").deliver(0, "c3", attempt=3)
    assert _anomaly_names(t) == ["duplicate"]


def test_a_zombie_ack_of_a_resolved_message_accepted_under_ack_by_id_is_a_double_resolution() -> None:
    t = owner(ack_by_id=True).add("c1").add("c2")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").deliver(0, "c2", attempt=2)
    t.ack(0, "c2").persisted(1)
    t.zombie("zombie_ack", 0, "c1").ack(0, "c1")
    assert _anomaly_names(t) == ["double-resolution"]


def test_a_zombie_result_accepted_from_a_reused_name_is_zombie_accepted_not_stale_ack_accepted() -> None:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.remove("c1").add("c1").deliver(0, "c1", attempt=2)
    t.zombie("zombie_ack", 0, "c1").ack(0, "c1").persisted(1)
    assert _anomaly_names(t) == ["zombie-accepted"]


def test_a_zombie_op_naming_the_outstanding_delivery_is_a_contradiction() -> None:
    t = owner().add("c1")
    t.deliver(t.publish("k"), "c1")
    t.zombie("zombie_ack", 0, "c1", attempt=1).ack_ignored(0, "c1", reason="ended")
    checker = check_events(t.events)
    assert checker.verdict is Verdict.UNKNOWN
    assert "has not ended, or was never made" in checker.problems[0].message


def test_a_message_not_yet_due_is_overtaken_without_a_reorder_and_delivered_after() -> None:
    """KS-ORD-6: the later message goes first, the delayed one after it, once due: no ordering anomaly."""
    t = owner().add("c1", capacity=2)
    m = t.publish_delayed("k", 2)
    later = t.publish("k")
    t.deliver(later, "c1").ack(later, "c1")
    t.tick(2).deliver(m, "c1").ack(m, "c1").persisted(2)
    assert _anomaly_names(t) == []


def test_the_strict_profile_delivers_a_due_message_while_a_later_one_is_outstanding() -> None:
    """KS-ORD-6: in the strict profile a due message is not earlier than a message of its key delivered before it
    fell due: its delivery while that one is outstanding is not strict-overlap."""
    t = strict().add("c1", capacity=2)
    m = t.publish_delayed("k", 1)
    later = t.publish("k")
    t.deliver(later, "c1").tick().deliver(m, "c1")
    assert _anomaly_names(t) == []


def test_once_due_the_key_order_applies_to_the_delayed_message() -> None:
    """KS-ORD-6: past its due tick a delayed message holds its place: a later first delivery before it is a
    key-reorder (and the op that left it idle is reported first)."""
    t = owner().add("c1", capacity=2)
    t.publish_delayed("k", 1)
    t.tick()
    t.deliver(t.publish("k"), "c1")
    assert _anomaly_names(t) == ["due-left-waiting", "key-reorder"]


def test_within_the_slack_a_later_message_may_still_overtake_a_due_one() -> None:
    """KS-GEN-9: with timer_slack 1, at its due tick the dispatcher may not have seen the message fall due yet."""
    t = owner(timer_slack=1).add("c1", capacity=2)
    m = t.publish_delayed("k", 1)
    t.tick()
    t.deliver(t.publish("k"), "c1")
    t.tick().deliver(m, "c1")
    assert _anomaly_names(t) == []


def test_a_delayed_message_holds_the_cursor() -> None:
    """KS-CUR-1: a message not yet due is unresolved; a persisted cursor past it is cursor-skip."""
    t = owner().add("c1")
    t.publish_delayed("k", 5)
    t.deliver(t.publish("j"), "c1").ack(1, "c1")
    assert _anomaly_names(t.persisted(2)) == ["cursor-skip"]
    clean = owner().add("c1")
    clean.publish_delayed("k", 5)
    clean.deliver(clean.publish("j"), "c1").ack(1, "c1").persisted(0, holes=[[1, 1]])
    assert _anomaly_names(clean) == []


@pytest.mark.parametrize("delivered", [True, False])
def test_a_due_message_whose_key_has_a_later_one_outstanding_may_go_or_wait(delivered: bool) -> None:
    """KS-ORD-7 asks of a due message what KS-ISO-1 asks of any: while a message of its key is outstanding (here the
    later one, delivered before it fell due) it may go (owner) but need not."""
    t = owner().add("c1", capacity=2)
    m = t.publish_delayed("k", 1)
    t.deliver(t.publish("k"), "c1")
    t.tick()
    if delivered:
        t.deliver(m, "c1")
    assert _anomaly_names(t) == []


def test_a_due_message_behind_one_not_yet_due_is_reported_as_left_waiting() -> None:
    """KS-ORD-7 before KS-ORD-6: a due delayed message idle behind a delayed one not yet due misses its own falling
    due (what the mutant delayed_never_due does), so it is due-left-waiting, not blocked-behind-delayed."""
    t = owner().add("c1")
    t.publish_delayed("k", 5)
    t.publish_delayed("k", 1)
    t.tick()
    assert _anomaly_names(t) == ["due-left-waiting"]
