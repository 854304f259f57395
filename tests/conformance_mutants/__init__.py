"""Deliberately broken dispatchers (mutants): each breaks one rule of the spec the way real brokers do.

A check of the conformance suite is only real if a broken implementation makes it fail. Every mutant
here is the reference dispatcher with one bug, declares the requirement IDs the suite must catch it
on, those it may also be reported on (consequences of the bug that break another rule), and the
capability slice it is tested with (the slice narrows what the suite draws so that the bug is found
within the `ci` profile; it is declared honestly, like any adapter's capabilities).
`tests/test_conformance_mutants.py` proves each is caught: must <= found <= must | may.

Double mutants combine a cheap bug, which shows in almost every example, with a deep one: one `ci` run
must report both (a found kind never hides another).

Every mutant is also an adapter factory: `keyshared conformance run --adapter
py:conformance_mutants:no_draining` runs the suite against one (with `tests/` on `PYTHONPATH`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ks_reference.adapter import CAPABILITIES, ReferenceAdapter
from ks_reference.dispatcher import OPS, Dispatcher

from conformance_mutants import bugs


@dataclass(frozen=True)
class Mutant:
    """One broken dispatcher: what is wrong, what the suite must report, and what it is run with."""

    name: str
    bug: str
    """The bug in one sentence, as a broker team would describe it."""
    catches: frozenset[str]
    """The requirement IDs the suite must report failed."""
    dispatcher: type[Dispatcher] = Dispatcher
    adapter: type[ReferenceAdapter] = ReferenceAdapter
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the reference's capabilities: the slice of the configuration space searched."""
    warns: frozenset[str] = frozenset()
    """SHOULD requirements the suite must report as warnings."""
    may: frozenset[str] = frozenset()
    """Requirements the suite may also report failed: what the bug breaks only in some of its examples."""

    def create(self) -> ReferenceAdapter:
        """The adapter object the kit connects to in process."""
        mutant = self

        class MutantAdapter(mutant.adapter):  # type: ignore[name-defined,misc]
            dispatcher_class = mutant.dispatcher

            def start(self) -> dict[str, Any]:
                info = super().start()
                info["implementation"] = {**info["implementation"], "name": f"mutant-{mutant.name}"}
                info["capabilities"] = {**CAPABILITIES, **WITHOUT_ZOMBIES, **mutant.capabilities}
                return info

        return MutantAdapter(durable=False)


