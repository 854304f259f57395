"""The Hypothesis state machine: random programs of operations, judged after every step.

`KeySharedMachine` is a plain `RuleBasedStateMachine`; `machine_for(context)` binds it to one run (the
adapter, what it declared, what the run found so far: search.py). Configurations and operations are
drawn only from the adapter's declared capabilities, keys come from a small pool so that they collide,
and every step is judged by the checker and the harness (an invariant). A `settle` rule (and the
teardown) drive the subscription to quiescence so that liveness is checked inside the example. An
anomaly of a kind not found yet raises `Violation`; a kind already found is recorded and the example
goes on, so a cheap anomaly found once never hides a deeper one behind it. Every anomaly of every example
(shrink replays included) is recorded as an observation, so a requirement violated anywhere in a run is
never reported passed. Hypothesis only searches here; the kit shrinks what it finds itself, by counted
replays (shrink.py).

Long because every op the kit draws is a rule method of one class, as Hypothesis's stateful API wants; the
configuration strategies and the run context live in search.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from ks_spec.buckets import bucket_hash
from ks_spec.config import CONFIG_DEFAULTS

from ks_conformance.anomalies import Anomaly
from ks_conformance.batch import AnySession, open_session
from ks_conformance.checks.records import Delivery
from ks_conformance.harness import UNBOUNDED_CAPACITY, batch_form_problem, delay_form_problem, place_key
from ks_conformance.protocol import AdapterFault
from ks_conformance.search import DRAWN_VALUES, RunContext, configs

KEYS = ("a1", "a2", "b1", "b2", "c")
"""A small key pool: keys collide, and the filters below split it in overlapping ways."""
SLOT_MATES = {"pulsar-consistent": "a85525", "pulsar-auto-split": "a56859", "pulsar-sticky": "a56859"}
"""Under draining by hash slot (KS-DRN-3), the pool's `a2` is published as this key, whose slot is `a1`'s (spec
ks_spec.slots) and which the filters take as they take `a2` (`a*`, not `?1`): without two keys of one slot a key
could never wait for an unrelated slot-mate. `a2`, not a later key: Hypothesis draws the pool's first keys most.
Other configurations keep the pool as it is, so their examples do not change."""
FILTER_SETS: tuple[tuple[str, ...], ...] = ((), (), ("a*",), ("?1",), ("b?", "c"), ("x*",))
NAMES = ("c1", "c2", "c3", "c4")
SLICES = 4
SLICE = 65536 // SLICES
ORDERS = ("oldest", "newest", "shuffled")
ENDING_OPS = ("tick", "remove_consumer")
"""The ops that end deliveries without a result from their holder: a timeout or eviction (tick), a leave."""
SEEKS_DRAWN = 3
"""How many seeks an example may draw (each replays up to the whole log)."""
ENDED_KEPT = 6
"""How many ended deliveries the machine remembers for zombie ops (the most recent)."""
REFUSAL_PROBES = (
    "ack-unknown-consumer",
    "remove-unknown-consumer",
    "duplicate-consumer",
    "zero-capacity",
    "wrong-offset",
    "release-not-blocked",
    "skip-not-blocked",
    "filters-not-allowed",
    "layout-refused",
)


class Violation(Exception):
    """The first anomalies of an example of kinds the run had not found: they end the example (shrink.py shrinks it)."""

    def __init__(self, anomalies: list[Anomaly], session: AnySession) -> None:
        names = ", ".join(sorted({f"{a.name} ({a.requirement})" for a in anomalies}))
        super().__init__(f"{names}\n" + "\n".join(a.explanation.text() for a in anomalies))
        self.anomalies = anomalies
        self.session = session


class FaultAbort(BaseException):
    """An adapter fault inside a Hypothesis run, which ends the run at once.

    Not an Exception, so Hypothesis neither retries nor reports it as a failing example: a fault keeps no
    scenario, and every further example would restart the adapter and could wait out the timeout again.
    """

    def __init__(self, fault: AdapterFault) -> None:
        super().__init__(str(fault))
        self.fault = fault


class KeySharedMachine(RuleBasedStateMachine):
    """Random operations against the adapter, every step judged (spec/checking.md).

    Hypothesis builds machines without arguments, so a run binds its `RunContext` in a subclass
    (`machine_for`). Picks among what the state offers (a delivery, a member, a blocked key) are drawn
    with `st.data()` and `st.sampled_from` at the moment of the pick: the candidates change with every
    step, and consumers leave on their own (evictions), which a Hypothesis bundle cannot follow.
    """

    context: ClassVar[RunContext]
    """The run this machine belongs to: set on the subclass `machine_for` makes."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = self.context.capabilities
        self.session: AnySession | None = None
        self.tainted = False
        self.settled_at = -1
        self.restarts = 0
        self.restarted_at = 0
        self.ended: list[tuple[str, int, int]] = []
        """(consumer, offset, attempt) of recent deliveries that ended without a result (a timeout, a leave or an
        eviction) since the last restart: what a zombie op may answer (KS-ACK-3)."""
        self.ended_total = 0
        """How many deliveries `ended` has ever taken in (it keeps the last few)."""
        self.seeks = 0
        self.cut: list[tuple[str, int]] = []
        """(holder, offset) of the deliveries the last seek ended."""

    # --- helpers -------------------------------------------------------------------------------

    def able(self, op: str) -> bool:
        """True if the op may be drawn now: declared, not skipped, meaningful in the profile, not diverged."""
        session = self.session
        if session is None or session.diverged or op not in self.capabilities.ops or op in session.skipped_ops:
            return False
        if session.profile == "best-effort" and op in (
            "nack",
            "release",
            "skip",
            "restart",
            "rollover",
            "split",
            "zombie_ack",
            "zombie_nack",
            "seek",
            "extend",
        ):
            return False
        if op == "flow":
            return session.config.get("flow_control") == "permits"
        if op == "publish_delayed":
            return delay_form_problem(session.config) is None
        if op == "seek":
            return session.config.get("selector") != "buckets"  # section 14: not with buckets
        if op == "extend":
            return bool(session.config.get("ack_timeout"))  # an extension moves a timeout (KS-RTY-8)
        return True

    @contextmanager
    def ending_the_run_on_fault(self) -> Iterator[None]:
        """Talk to the adapter: a fault ends the run (FaultAbort), and teardown then leaves the adapter alone."""
        try:
            yield
        except AdapterFault as fault:
            self.tainted = True
            raise FaultAbort(fault) from fault

    def do(self, op: dict[str, Any]) -> None:
        """Perform one op (the harness marks it as one op, judges it and records it as a step)."""
        assert self.session is not None
        watching = self.zombies_drawn() or self.able("extend")
        watched = self.outstanding_deliveries() if op["op"] in ENDING_OPS and watching else []
        with self.ending_the_run_on_fault():
            self.session.perform(op)
        if op["op"] in ("restart", "seek"):
            self.ended.clear()  # attempt numbers start again: an (offset, attempt) names another delivery now
        for delivery in watched:
            if delivery.holder.outstanding.get(delivery.offset) is not delivery:
                self.ended.append((delivery.holder.name, delivery.offset, delivery.attempt))
                self.ended_total += 1
        del self.ended[:-ENDED_KEPT]

    def zombies_drawn(self) -> bool:
        """True if a zombie op may be drawn in this run (declared, and meaningful in the profile)."""
        return self.able("zombie_ack") or self.able("zombie_nack")

    def outstanding_deliveries(self) -> list[Delivery]:
        """Every outstanding delivery, as the checker's records (to see which an op ends)."""
        assert self.session is not None
        return [d for m in self.session.checker.members.values() for d in m.outstanding.values()]

    def members(self) -> list[str]:
        assert self.session is not None
        return self.session.known_members()

    def room(self) -> bool:
        """True while another consumer may join (the adapter's limit and the name pool)."""
        return len(self.members()) < min(self.capabilities.max_consumers, len(NAMES))

    def outstanding(self) -> list[tuple[str, int]]:
        """(holder, offset) of every outstanding delivery, oldest delivery first."""
        assert self.session is not None
        deliveries = [d for m in self.session.checker.members.values() for d in m.outstanding.values()]
        return [(d.holder.name, d.offset) for d in sorted(deliveries, key=lambda d: d.seq)]

    def blocked_keys(self) -> list[str]:
        assert self.session is not None
        return sorted(k for k, s in self.session.checker.keys.items() if s.blocked)

    def active_segments(self) -> list[int]:
        assert self.session is not None
        return sorted(n for n, s in self.session.checker.segments.items() if not s.sealed)

    def adjacent_segments(self) -> list[tuple[int, int]]:
        """Pairs of active segments a merge may join: the first's range ends just below the second's."""
        assert self.session is not None
        segments = self.session.checker.segments
        active = self.active_segments()
        return [(a, b) for a in active for b in active if segments[a].hi + 1 == segments[b].lo]

    def published_since_restart(self) -> bool:
        return self.session is not None and self.session.next_offset() > self.restarted_at

    # --- configuration ---------------------------------------------------------------------------

    @initialize(data=st.data())
    def begin(self, data: st.DataObject) -> None:
        """Reset the adapter with a configuration drawn from what it declares (and has not refused)."""
        context = self.context
        config = data.draw(configs(self.capabilities, context.stratum, context.refused_values), label="config")
        with self.ending_the_run_on_fault():
            self._begin(config)

    def _begin(self, config: dict[str, Any]) -> None:
        context = self.context
        session = open_session(
            context.live_connection(),
            self.capabilities,
            config,
            batch=context.batch,
            check_stats=context.check_stats,
            implementation=context.implementation,
            chunk=context.chunk,
            tolerated=context.suppressed,
        )
        self.session = session
        outcome = session.begin()
        field_name = outcome.error_field or ""
        if (
            outcome.code == "invalid_config"
            and field_name in DRAWN_VALUES
            and field_name in config
            and field_name not in self.capabilities.config_values
        ):
            # An undeclared value the adapter does not support: never drawn again, and the requirements that
            # need it are reported skipped with the reason (not an adapter fault).
            context.refused_values.setdefault(field_name, []).append(config[field_name])
            self.session = None
            reject()
        if not outcome.ok:
            raise AdapterFault(
                "protocol",
                f"reset refused a configuration within the declared capabilities: {outcome.code} "
                f"{outcome.error_field or ''} ({outcome.message}); config {config}",
            )

    # --- publishing ------------------------------------------------------------------------------

    @precondition(lambda self: self.able("publish"))
    @rule(key=st.sampled_from(KEYS))
    def publish(self, key: str) -> None:
        """Publish a message with a key from the pool."""
        assert self.session is not None
        self.do({"op": "publish", "offset": self.session.next_offset(), "key": self.pool_key(key)})

    def pool_key(self, key: str) -> str:
        """The key published for a key of the pool: `a2` becomes `a1`'s slot-mate under draining by slot."""
        assert self.session is not None
        config = self.session.config
        if key == KEYS[1] and config.get("drain_granularity") == "hash":
            return SLOT_MATES.get(str(config.get("selector")), key)
        return key

    @precondition(lambda self: self.able("publish"))
    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=2, max_size=4))
    def publish_several(self, keys: list[str]) -> None:
        """Publish a burst, so that keys queue behind each other; where batches are specified, the keys that share the
        first one's bucket go as one batch when there are two or more (`publish_entry`, spec section 17), and outside
        selector buckets (capability `key_batches`) the repeats of the first key go as one key-based batch (PIP-34).
        Decided from the drawn keys, with no draw and no rule of its own: either would change how Hypothesis searches
        runs that cannot batch."""
        assert self.session is not None
        batch = self.batch_of(keys) if self.able("publish_entry") and self.batching() else []
        if len(batch) >= 2:
            lows = [bucket_hash(key) & 0xFFFF for key in batch]
            offset = self.session.next_offset()
            self.do(
                {"op": "publish_entry", "offset": offset, "keys": batch, "hash_min": min(lows), "hash_max": max(lows)}
            )
            keys = [key for key in keys if key not in batch and self.pool_key(key) not in batch]
        for key in keys:
            self.publish(key)

    def batching(self) -> bool:
        """True when the configuration specifies batches (owner, no parking; spec section 17) and the adapter takes
        them there: batches under selector buckets with capacity and window (spec 1.5), every other form with the
        capability `key_batches` (spec 1.7)."""
        assert self.session is not None
        config = {**CONFIG_DEFAULTS, **self.session.config}
        if batch_form_problem(config) is not None:
            return False
        if self.capabilities.key_batches:
            return True
        return config["selector"] == "buckets" and (config["flow_control"], config["read_bound"]) == (
            "capacity",
            "window",
        )

    def batch_of(self, keys: list[str]) -> list[str]:
        """The drawn keys that go as one batch: those of the first key's bucket under selector buckets, else the
        repeats of the first key (a key-based batch), as published (`pool_key`)."""
        assert self.session is not None
        if self.session.config.get("selector") == "buckets":
            return self.same_bucket(keys)
        return [self.pool_key(key) for key in keys if key == keys[0]]

    def same_bucket(self, keys: list[str]) -> list[str]:
        """The keys that route to the first key's bucket (a batch stays within one bucket, spec section 17)."""
        assert self.session is not None
        segments = self.session.checker.segments
        first = place_key(segments, keys[0])
        return [key for key in keys if place_key(segments, key) == first]

    @precondition(lambda self: self.able("publish") and bool(self.outstanding()))
    @rule(data=st.data())
    def publish_to_busy_key(self, data: st.DataObject) -> None:
        """Publish to a key that has deliveries outstanding (draining, handoffs and queues need it); where delayed
        delivery is declared, maybe a message due a few ticks ahead, then maybe a later one of its key that must not
        wait for it (KS-ORD-5, KS-ORD-6). Drawn here, not as a rule of its own (see `ack`)."""
        assert self.session is not None
        _, offset = data.draw(st.sampled_from(self.outstanding()), label="delivery")
        key = self.session.checker.messages[offset].key
        if self.able("publish_delayed") and data.draw(st.booleans(), label="delayed"):
            due = self.session.checker.now + data.draw(st.integers(0, 3), label="ticks until it is due")
            self.do({"op": "publish_delayed", "offset": self.session.next_offset(), "key": key, "deliver_at": due})
            if data.draw(st.booleans(), label="a later message of its key"):
                self.publish(key)
            return
        self.publish(key)

    # --- membership ------------------------------------------------------------------------------

    @precondition(lambda self: self.able("add_consumer") and self.session is not None and self.room())
    @rule(data=st.data(), capacity=st.integers(1, 3), filters=st.sampled_from(FILTER_SETS))
    def add_consumer(self, data: st.DataObject, capacity: int, filters: tuple[str, ...]) -> None:
        """A consumer joins (names are reused after a leave: KS-GEN-3)."""
        self.join(data, capacity, filters)

    def join(self, data: st.DataObject, capacity: int, filters: tuple[str, ...]) -> None:
        """Add a consumer with a free name; on pulsar-sticky it takes a free slice of the hash range."""
        assert self.session is not None
        capabilities = self.capabilities
        free = [n for n in NAMES if n not in self.members()]
        if not capabilities.capacity:
            capacity = UNBOUNDED_CAPACITY  # the adapter declares that capacity never binds: make it so
        name = data.draw(st.sampled_from(free), label="name")
        op: dict[str, Any] = {"op": "add_consumer", "consumer": name, "capacity": capacity}
        selector = self.session.config.get("selector")
        op["filters"] = list(filters) if capabilities.filters and selector not in _NO_FILTERS else []
        if selector == "pulsar-sticky":
            taken = {lo // SLICE for m in self.session.checker.members.values() for lo, _ in m.ranges}
            slices = [s for s in range(SLICES) if s not in taken]
            if not slices:
                return
            chosen = data.draw(st.sampled_from(slices), label="slice")
            op["ranges"] = [[chosen * SLICE, chosen * SLICE + SLICE - 1]]
        if capabilities.shared_names and selector == "pulsar-consistent":
            # req: KS-ASN-5 (a system name other members may share: Pulsar's consumer names need not be unique)
            names = sorted({m.hash_name or m.name for m in self.session.checker.members.values()})
            shared = data.draw(st.sampled_from([None, *names]), label="hash name")
            if shared is not None:
                op["hash_name"] = shared
        self.do(op)

    @precondition(
        lambda self: self.able("add_consumer") and bool(self.outstanding()) and self.session is not None and self.room()
    )
    @rule(data=st.data(), capacity=st.integers(1, 3))
    def join_while_busy(self, data: st.DataObject, capacity: int) -> None:
        """A consumer joins while keys are outstanding, then those keys get new messages: draining (KS-DRN-1),
        bucket handoffs (KS-BKT-4) and the stability of the selector (KS-ASN-2) are all at stake."""
        assert self.session is not None
        busy = sorted({self.session.checker.messages[o].key for _, o in self.outstanding()})
        self.join(data, capacity, ())
        for key in busy:
            self.publish(key)

    @precondition(lambda self: self.able("remove_consumer") and bool(self.session and self.members()))
    @rule(data=st.data())
    def remove_consumer(self, data: st.DataObject) -> None:
        """A consumer leaves; where zombie ops are declared, it may then report a result for a delivery it held (a
        worker stopped while its task ran on: KS-ACK-3), once its message may already be someone else's."""
        ended = self.ended_total
        self.do({"op": "remove_consumer", "consumer": data.draw(st.sampled_from(self.members()), label="member")})
        self.late_result(data, ended)

    def late_result(self, data: st.DataObject, ended_before: int) -> None:
        """If the ops since `ended_total` was `ended_before` ended deliveries and zombie ops are declared, maybe one of
        them is answered late at once. Drawn only then, so that the search of adapters without zombie ops stays as
        it was."""
        new = min(self.ended_total - ended_before, len(self.ended))
        if new > 0 and self.zombies_drawn():
            if data.draw(st.booleans(), label="a late result for a delivery that just ended"):
                self.zombie_result(data, data.draw(st.booleans(), label="negative"), self.ended[-new:])

    @precondition(lambda self: self.able("disconnect") and bool(self.session and self.members()))
    @rule(data=st.data())
    def disconnect(self, data: st.DataObject) -> None:
        """A member loses its connection; when it held deliveries, time may pass until it is evicted (what it held
        must then be delivered again: KS-MEM-1, the rule Danube's at-most-once eviction breaks)."""
        assert self.session is not None
        members = self.session.checker.members
        connected = [n for n in self.members() if n not in members or members[n].connected]
        if not connected:
            return
        name = data.draw(st.sampled_from(connected), label="member")
        self.do({"op": "disconnect", "consumer": name})
        # Not a rule of its own (see `ack`): ticks drawn one by one rarely add up to an eviction.
        evict_after = int(self.session.config.get("evict_after", CONFIG_DEFAULTS["evict_after"]) or 0)
        slack = int(self.session.config.get("timer_slack") or 0)  # an eviction may come that much later (KS-GEN-9)
        holds = name in members and bool(members[name].outstanding)
        if holds and evict_after and self.able("tick"):
            ended = self.ended_total
            for _ in range(data.draw(st.integers(0, evict_after + slack), label="ticks after the disconnect")):
                self.do({"op": "tick"})
            self.late_result(data, ended)

    @precondition(lambda self: self.able("reconnect") and bool(self.session and self.members()))
    @rule(data=st.data())
    def reconnect(self, data: st.DataObject) -> None:
        """A disconnected member comes back before its eviction (KS-MEM-4)."""
        assert self.session is not None
        members = self.session.checker.members
        away = [n for n in self.members() if n in members and not members[n].connected]
        if away:
            self.do({"op": "reconnect", "consumer": data.draw(st.sampled_from(away), label="member")})

    # --- answers ---------------------------------------------------------------------------------

    @precondition(lambda self: self.able("ack") and bool(self.outstanding()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        """The holder of a delivery acks it; under `flow_control = "permits"` it may then grant more permits, as a
        client refills its queue (a `flow` op of its own, spec section 8)."""
        consumer, offset = data.draw(st.sampled_from(self.outstanding()), label="delivery")
        if self.able("seek") and self.seeks < SEEKS_DRAWN and data.draw(st.booleans(), label="a seek first"):
            # The ack may then answer a delivery the seek ended (KS-CUR-11), or the message's delivery since.
            self.seek(data)
            if consumer not in self.members():
                return
        if self.able("extend") and data.draw(st.booleans(), label="asks for more time instead"):
            self.extend(data, consumer, offset)
            return
        self.do({"op": "ack", "consumer": consumer, "offset": offset})
        # Not a rule of its own: a rule disabled in most configurations still changes how Hypothesis picks the
        # others, and it hid two deep mutants from every ci seed.
        if self.able("flow") and consumer in self.members():
            permits = data.draw(st.integers(0, 3), label="permits granted after the ack")
            if permits:
                self.do({"op": "flow", "consumer": consumer, "permits": permits})

    @precondition(lambda self: self.able("nack") and bool(self.outstanding()))
    @rule(data=st.data())
    def nack(self, data: st.DataObject) -> None:
        """The holder of a delivery nacks it."""
        consumer, offset = data.draw(st.sampled_from(self.outstanding()), label="delivery")
        self.do({"op": "nack", "consumer": consumer, "offset": offset})

    @precondition(lambda self: self.able("ack") and bool(self.session and self.members()))
    @rule(data=st.data(), negative=st.booleans())
    def stale_answer(self, data: st.DataObject, negative: bool) -> None:
        """A member acks or nacks a message it does not hold (stale, resolved, another's, unknown), or, where zombie
        ops are declared, a consumer whose delivery ended reports its result late."""
        assert self.session is not None
        if self.able("seek") and self.seeks < SEEKS_DRAWN and data.draw(st.booleans(), label="a seek first"):
            self.seek(data)
            self.late_result_after_seek(data, negative)
            return
        if self.ended and self.zombies_drawn() and data.draw(st.booleans(), label="from an ended delivery"):
            self.zombie_result(data, negative)
            return
        namesakes = self.namesake_answers()
        if len(namesakes) > 0 and data.draw(st.booleans(), label="a namesake's answer"):
            # req: KS-ACK-2 (under a shared consumer name, an ack or nack is still the holder's alone)
            consumer, offset = data.draw(st.sampled_from(namesakes), label="namesake delivery")
            self.do({"op": "nack" if negative and self.able("nack") else "ack", "consumer": consumer, "offset": offset})
            return
        ended = [(name, offset) for name, offset, _ in self.ended if name in self.members()]
        if ended and self.able("extend") and data.draw(st.booleans(), label="an ended delivery asks for more time"):
            self.extend(data, *data.draw(st.sampled_from(ended), label="ended delivery"))
            return
        consumer = data.draw(st.sampled_from(self.members()), label="member")
        published = len(self.session.checker.messages)
        offset = data.draw(st.integers(0, published), label="offset")  # `published` itself: never published
        holder = self.session.checker.messages[offset].outstanding if offset < published else None
        if holder is not None and holder.holder.name == consumer:
            return
        kind = "nack" if negative and self.able("nack") else "ack"
        self.do({"op": kind, "consumer": consumer, "offset": offset})

    def namesake_answers(self) -> list[tuple[str, int]]:
        """(member, offset) for each outstanding delivery and each other member that shares its holder's hash name
        (KS-ASN-5): empty unless the adapter declares shared names."""
        if not self.capabilities.shared_names or self.session is None:
            return []
        members = list(self.session.checker.members.values())
        answers = []
        for holder, offset in self.outstanding():
            incarnation = self.session.checker.members.get(holder)
            if incarnation is None:
                continue
            name = incarnation.hash_name or holder
            answers += [(m.name, offset) for m in members if m.name != holder and (m.hash_name or m.name) == name]
        return sorted(answers)

    def seek(self, data: st.DataObject) -> None:
        """The cursor is reset (section 14): backwards (a replay, acknowledged messages included) or forwards; or a
        consumer that keeps its own checkpoint resumes after a crash: a restart, then a seek to an offset at or below
        the persisted cursor. Drawn within `ack` and `stale_answer`, not as a rule of its own (see `ack`), and only
        where `seek` is declared."""
        assert self.session is not None
        checker = self.session.checker
        if not checker.messages:
            return
        cursor, published = checker.cursor(), len(checker.messages)
        kinds = ["backwards"] + (["forwards"] if cursor < published else [])
        kinds += ["resume"] if self.able("restart") and self.restarts < 2 else []
        kind = data.draw(st.sampled_from(kinds), label="seek")
        if kind == "resume":
            self.restart()
            target = data.draw(st.integers(0, checker.persisted_cursor), label="checkpoint")
        elif kind == "backwards":
            # at or below the cursor: acknowledged messages come first in the replay
            target = data.draw(st.integers(0, cursor), label="seek target")
        else:
            # past the cursor: unresolved messages are given up
            target = data.draw(st.integers(cursor + 1, published), label="seek target")
        self.cut = [(d.holder.name, d.offset) for d in self.outstanding_deliveries()]
        self.do({"op": "seek", "offset": target})
        self.seeks += 1

    def late_result_after_seek(self, data: st.DataObject, negative: bool) -> None:
        """A member whose delivery the last seek ended, and that holds none of that message now, answers it late
        (KS-CUR-11)."""
        assert self.session is not None
        checker = self.session.checker
        members = self.members()

        def holds(consumer: str, offset: int) -> bool:
            delivery = checker.messages[offset].outstanding
            return delivery is not None and delivery.holder.name == consumer

        stale = [(c, o) for c, o in self.cut if c in members and not holds(c, o)]
        if not stale:
            return
        if data.draw(st.booleans(), label="a late result for a delivery the seek ended"):
            consumer, offset = data.draw(st.sampled_from(stale), label="delivery the seek ended")
            kind = "nack" if negative and self.able("nack") else "ack"
            self.do({"op": kind, "consumer": consumer, "offset": offset})

    def extend(self, data: st.DataObject, consumer: str, offset: int) -> None:
        """`consumer` asks for more time for its delivery of `offset` (KS-RTY-8): from the holder, a worker still busy
        renewing its lease; from a consumer whose delivery ended, a zombie's renewal that must change nothing
        (KS-RTY-9). Drawn within `ack` and `stale_answer`, only where `extend` is declared (see `ack`)."""
        assert self.session is not None
        timeout = int(self.session.config.get("ack_timeout") or 0)
        # From longer than ack_timeout (the simplest draw: a renewal that moves the deadline later) down to 1 (one
        # that shortens it: an extension replaces the deadline, it does not add to it).
        ticks = timeout + 2 - data.draw(st.integers(0, timeout + 1), label="ticks shorter than ack_timeout + 2")
        self.do({"op": "extend", "consumer": consumer, "offset": offset, "ticks": ticks})
        if not self.able("tick") or data.draw(st.booleans(), label="then its holder answers in time"):
            return
        # Time passes with no answer until the delivery times out: at the new deadline, or at the old one if the
        # extension was not its holder's (KS-RTY-8, KS-RTY-9).
        checker = self.session.checker
        delivery = checker.messages[offset].outstanding
        slack = int(self.session.config.get("timer_slack") or 0)
        for _ in range(max(ticks, timeout) + slack + 1):
            if delivery is None or checker.messages[offset].outstanding is not delivery or not self.able("tick"):
                return
            self.do({"op": "tick"})

    def zombie_result(
        self, data: st.DataObject, negative: bool, among: list[tuple[str, int, int]] | None = None
    ) -> None:
        """A consumer whose delivery ended (it timed out, or the consumer left or was evicted) reports its result
        late: a worker that hung, or kept running after its lease ended (KS-ACK-3). Drawn within `stale_answer`,
        not as a rule of its own (see `ack`), and only where zombie ops are declared."""
        consumer, offset, attempt = data.draw(st.sampled_from(among or self.ended), label="ended delivery")
        kind = "zombie_nack" if (negative and self.able("zombie_nack")) or not self.able("zombie_ack") else "zombie_ack"
        self.do({"op": kind, "consumer": consumer, "offset": offset, "attempt": attempt})

    @precondition(
        lambda self: (
            self.able("ack") and self.session is not None and len(self.members()) >= 2 and bool(self.outstanding())
        )
    )
    @rule(data=st.data(), negative=st.booleans())
    def answer_for_another(self, data: st.DataObject, negative: bool) -> None:
        """A member acks or nacks a delivery another member holds (e.g. the key's previous owner).

        Drawn over all offsets, such answers would be rare; they are the ones a sloppy implementation accepts.
        """
        holder, offset = data.draw(st.sampled_from(self.outstanding()), label="delivery")
        others = [name for name in self.members() if name != holder]
        if not others:
            return
        if self.able("extend") and data.draw(st.booleans(), label="asks for more time instead"):
            self.extend(data, data.draw(st.sampled_from(others), label="member"), offset)  # the fencing bug (KS-RTY-9)
            return
        kind = "nack" if negative and self.able("nack") else "ack"
        self.do({"op": kind, "consumer": data.draw(st.sampled_from(others), label="member"), "offset": offset})

    @precondition(
        lambda self: (
            self.session is not None
            and self.session.profile != "best-effort"
            and (self.able("nack") or (self.able("tick") and bool(self.session.config.get("ack_timeout"))))
            and bool(self.outstanding())
        )
    )
    @rule(data=st.data(), then=st.sampled_from(("skip", "release", "nothing")))
    def poison(self, data: st.DataObject, then: str) -> None:
        """Fail one delivery again and again (nacks, or ticks past the ack timeout) until it is poisoned;
        if that blocks its key, the operator may then skip or release it."""
        assert self.session is not None
        checker = self.session.checker
        _, offset = data.draw(st.sampled_from(self.outstanding()), label="delivery")
        config = self.session.config
        slack = int(config.get("timer_slack") or 0)  # timeouts and retries may come that much later (KS-GEN-9)
        rounds = (int(config.get("max_redeliveries", 5)) + 2) * (int(config.get("backoff_max", 60)) + 3 + slack)
        for _ in range(min(rounds, 80)):
            message = checker.messages[offset]
            if message.blocked and then != "nothing" and self.able(then):
                self.do({"op": then, "key": message.key})
                return
            if message.resolved or message.blocked or self.session.diverged:
                return
            holder = message.outstanding
            if holder is not None and self.able("nack"):
                self.do({"op": "nack", "consumer": holder.holder.name, "offset": offset})
            elif self.able("tick"):
                self.do({"op": "tick"})
            else:
                return

    # --- time, the operator, the dispatcher ------------------------------------------------------

    @precondition(lambda self: self.able("tick"))
    @rule(count=st.integers(1, 3))
    def tick(self, count: int) -> None:
        """Time passes."""
        for _ in range(count):
            self.do({"op": "tick"})

    @precondition(lambda self: self.able("release") and bool(self.blocked_keys()))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        """The operator releases a blocked key."""
        self.do({"op": "release", "key": data.draw(st.sampled_from(self.blocked_keys()), label="key")})

    @precondition(lambda self: self.able("skip") and bool(self.blocked_keys()))
    @rule(data=st.data())
    def skip(self, data: st.DataObject) -> None:
        """The operator skips a blocked key's message."""
        self.do({"op": "skip", "key": data.draw(st.sampled_from(self.blocked_keys()), label="key")})

    @precondition(lambda self: self.able("restart") and self.restarts < 2 and self.published_since_restart())
    @rule()
    def restart(self) -> None:
        """The dispatcher crashes and restarts (at most twice, each after a publish); consumers rejoin later."""
        assert self.session is not None
        self.do({"op": "restart"})
        self.restarts += 1
        self.restarted_at = self.session.next_offset()

    @precondition(
        lambda self: (
            self.able("restart")
            and self.restarts < 2
            and self.session is not None
            and (bool(self.session.checker.persisted_holes) or self.checkpoints_cover_more())
        )
    )
    @rule()
    def restart_with_holes(self) -> None:
        """The dispatcher crashes while the store records ack holes, or (with `checkpoint_resume`) bucket checkpoints
        that cover more than the cursor: nothing they record may come back (KS-CUR-4, KS-BKT-9). One rule for both:
        a rule of its own would change how Hypothesis picks every other rule, in every configuration."""
        self.restart()

    def checkpoints_cover_more(self) -> bool:
        """With `checkpoint_resume`, True when a checkpoint covers a resolved message the persisted cursor does not."""
        assert self.session is not None
        if self.session.config.get("checkpoint_resume") is not True:
            return False
        checker = self.session.checker
        cursor, holes, checkpoints = checker.persisted_cursor, checker.persisted_holes, checker.checkpoints
        for message in checker.messages[cursor:]:
            if message.resolved and message.offset not in holes and message.segment is not None:
                checkpoint = checkpoints.get((message.segment, message.bucket or 0))
                if checkpoint is not None and message.offset < checkpoint[0]:
                    return True
        return False

    @precondition(lambda self: self.able("rollover") and bool(self.active_segments()))
    @rule(data=st.data())
    def rollover(self, data: st.DataObject) -> None:
        """A segment is sealed and succeeded by one with a new bucket count."""
        assert self.session is not None
        segment = data.draw(st.sampled_from(self.active_segments()), label="segment")
        buckets = data.draw(st.integers(1, min(8, int(self.session.config.get("bucket_max", 1024)))), label="buckets")
        successor = max(self.session.checker.segments) + 1
        self.do({"op": "rollover", "segment": segment, "successor": successor, "buckets": buckets})

    @precondition(lambda self: self.able("split") and bool(self.active_segments()))
    @rule(data=st.data())
    def split(self, data: st.DataObject) -> None:
        """A segment is sealed and split in two halves; or, once two are adjacent, two are merged into one successor
        that waits for both (not a rule of its own: that would change how Hypothesis picks every other rule)."""
        assert self.session is not None
        segments = self.session.checker.segments
        pairs: list[tuple[int, int]] = self.adjacent_segments() if self.able("merge") else []
        merging = bool(pairs) and data.draw(st.booleans(), label="merge")
        if merging:
            pair = data.draw(st.sampled_from(pairs), label="segments")
            self.do({"op": "merge", "lower": pair[0], "upper": pair[1], "successor": max(segments) + 1})
            return
        splittable = [n for n in self.active_segments() if segments[n].hi > segments[n].lo]
        if not splittable:
            return
        lower = max(segments) + 1
        segment = data.draw(st.sampled_from(splittable), label="segment")
        self.do({"op": "split", "segment": segment, "lower": lower, "upper": lower + 1})

    # --- refusals --------------------------------------------------------------------------------

    @precondition(lambda self: self.session is not None and not self.session.diverged)
    @rule(data=st.data(), probe=st.sampled_from(REFUSAL_PROBES))
    def refused_op(self, data: st.DataObject, probe: str) -> None:
        """An op the spec refuses (KS-GEN-4); skipped when the probe does not apply."""
        op = self.refusal_probe(data, probe)
        if op is not None and self.able(op["op"]):
            self.do(op)

    def refusal_probe(self, data: st.DataObject, probe: str) -> dict[str, Any] | None:
        """The op of one refusal probe in the current state, or None when it does not apply."""
        assert self.session is not None
        selector = self.session.config.get("selector")
        names = self.members()
        unbounded = 1 if self.capabilities.capacity else UNBOUNDED_CAPACITY
        if probe == "ack-unknown-consumer":
            return {"op": "ack", "consumer": "ghost", "offset": 0}
        if probe == "remove-unknown-consumer":
            return {"op": "remove_consumer", "consumer": "ghost"}
        if probe == "duplicate-consumer" and names:
            name = data.draw(st.sampled_from(names), label="member")
            return {"op": "add_consumer", "consumer": name, "capacity": unbounded, "filters": []}
        if probe == "zero-capacity" and selector != "pulsar-sticky":
            return {"op": "add_consumer", "consumer": "ghost", "capacity": 0, "filters": []}
        if probe == "wrong-offset":
            ahead = data.draw(st.integers(1, 8), label="ahead")
            return {"op": "publish", "offset": self.session.next_offset() + ahead, "key": KEYS[0]}
        if probe in ("release-not-blocked", "skip-not-blocked"):
            free = [k for k in map(self.pool_key, KEYS) if k not in self.blocked_keys()] or ["never-published"]
            return {"op": probe.split("-")[0], "key": data.draw(st.sampled_from(free), label="key")}
        if probe == "filters-not-allowed" and self.capabilities.filters and selector in _NO_FILTERS:
            if selector == "pulsar-sticky":
                return None
            return {"op": "add_consumer", "consumer": "ghost", "capacity": unbounded, "filters": ["a*"]}
        if probe == "layout-refused" and selector == "buckets" and self.active_segments():
            return self.layout_refusal(data)
        return None

    def layout_refusal(self, data: st.DataObject) -> dict[str, Any]:
        """A rollover to a bucket count outside 1..N_max (KS-BKT-2), or a merge of segments that are not adjacent."""
        assert self.session is not None
        segments = self.session.checker.segments
        active = self.active_segments()
        adjacent = set(self.adjacent_segments())
        apart = [(a, b) for a in active for b in active if (a, b) not in adjacent]
        if apart and self.able("merge") and data.draw(st.booleans(), label="merge"):
            lower, upper = data.draw(st.sampled_from(apart), label="segments")
            return {"op": "merge", "lower": lower, "upper": upper, "successor": max(segments) + 1}
        maximum = int(self.session.config.get("bucket_max", 1024))
        bad = data.draw(st.sampled_from((maximum + 1, 0)), label="buckets")
        return {"op": "rollover", "segment": active[0], "successor": max(segments) + 1, "buckets": bad}

    # --- quiescence and judgement ----------------------------------------------------------------

    @precondition(lambda self: bool(self.session and self.session.checker.messages) and not self.tainted)
    @rule(order=st.sampled_from(ORDERS))
    def settle(self, order: str) -> None:
        """Everyone acks, blocked keys are released, time passes: liveness is judged (spec section 19)."""
        assert self.session is not None
        with self.ending_the_run_on_fault():
            self.session.settle(order, seed=len(self.session.steps))
        self.settled_at = len(self.session.steps)

    @rule()
    def idle(self) -> None:
        """Nothing happens (a rule that is always enabled, so that every state has a next step)."""

    @invariant()
    def judged(self) -> None:
        """Every step is judged: an anomaly of a kind not found yet fails the example; one of a kind found
        already is recorded, and the example goes on looking for the others."""
        session = self.session
        if session is None or self.tainted:
            return
        found = session.new_anomalies()
        if not found:
            return
        self.context.observe(session, found)
        if any(a.name not in self.context.suppressed for a in found):
            self.tainted = True  # teardown must not settle on top of the failure it is unwinding from
            raise Violation(found, session)

    def teardown(self) -> None:
        """Settle once more if the last step was not a settle, judge, and count what was exercised."""
        session = self.session
        if session is None:
            return
        try:
            if not self.tainted:
                with self.ending_the_run_on_fault():
                    session.flush()  # a batch session replays what it still holds: the example is judged whole
                self.judged()
            if not self.tainted and session.checker.messages and self.settled_at != len(session.steps):
                with self.ending_the_run_on_fault():
                    session.settle("oldest", seed=len(session.steps))
                self.judged()
        finally:
            self.context.collect(session)


def machine_for(context: RunContext) -> type[KeySharedMachine]:
    """The machine bound to one run's context: a subclass, because Hypothesis builds machines without arguments."""

    class Bound(KeySharedMachine):
        """KeySharedMachine for one run."""

    Bound.context = context
    return Bound


_NO_FILTERS = ("pulsar-auto-split", "pulsar-sticky", "buckets")