WITHOUT_ZOMBIES: dict[str, Any] = {
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "publish_delayed", "seek", "extend")],
    "shared_names": False,
    "key_batches": False,
    "config_values": {
        k: v
        for k, v in CAPABILITIES["config_values"].items()
        if k not in ("ack_by_id", "persist_trigger", "persist_flush", "layout")
    },
}
"""What a mutant declares unless its slice says otherwise: the reference's ops and options without those added
since 1.6 (the zombie ops and `ack_by_id`, KS-ACK-3; `publish_delayed`, KS-ORD-5; `seek`, section 14; `extend`,
KS-RTY-8; the debounce options, KS-CUR-12; the reported layout, KS-BKT-11; shared consumer names, KS-ASN-5;
key-based batches and batches under permits or the look-ahead, `key_batches`, section 17), which
change how Hypothesis draws every example; only the mutants that test them draw them, so every other mutant's search
stays as tuned."""
OWNER = {"profiles": ["owner"]}
STRICT = {"profiles": ["strict"]}
RING = {"selectors": ["ring"]}
BUCKETS = {"selectors": ["buckets"]}
BASE: dict[str, Any] = {**OWNER, **RING, "poison_policies": ["drop"], "config_values": {}}
"""The slice most mutants are run with: one profile, one selector, one poison policy, and none of the options
the reference declares (`tick_order` stays standard: Danube's order would spend examples most bugs do not need)."""
ZOMBIES: dict[str, Any] = {**BASE, "ops": [op for op in OPS if op not in ("publish_delayed", "seek", "extend")]}
"""The reference's ops, the zombie ops (KS-ACK-3) included: only the mutants that test them draw them."""
DELAYED: dict[str, Any] = {
    **BASE,
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "seek", "extend")],
}
"""The reference's ops with delayed delivery (`publish_delayed`, KS-ORD-5 to KS-ORD-7): only the mutants that test
it draw it."""
EXTENSIONS: dict[str, Any] = {
    **BASE,
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "publish_delayed", "seek")],
}
"""The reference's ops with `extend` (KS-RTY-8), without the zombie ops: only the extension mutants draw it."""
ACK_BY_ID: dict[str, Any] = {**ZOMBIES, "config_values": {"ack_by_id": [True]}}
"""Acknowledging by message id (spec section 20): a zombie ack of an unresolved message resolves it."""
SEEK: dict[str, Any] = {
    **BASE,
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "publish_delayed", "extend")],
}
"""The reference's ops with `seek` (section 14), without the zombie ops: only the mutants that test it draw it."""
SEEK_DEBOUNCED: dict[str, Any] = {**SEEK, "config_values": {"persist_interval": [2, 3]}}
"""A seek under a debounced cursor (`persist_interval` above 0): its own write must not wait (KS-CUR-10)."""
CHECKPOINTS: dict[str, Any] = {"checkpoint_resume": [True], "bucket_budget": [2, 4], "persist_interval": [0, 1]}
"""Restarts that resume buckets from their checkpoints (spec section 17): more than one bucket, so that one can be
checkpointed past a message of another that holds the cursor back."""
PERMITS: dict[str, Any] = {**BASE, "config_values": {"flow_control": ["permits"]}}
"""Pulsar's permits (spec section 8): `capacity` is a first grant, and the kit draws `flow` ops."""
LOOKAHEAD: dict[str, Any] = {
    **BASE,
    "config_values": {
        "read_bound": ["lookahead"],
        "lookahead_per_consumer": [1, 2],
        "lookahead_per_subscription": [3, 0],
    },
}
"""Pulsar's look-ahead limits (spec section 8) instead of the window."""
KEY_BATCHES: dict[str, Any] = {**BASE, "key_batches": True}
"""Key-based batches (spec section 17, PIP-34): the repeats of a burst's first key are published as one entry."""
KEY_BATCH_PERMITS: dict[str, Any] = {**KEY_BATCHES, "config_values": {"flow_control": ["permits"]}}
"""Key-based batches under Pulsar's permits: a batch needs one permit and is charged whole (KS-FLW-4)."""
PARKING: dict[str, Any] = {**BASE, "config_values": {"park_after": [1, 2]}}
"""Parking a hot key's backlog (spec section 15): the kit draws `park_after` 1 or 2 in every example."""
HEARTBEAT_READS: dict[str, Any] = {**BASE, "config_values": {"read_trigger": ["heartbeat"]}}
"""Danube's heartbeat reads (KS-GEN-8): only a tick's dispatch pass must read new messages."""
SLACK_OF_ONE: dict[str, Any] = {**BASE, "config_values": {"timer_slack": [1]}}
"""Timers that may fire one tick late (KS-GEN-9)."""
ON_ADVANCE: dict[str, Any] = {**BASE, "config_values": {"persist_trigger": ["advance"], "persist_interval": [1, 2]}}
"""Danube's cursor writes (KS-CUR-12): on a move once the interval has passed, else at the next move."""
FLUSHED: dict[str, Any] = {
    **BASE,
    "config_values": {"persist_trigger": ["advance"], "persist_interval": [2, 3], "persist_flush": [2]},
}
"""Pulsar's cursor writes (KS-CUR-12): rate-limited on each move, and a pending one flushed every other tick."""
SHARED_NAMES: dict[str, Any] = {
    **OWNER,
    "selectors": ["pulsar-consistent"],
    "poison_policies": ["drop"],
    "config_values": {},
    "shared_names": True,
}
"""Consumers joining under a name a member already has (pulsar-consistent, KS-ASN-5)."""
GROWING = ["publish", "add_consumer", "ack", "nack", "tick"]
"""Ops of a membership that only grows: joins to a busy membership are where selector stability shows."""


def _mutant(
    name: str,
    catches: str,
    dispatcher: type[Dispatcher],
    warns: str = "",
    adapter: type[ReferenceAdapter] = ReferenceAdapter,
    may: str = "",
    **capabilities: Any,
) -> Mutant:
    """A mutant described by the first docstring line of its broken class (the adapter, when that is broken)."""
    broken = dispatcher if adapter is ReferenceAdapter else adapter
    return Mutant(
        name,
        (broken.__doc__ or "").strip().splitlines()[0],
        frozenset(catches.split()),
        dispatcher,
        adapter,
        capabilities=capabilities,
        warns=frozenset(warns.split()),
        may=frozenset(may.split()),
    )


MUTANTS: tuple[Mutant, ...] = (
    # ordering (section 6); visiting a key newest first, a message that waits beyond the window (with parking,
    # spec section 15) stops the key before its older messages are visited: idle (ISO-1) or unfiltered (FLT-3), or,
    # for a message a restart restored, restart-skip (CUR-3)
    _mutant("newest_first", "KS-ORD-1", bugs.NewestFirst, may="KS-ISO-1 KS-FLT-3 KS-CUR-3", **OWNER, **RING),
    # overtaken-hold is a key-reorder of a held message: both are reported at the delivery (and, as newest_first, a
    # message a restart restored may wait: restart-skip)
    _mutant(
        "held_overtaken", "KS-ORD-1 KS-FLW-3", bugs.HeldOvertaken, may="KS-ISO-1 KS-FLT-3 KS-CUR-3", **OWNER, **RING
    ),
    _mutant("strict_pipelines", "KS-ORD-2", bugs.StrictPipelines, **STRICT, **RING),
    _mutant("retry_behind", "KS-ORD-3", bugs.RetryBehind, **BASE),
    # draining (section 7)
    _mutant("no_draining", "KS-DRN-1", bugs.NoDraining, **BASE),
    # messages stuck behind the drain are idle (ISO-1); at quiescence they are drain-stuck (DRN-2), and what a
    # leave returned into the stuck key is lost (MEM-1) or stuck (LIV-1), what a restart brought back restart-skip
    _mutant("drain_never_clears", "KS-ISO-1", bugs.DrainNeverClears, may="KS-DRN-2 KS-LIV-1 KS-MEM-1 KS-CUR-3", **BASE),
    # assignment (section 4) and filters (section 5)
    # routing by offset moves keys within an epoch (ASN-1) and across a join to old members (ASN-2)
    _mutant("per_message_routing", "KS-ASN-1 KS-ASN-2", bugs.PerMessageRouting, **BASE),
    _mutant("modulo_ring", "KS-ASN-2", bugs.ModuloRing, **BASE, ops=GROWING),
    # a Kafka-style rebalance on a join is a move to the joiner: allowed for a ring, not under partitions
    _mutant(
        "partitions_rebalanced_on_join",
        "KS-ASN-2",
        bugs.PartitionsRebalancedOnJoin,
        **{**BASE, "selectors": ["partitions"]},
        ops=GROWING,
    ),
    # a key routed to a consumer that refuses it can leave an accepting consumer idle (ISO-1)
    _mutant("filters_ignored", "KS-FLT-2", bugs.FiltersIgnoredInRouting, may="KS-ISO-1", **BASE),
    _mutant("target_filters", "KS-FLT-3", bugs.FilterByRingTarget, **BASE),
    _mutant("filter_when_empty", "KS-FLT-4", bugs.FilterWithoutMembers, **BASE),
    # flow control (section 8)
    # under permits (the KS-FLW-4 vector's configuration) ignoring the room check overdraws permits as well
    _mutant("capacity_ignored", "KS-FLW-1", bugs.CapacityIgnored, may="KS-FLW-4", **BASE),
    _mutant("window_overread", "KS-FLW-2", bugs.WindowOverread, **BASE),
    _mutant("permits_overdrawn", "KS-FLW-4", bugs.PermitsOverdrawn, **PERMITS),
    # the unread message is idle while fewer than L wait: judged through idle-while-ready (KS-ISO-1); with L = 1
    # nothing is ever read, so it also stays stuck (LIV-1), unfiltered (FLT-3) and unread after a restart (CUR-3)
    _mutant(
        "lookahead_stops_early",
        "KS-ISO-1",
        bugs.LookaheadStopsEarly,
        may="KS-LIV-1 KS-FLT-3 KS-CUR-3",
        **LOOKAHEAD,
    ),
    # the unread message is idle while the window, parked messages aside, has room: idle-while-ready (KS-ISO-1),
    # or unfiltered-wait (KS-FLT-3) when no member accepts its key
    _mutant("parking_ignored", "KS-ISO-1", bugs.ParkingIgnored, may="KS-FLT-3", **PARKING),
    # an outstanding message counted as parked lets a first delivery pass the window (KS-FLW-2)
    _mutant("outstanding_parked", "KS-FLW-2", bugs.OutstandingParked, **PARKING),
    # acks, nacks, timeouts, retries (sections 9, 10)
    _mutant("stale_ack_accepted", "KS-ACK-2", bugs.StaleAckAccepted, **BASE),
    # Pulsar's consumer names need not be unique (KS-ASN-5): an ack is still the holder's alone
    _mutant("ack_by_consumer_name", "KS-ACK-2", bugs.AckByConsumerName, **SHARED_NAMES),
    _mutant("first_ack_lost", "KS-ACK-1", bugs.FirstAckLost, **BASE),
    _mutant("stale_nack_accepted", "KS-RTY-1", bugs.StaleNackAccepted, **BASE),
    # section 9: a result for a delivery that ended (KS-ACK-3), and the option ack_by_id's own rule
    _mutant("zombie_ack_accepted", "KS-ACK-3", bugs.ZombieAckAccepted, **ZOMBIES),
    # section 6: delayed delivery (KS-ORD-5 to KS-ORD-7)
    _mutant("delayed_delivered_early", "KS-ORD-5", bugs.DelayedDeliveredEarly, **DELAYED),
    # a later message that is itself delayed and due waits too: due-left-waiting (KS-ORD-7)
    _mutant("delayed_blocks_key", "KS-ORD-6", bugs.DelayedBlocksKey, may="KS-ORD-7", **DELAYED),
    # the message is never delivered: once due it holds its key's place, so a later first delivery is a reorder;
    # it stays unresolved at quiescence and the cursor stops at it
    _mutant("delayed_never_due", "KS-ORD-7", bugs.DelayedNeverDue, may="KS-ORD-1 KS-LIV-1 KS-LIV-2", **DELAYED),
    _mutant("ack_by_id_ignored", "KS-ACK-3", bugs.AckByIdIgnored, **ACK_BY_ID),
    _mutant(
        "ack_by_id_keeps_delivering",
        "KS-RES-2",
        bugs.AckByIdKeepsDelivering,
        # the message is acked again later, the cursor stays behind it, and the stats count it unresolved
        may="KS-RES-1 KS-CUR-5 KS-ISO-1 KS-OBS-1",
        **ACK_BY_ID,
    ),
    # section 14, seek: the replay, what is given up, the durable write and the fence of the deliveries it cut
    _mutant(
        "seek_keeps_acked",
        "KS-CUR-8",
        bugs.SeekKeepsAcked,
        # the mutant's own cursor counts the skipped messages resolved: it persists past them
        may="KS-CUR-1 KS-CUR-3 KS-CUR-10 KS-CUR-5 KS-ISO-1 KS-LIV-1 KS-LIV-2 KS-FLW-2 KS-FLT-3 KS-ORD-1 KS-ORD-2 "
        "KS-OBS-1",
        **SEEK,
    ),
    _mutant("seek_accepts_old_acks", "KS-CUR-11", bugs.SeekAcceptsOldAcks, **SEEK),
    _mutant(
        "seek_resurrects",
        "KS-CUR-9",
        bugs.SeekResurrects,
        # a message kept below the target keeps its attempt count and counts as a hole below the cursor
        may="KS-RTY-5 KS-RES-1 KS-RES-2 KS-CUR-1 KS-CUR-3 KS-CUR-5 KS-ORD-1 KS-ORD-2 KS-DRN-1 KS-OBS-1 KS-ISO-1 "
        "KS-LIV-1 KS-FLT-3",
        **SEEK,
    ),
    _mutant(
        "seek_not_persisted",
        "KS-CUR-10",
        bugs.SeekNotPersisted,
        # a restart before the debounced write resumes from the old cursor: the replay the checker expects never
        # comes (or what the seek gave up comes back), and the late write moves the persisted cursor backwards
        may="KS-CUR-2 KS-CUR-3 KS-CUR-4 KS-CUR-5 KS-CUR-8 KS-CUR-9 KS-ORD-1 KS-ISO-1 KS-LIV-1 KS-FLT-3 KS-OBS-1",
        **SEEK_DEBOUNCED,
    ),
    # section 10.1: extending a delivery's deadline (KS-RTY-8) and fencing the extensions of anyone else (KS-RTY-9);
    # an extension applied by message id moves the holder's real deadline, which the checker keeps: missed-timeout
    _mutant("extend_ignored", "KS-RTY-8", bugs.ExtendIgnored, **EXTENSIONS),
    _mutant("extend_by_zombie", "KS-RTY-9", bugs.ExtendByZombie, may="KS-RTY-3", **EXTENSIONS),
    # section 12: a disconnected member is still a member; its holder's ack resolves the message
    _mutant("disconnected_acks_ignored", "KS-ACK-1", bugs.DisconnectedAcksIgnored, **BASE),
    _mutant(
        "reconnect_ignored",
        "KS-MEM-4",
        bugs.ReconnectIgnored,
        warns="KS-OBS-1",  # the stats say the member is disconnected
        may="KS-ISO-1 KS-DRN-2 KS-LIV-1 KS-MEM-1",  # its keys wait for a member the checker sees connected
        **BASE,
    ),
    _mutant(
        "danube_order_undeclared",
        "KS-GEN-7",
        bugs.DanubeOrderUndeclared,
        may="KS-MEM-2",  # a phase-3 delivery read as phase 5 puts an eviction due in phase 4 behind it
        **BASE,
    ),
    # a message a restart brought back and the over-eager drain holds is reported restart-skip (CUR-3), the
    # checker's name for an idle message with that history
    _mutant(
        "hash_drain_everything",
        "KS-ISO-1",
        bugs.HashDrainEverything,
        may="KS-CUR-3 KS-DRN-2",
        **OWNER,
        selectors=["pulsar-consistent"],
        poison_policies=["drop"],
        config_values={"drain_granularity": ["hash"]},
    ),
    _mutant(
        "drain_unmoved_hash",
        "KS-DRN-2",
        bugs.DrainUnmovedHash,
        **OWNER,
        selectors=["pulsar-consistent"],
        poison_policies=["drop"],
        config_values={"drain_granularity": ["hash"]},
    ),
    _mutant("early_timeout", "KS-RTY-2", bugs.EarlyTimeout, **BASE),
    _mutant("late_timeout", "KS-RTY-3", bugs.LateTimeout, **BASE),
    _mutant("no_backoff", "KS-RTY-4", bugs.NoBackoff, **BASE),
    _mutant("attempt_reset", "KS-RTY-5", bugs.AttemptReset, **BASE),
    _mutant("retry_forever", "KS-RTY-6", bugs.RetryForever, **BASE),
    # poison policies and operator actions (section 11)
    # a message dropped at its first failure after a return reads as its return counted as a failure (RTY-7)
    _mutant("drop_on_first_failure", "KS-RES-1", bugs.DropOnFirstFailure, may="KS-RTY-7", **BASE),
    _mutant(
        "dead_letter_attempt", "KS-POI-2", bugs.DeadLetterAttempt, **OWNER, **RING, poison_policies=["dead-letter"]
    ),
    _mutant("blocked_leak", "KS-POI-3", bugs.BlockedLeak, **OWNER, **RING, poison_policies=["block"]),
    _mutant("skip_ignored", "KS-POI-5", bugs.SkipIgnored, **OWNER, **RING, poison_policies=["block"]),
    # blocking one failure early also blocks a released message early (POI-4), and a returned one (RTY-7)
    _mutant(
        "poison_one_early",
        "KS-POI-3",
        bugs.PoisonOneEarly,
        may="KS-POI-4 KS-RTY-7",
        **OWNER,
        **RING,
        poison_policies=["block"],
    ),
    # with max_redeliveries 0 a kept budget blocks exactly when a fresh one would: the slice declares 1 and 2
    _mutant(
        "release_keeps_budget",
        "KS-POI-4",
        bugs.ReleaseKeepsBudget,
        may="KS-RTY-7",  # the failures kept across the release make a later return look counted as a failure
        **OWNER,
        **RING,
        poison_policies=["block"],
        config_values={"max_redeliveries": [1, 2], "backoff_base": [0], "backoff_max": [0]},
    ),
    # the stranded messages are stuck (LIV-1); one that a leave had returned is reported lost (MEM-1) instead, and
    # one a restart brought back (resolved after the last persistence) restart-skip (CUR-3): the same violation
    # under the names its history gives it, seen only when the example has that history
    _mutant(
        "dropped_key_stranded",
        "KS-LIV-1",
        bugs.DroppedKeyStranded,
        may="KS-CUR-3 KS-MEM-1 KS-ISO-1",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
    ),
    # membership (section 12)
    # the forgotten message is lost (MEM-1); later ones of its key overtake it (ORD-3) or wait forever (LIV-1)
    _mutant(
        "lost_on_leave",
        "KS-MEM-1 KS-LIV-1 KS-ORD-3",
        bugs.LostOnLeave,
        may="KS-CUR-3 KS-ISO-1",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
    ),
    # acks nobody sent (ACK-2), judged within the leave that caused them (an op's own effects never split it)
    _mutant("leave_counts_as_ack", "KS-ACK-2", bugs.LeaveCountsAsAck, **BASE),
    _mutant("early_eviction", "KS-MEM-2", bugs.EarlyEviction, **BASE),
    # a rolling restart poisons healthy messages (the procrastinate adapter shows this bug in a real system); a
    # message it poisoned one failure early is gone while the checker expects it delivered (ISO-1)
    # (under a declared returns_as_failures its returns count twice: poisoned early, an unjustified resolution)
    _mutant("returns_count_as_failures", "KS-RTY-7", bugs.ReturnsCountAsFailures, may="KS-ISO-1 KS-RES-1", **BASE),
    # PIP-486's controller moves (declared), unannounced: a key's bucket is delivered by another consumer within one
    # membership epoch with no decision naming it (BKT-3; the key itself moved: ASN-1)
    _mutant(
        "controller_moves_unannounced",
        "KS-BKT-3",
        bugs.ControllerMovesUnannounced,
        may="KS-ASN-1 KS-BKT-8",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={"bucket_assignment": ["controller"], "controller_moves": [True]},
    ),
    # Pulsar's allowOutOfOrderDelivery (declared: key order and draining given up) still routes a key to one consumer
    # per membership epoch; this one routes each message anew (ASN-1)
    _mutant(
        "out_of_order_per_message",
        "KS-ASN-1",
        bugs.PerMessageRouting,
        may="KS-ASN-2 KS-ISO-1",
        **{**BASE, "config_values": {"out_of_order": [True]}},
    ),
    # Pulsar's unacked limit (declared) resuming only when everything is acked: the consumer idles with room (ISO-1)
    _mutant(
        "unacked_resumes_when_empty",
        "KS-ISO-1",
        bugs.UnackedResumesWhenEmpty,
        may="KS-FLT-3 KS-CUR-3",  # a message restored by a restart waits for the blocked consumer: restart-skip
        **{**BASE, "config_values": {"max_unacked": [2, 3]}},
    ),
    # the same system with the declaration, whose counting forgets the returns: a message over its counted budget is
    # delivered again (RTY-6)
    _mutant(
        "declared_returns_uncounted",
        "KS-RTY-6",
        bugs.DeclaredReturnsUncounted,
        **{**BASE, "config_values": {"returns_as_failures": [True]}},
    ),
    _mutant("disconnected_served", "KS-MEM-3", bugs.DisconnectedServed, **BASE),
    # resolutions and duplicates (section 13)
    # the second copy is a duplicate (RES-2) that takes a second permit (FLW-1)
    # the second send needs room it does not have: capacity (FLW-1), or under permits a permit (FLW-4)
    _mutant("sent_twice", "KS-RES-2 KS-FLW-1", bugs.SentTwice, may="KS-FLW-4", **BASE),
    # the cursor (section 14)
    # the window counts from the broken cursor, so reading goes wrong too (FLW-2, ISO-1, ORD-1) and messages
    # below the cursor are never read again after a restart (LIV-1)
    _mutant(
        "cursor_at_highest_ack",
        "KS-CUR-1",
        bugs.CursorAtHighestAck,
        warns="KS-OBS-1",
        may="KS-FLW-2 KS-ISO-1 KS-LIV-1 KS-ORD-1 KS-FLT-3",
        **BASE,
    ),
    # the replayed old write moves the cursor back (CUR-2) and is a write persistence did not call for (CUR-5)
    # the stale write is also an extra write: persist-early, a SHOULD since spec 1.2 (KS-CUR-7)
    _mutant("stale_cursor_write", "KS-CUR-2", bugs.StaleCursorWrite, warns="KS-CUR-7", **BASE),
    # a message in a persisted hole was resolved, and the restart did not lose that: resurrected and duplicate
    # after it, the dispatcher owes deliveries of messages the checker knows resolved: its acks, timeouts, capacity,
    # isolation and stats then disagree with the events (consequences, reached by rounds that spend their budget)
    _mutant(
        "holes_reread",
        "KS-CUR-4 KS-RES-2",
        bugs.HolesReread,
        may="KS-ACK-1 KS-CUR-5 KS-FLW-1 KS-ISO-1 KS-RES-1 KS-RTY-3 KS-OBS-1",
        **BASE,
        filters=False,
    ),
    # the kept acks were never persisted: the cursor it persists later passes messages the checker still owes
    # (CUR-1), and later messages of their keys overtake them (ORD-1, FLW-2 through the window)
    _mutant(
        "restart_keeps_volatile_acks",
        "KS-CUR-3",
        bugs.RestartKeepsVolatileAcks,
        may="KS-CUR-1 KS-CUR-5 KS-ORD-1 KS-FLW-2 KS-FLT-3 KS-ISO-1",
        **BASE,
        stats=False,
    ),
    _mutant("persist_on_tick_only", "KS-CUR-5", bugs.PersistOnTickOnly, **BASE),
    _mutant("persist_eagerly", "", bugs.PersistEagerly, warns="KS-CUR-7", **BASE),  # a SHOULD since spec 1.2
    # the unflushed tail is late (CUR-5) and, at quiescence, a stalled cursor (LIV-2)
    _mutant("cursor_tail_unflushed", "KS-CUR-5", bugs.CursorTailUnflushed, may="KS-LIV-2", **BASE),
    # the debounces of Danube and Pulsar (KS-CUR-12, judged through persist-late): each declares its option and breaks
    # the option's own rule
    # writing at a tick that moved nothing is also early (KS-CUR-7, a SHOULD)
    _mutant("advance_written_at_tick", "KS-CUR-5", bugs.AdvanceWrittenAtTick, may="KS-CUR-7", **ON_ADVANCE),
    _mutant("flush_never_runs", "KS-CUR-5", bugs.FlushNeverRuns, may="KS-LIV-2", **FLUSHED),
    # isolation (section 15), the tick (section 3)
    # the pass that stops at a stuck key never reaches a message nobody accepts either (FLT-3)
    _mutant("head_of_line", "KS-ISO-1", bugs.HeadOfLine, may="KS-FLT-3", **BASE),
    # heartbeat-driven systems (KS-GEN-8, KS-GEN-9): each declares its option and breaks the option's own rule
    _mutant("heartbeat_skipped", "KS-ISO-1", bugs.HeartbeatSkipped, may="KS-FLT-3 KS-CUR-3", **HEARTBEAT_READS),
    _mutant(
        "timers_too_late", "KS-RTY-3", bugs.TimersTooLate, may="KS-MEM-2 KS-CUR-5 KS-ISO-1 KS-FLT-3", **SLACK_OF_ONE
    ),
    # the deliveries before the eviction cross phase 4 with the eviction missing (MEM-2), then it comes late
    _mutant("dispatch_before_eviction", "KS-GEN-7 KS-MEM-2", bugs.DispatchBeforeEviction, **BASE),
    # observability (section 16)
    _mutant("blocked_keys_hidden", "KS-OBS-2", bugs.BlockedKeysHidden, **OWNER, **RING, poison_policies=["block"]),
    # buckets (section 17)
    _mutant("bucket_off_by_one", "KS-BKT-1", bugs.BucketOffByOne, **OWNER, **BUCKETS, poison_policies=["drop"]),
    _mutant(
        "sticky_in_name",
        "KS-BKT-8",
        bugs.StickyInName,
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={"bucket_assignment": ["sticky"]},
    ),
    _mutant("owners_reversed", "KS-BKT-3", bugs.OwnersReversed, **OWNER, **BUCKETS, poison_policies=["drop"]),
    _mutant("no_handoff", "KS-BKT-4", bugs.NoHandoff, **OWNER, **BUCKETS, poison_policies=["drop"]),
    _mutant("successor_first", "KS-BKT-5", bugs.SuccessorFirst, **OWNER, **BUCKETS, poison_policies=["drop"]),
    # searched without checkpoint_resume; on a vector with it, a restart resumes from the checkpoint it moved too far:
    # the cursor then passes what it skipped (CUR-1), and the stats' cursor is ahead of the events (OBS-1, a warning)
    _mutant(
        "checkpoint_ahead",
        "KS-BKT-6",
        bugs.CheckpointAhead,
        may="KS-CUR-1 KS-OBS-1 KS-ISO-1",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={"checkpoint_resume": [False]},
    ),
    _mutant("merge_waits_for_one", "KS-BKT-5", bugs.MergeWaitsForOne, **OWNER, **BUCKETS, poison_policies=["drop"]),
    # a message the checkpoint covers stays resolved in the trace: delivering it again is also a duplicate (RES-2);
    # after it, as for holes_reread, the dispatcher owes deliveries of messages the checker knows resolved: its acks,
    # timeouts, capacity, persistence and stats then disagree with the events
    _mutant(
        "checkpoints_ignored_at_restart",
        "KS-BKT-9",
        bugs.CheckpointsIgnoredAtRestart,
        may="KS-RES-2 KS-ACK-1 KS-CUR-5 KS-FLW-1 KS-RES-1 KS-RTY-3 KS-OBS-1",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={"checkpoint_resume": [True]},
    ),
    # the messages it skips stay unresolved in the trace, so the cursor persisted past them is the first sign (CUR-1);
    # then whatever waits behind them: a checkpoint past them (BKT-6), a successor served (BKT-5), a later message of
    # their key (ORD-1), the window counting them (FLW-2), liveness (LIV-1), the skip itself (CUR-3); the stats'
    # cursor is ahead of the events (OBS-1, a warning)
    _mutant(
        "one_checkpoint_for_all",
        "KS-CUR-1",
        bugs.OneCheckpointForAll,
        may="KS-CUR-3 KS-BKT-6 KS-BKT-5 KS-ORD-1 KS-FLW-2 KS-LIV-1 KS-OBS-1 KS-ISO-1",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values=CHECKPOINTS,
    ),
    # a key-based batch split at the consumer's capacity: its rest follows in a later op (BKT-10); a message left
    # waiting past the window overruns it when it goes (FLW-2), or idles with the key's consumer free (ISO-1)
    _mutant("key_batch_split", "KS-BKT-10", bugs.KeyBatchSplit, may="KS-FLW-2 KS-ISO-1", **KEY_BATCHES),
    # a batch charged as one permit: the consumer is sent more than its grants (FLW-4)
    _mutant("batch_charged_one_permit", "KS-FLW-4", bugs.BatchChargedOnePermit, **KEY_BATCH_PERMITS),
    # a batch is read whole, past the window: delivered piece by piece, its later messages overrun it (FLW-2)
    _mutant(
        "batch_split",
        "KS-BKT-10",
        bugs.BatchSplit,
        may="KS-FLW-2",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={},
    ),
    # layout = "reported" (KS-BKT-11): the split point is chosen by load, but the layout reported is the imposed
    # midpoint, so keys between the two points are placed in a segment the reported layout does not route them to
    # (BKT-1); the segments' owners and drains then differ from what the checker derives (BKT-3, BKT-5, ASN-1), a
    # later split's midpoint is taken from the real parent, not the reported one (BKT-11), and a merge or split the
    # reported layout refuses or allows is answered by the real one (GEN-4)
    _mutant(
        "reported_layout_misroutes",
        "KS-BKT-1",
        bugs.ReportedLayoutMisroutes,
        may="KS-BKT-3 KS-BKT-5 KS-BKT-8 KS-BKT-11 KS-ASN-1 KS-ISO-1 KS-GEN-4",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={"layout": ["reported"]},
    ),
    # the upper child reported from the split point itself: both children claim one slot (BKT-11); a key of that
    # slot is then routed to the child the checker does not pick (BKT-1), and a merge of the real neighbours is not
    # one of adjacent segments in the reported layout (GEN-4)
    _mutant(
        "reported_layout_invalid",
        "KS-BKT-11",
        bugs.ReportedLayoutInvalid,
        may="KS-BKT-1 KS-BKT-3 KS-BKT-5 KS-ASN-1 KS-GEN-4",
        **OWNER,
        **BUCKETS,
        poison_policies=["drop"],
        config_values={"layout": ["reported"]},
    ),
    # best-effort (section 18)
    # a best-effort message had its outcome: sending it again is both a redelivery and a duplicate
    _mutant("best_effort_redelivers", "KS-BEF-1 KS-RES-2", bugs.BestEffortRedelivers, profiles=["best-effort"], **RING),
    _mutant("drops_uncounted", "KS-BEF-2", bugs.DropsUncounted, profiles=["best-effort"], **RING),
    # refusals and configuration (sections 2, 3)
    _mutant("duplicate_name_accepted", "KS-GEN-4", bugs.DuplicateNameAccepted, **BASE),
    # adapter protocol v2: no key affinity (selector any), no cursor, implementation-defined outcomes
    _mutant("never_filters", "KS-FLT-3", bugs.NeverFilters, **BASE),
    # a message a restart brought back and left waiting is reported as restart-skip (CUR-3) instead of ISO-1
    _mutant(
        "any_busy_first",
        "KS-ISO-1",
        bugs.AnyBusyFirst,
        may="KS-CUR-3",
        **STRICT,
        selectors=["any"],
        poison_policies=["drop"],
    ),
    # an acknowledged message delivered again after the restart is also a duplicate (RES-2); from then on the
    # dispatcher's state is not the one its events describe, so later deliveries and resolutions look wrong too
    _mutant(
        "cursorless_forgetful",
        "KS-CUR-4",
        Dispatcher,
        adapter=bugs.CursorlessForgetful,
        may="KS-RES-2 KS-RES-1 KS-FLT-3 KS-FLW-1 KS-ISO-1 KS-ACK-1 KS-RTY-3 KS-RTY-1 KS-DRN-1",
        **BASE,
        cursor=False,
        persist_ack_holes=False,
        stats=False,
    ),
    _mutant(
        "outcome_undeclared",
        "KS-RES-1",
        Dispatcher,
        adapter=bugs.OutcomeUndeclared,
        **BASE,
        terminal_outcomes={"discarded": None},
    ),
    # SHOULD requirements: reported as warnings, never as failures
    _mutant("stats_miscount", "", bugs.StatsMiscount, **BASE, warns="KS-OBS-1"),
    _mutant("stats_now_lags", "", bugs.StatsNowLags, **BASE, warns="KS-OBS-1"),
    _mutant("hash_ordered_pass", "", bugs.HashOrderedPass, **BASE, warns="KS-GEN-5"),
    _mutant("start_seeded_pass", "", bugs.HashOrderedPass, adapter=bugs.StartSeededAdapter, **BASE, warns="KS-GEN-5"),
    _mutant("lenient_config", "KS-CFG-1", Dispatcher, adapter=bugs.LenientConfigAdapter, **BASE),
    # a system fault is a finding (KS-GEN-4) with its scenario, not an adapter fault that ends the run
    _mutant("publish_crashes_after_nack", "KS-GEN-4", Dispatcher, adapter=bugs.PublishCrashesAfterNack, **BASE),
    # a declared absence is a promise: timers: false, yet deliveries time out on tick
    _mutant(
        "times_out_without_timers",
        "KS-RTY-2",
        Dispatcher,
        adapter=bugs.TimesOutWithoutTimers,
        **BASE,
        timers=False,
        ack_timeout=False,
    ),
)
"""One mutant per MUST requirement the checker covers (and the real bugs of issue 5)."""


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
    _mutant("retry_and_failover_behind", "KS-ORD-3", bugs.RetryBehindFailoverNewFirst, **BASE),
    # one nack in five passed over: replays reproduce it only sometimes (the adapter says `deterministic: false`)
    _mutant(
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
