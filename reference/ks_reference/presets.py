"""Seed-faithful presets: the reference configured to behave as each seed design describes (spec section 21).

A preset is not another code base: it is the reference adapter with its capabilities narrowed to the
configuration a seed uses (its profile, selector and options, declared as `config_values` so the
conformance kit draws nothing else), plus, where a preset reproduces a weakness the seed admits on purpose,
the one behaviour that differs. Each preset lists the findings the kit must report for it (`expected`):
none for behaviour the seed describes as correct, exactly the admitted weakness otherwise.

Run one with `keyshared conformance run --adapter py:ks_reference.presets:danube` (or `pulsar_379`,
`pip_486`, `danube_at_most_once`, `classic_pulsar`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ks_reference.adapter import CAPABILITIES, ReferenceAdapter
from ks_reference.classic import RecentlyJoinedConsumers
from ks_reference.core import Member
from ks_reference.dispatcher import OPS, Dispatcher


class EvictionCountsAsAck(Dispatcher):
    """Danube's eviction: an evicted consumer's in-flight messages are counted as acknowledged.

    Danube's architecture page states the trade-off (at-most-once for those messages, so that the cursor
    does not stall); the spec forbids it (KS-MEM-1). No event reports the resolution, as in Danube, where the
    offsets are only added to the acked set.
    """

    evicting = False

    def phase_eviction(self) -> None:
        self.evicting = True
        try:
            super().phase_eviction()
        finally:
            self.evicting = False

    def on_leave(self, member: Member) -> None:
        if not self.evicting:
            super().on_leave(member)  # a leave returns the messages, as in Danube
            return
        for offset in sorted(member.outstanding):
            message = self.messages[offset]
            self.end_delivery(message)
            self._unindex(message)
            del self.messages[offset]
            queue = self.queues[message.key]
            queue.remove(offset)
            if not queue:
                del self.queues[message.key]
            self.cursor.resolve(offset)  # breaks KS-MEM-1: counted as acked, never delivered again
        super().on_leave(member)


SEED_OPS = [op for op in OPS if op != "extend"]
"""The reference's ops but `extend` (KS-RTY-8): the brokers the presets stand for have no per-message deadline
extension (Pulsar and Danube), so only the task queue's preset, whose leases are renewed, declares it."""
NOT_DANUBE = ("rollover", "split", "merge", "publish_entry", "seek", "publish_delayed")
"""The ops the Danube and task-queue presets do not declare: no bucket layout, no cursor reset (section 14) and no
delayed delivery (section 6)."""

PULSAR_CAPABILITIES: dict[str, Any] = {
    # A dropped connection is a leave in Pulsar: there is no disconnected-member state.
    "ops": [
        op
        for op in SEED_OPS
        if op not in ("disconnect", "reconnect", "rollover", "split", "merge", "publish_entry", "publish_delayed")
    ],
    "filters": False,
    "poison_policies": ["dead-letter"],
}
"""What every Pulsar preset declares beside its configuration: no disconnect or layout ops, no filters, dead letters.
Delayed delivery (`publish_delayed`) is added by `pulsar-379` only, the preset of Pulsar's current dispatcher."""


@dataclass(frozen=True)
class Preset:
    """One seed's configuration, and what the conformance kit must find when it runs against it."""

    name: str
    seed: str
    profile: str
    selector: str
    config_values: dict[str, list[Any]]
    capabilities: dict[str, Any] = field(default_factory=dict)
    dispatcher: type[Dispatcher] = Dispatcher
    expected: dict[str, str] = field(default_factory=dict)
    """Requirement ID -> why the kit must report it (a weakness the seed admits, reproduced on purpose)."""
    consequences: dict[str, str] = field(default_factory=dict)
    """Requirement ID -> why the kit may also report it: the same weakness seen through another check."""
    differences: tuple[str, ...] = ()
    """Where the preset still differs from the seed, with the reason (also in spec section 21)."""

    def declared_capabilities(self) -> dict[str, Any]:
        """The reference's capabilities narrowed to this preset (key-based batches only where a preset says so)."""
        return {
            **CAPABILITIES,
            "key_batches": False,
            "profiles": [self.profile],
            "selectors": [self.selector],
            "config_values": self.config_values,
            **self.capabilities,
        }


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "pulsar-379",
            "PIP-379: Key_Shared draining hashes",
            "owner",
            "pulsar-consistent",
            {
                "drain_granularity": ["hash"],
                "tick_order": ["standard"],
                "flow_control": ["permits"],
                "read_bound": ["lookahead"],
                "lookahead_per_consumer": [1, 2],
                "lookahead_per_subscription": [3, 6, 0],
                "max_unacked": [0, 2, 4],
                "ack_by_id": [True],  # Pulsar acknowledges by message id, whichever consumer sends it
                # Pulsar rate-limits mark-delete writes on each advance and flushes a pending one periodically
                "persist_trigger": ["advance"],
                "persist_flush": [2, 3],
            },
            # Pulsar delivers delayed messages (deliverAt, deliverAfter) on Key_Shared subscriptions (KS-ORD-5), and
            # batched entries of one key each from the producer's key-based batcher (PIP-34, spec section 17).
            capabilities={
                **PULSAR_CAPABILITIES,
                "ops": [*PULSAR_CAPABILITIES["ops"], "publish_delayed", "publish_entry"],
                "key_batches": True,
            },
            differences=(
                "the look-ahead limit is checked before each message is read, where Pulsar checks it before reading a "
                "batch of entries that may overshoot it (KS-FLW-5)",
                "redelivery keeps key order (KS-ORD-3), where Pulsar's replay may break it",
                "a batched entry needs a permit when it is sent and is charged its messages (KS-FLW-4), where Pulsar's "
                "dispatcher counts one permit per entry against the permits it saw before a read, so one read may "
                "send a consumer several batches on one check; the look-ahead counts waiting messages, where Pulsar's "
                "replay queue counts entries (it reads on longer, which KS-FLW-5 allows)",
            ),
        ),
        Preset(
            "pulsar-out-of-order",
            "Pulsar's Key_Shared with allowOutOfOrderDelivery (PIP-379 otherwise)",
            "owner",
            "pulsar-consistent",
            {
                "out_of_order": [True],
                "flow_control": ["permits"],
                "read_bound": ["lookahead"],
                "lookahead_per_consumer": [1, 2],
                "lookahead_per_subscription": [3, 6, 0],
                "max_unacked": [0, 2, 4],
            },
            capabilities=PULSAR_CAPABILITIES,
            differences=(
                "no draining at all: a key's messages go to its current target at once, as Pulsar does with "
                "allowOutOfOrderDelivery; key order and one holder per key are given up (a departure, spec "
                "section 21.1), routing per key is kept (KS-ASN-1)",
            ),
        ),
        Preset(
            "classic-pulsar",
            "Pulsar's Key_Shared before PIP-379, with PIP-282's recently joined consumers",
            "owner",
            "pulsar-consistent",
            {
                "drain_granularity": ["key"],
                "tick_order": ["standard"],
                "flow_control": ["permits"],
                "read_bound": ["window"],
            },
            # Without seek: a replay waiting behind a recent joiner would show PIP-379's stall as seek-skip instead of
            # the idle-while-ready the preset documents (and the kit's draws for its findings would change).
            # no seek, and no shared consumer names: its documented findings are the point of this preset, and both
            # would change the search that finds them (seek: a replay waiting behind a joiner shows as seek-skip)
            capabilities={
                **PULSAR_CAPABILITIES,
                "ops": [op for op in PULSAR_CAPABILITIES["ops"] if op != "seek"],
                "shared_names": False,
            },
            dispatcher=RecentlyJoinedConsumers,
            expected={
                "KS-ISO-1": "PIP-379 (motivation, item 4): while a recent joiner waits for the mark-delete position, "
                "its keys wait although nothing of them is outstanding, and nothing more is read for any key, so "
                "members with room stay idle (`idle-while-ready`)",
            },
            consequences={
                "KS-DRN-1": "PIP-379 (motivation, item 2): a joiner that catches up, or gets a redelivery below its "
                "position, receives a key whose old owner still holds a later message of it (`split-owner`); found in "
                "most `ci` runs (seeds 1 to 3), not in seed 0's",
                "KS-DRN-2": "a joiner's message is held as `draining` while nothing of its key is outstanding",
                "KS-ORD-1": "with the key on two consumers, its messages reach them out of offset order",
                "KS-ORD-3": "a message of a key on two consumers is redelivered after a later one of its key went out",
            },
            differences=(
                "the joiner's position is PIP-282's last sent position; the classic dispatcher Pulsar 4 keeps "
                "(PersistentStickyKeyDispatcherMultipleConsumersClassic) records the read position, as before PIP-282",
                "reading stops while any message waits for a recent joiner, where Pulsar stops reading ahead only "
                "after a read of which nothing could be sent",
                "a message that cannot go is held in place, where Pulsar puts it in the replay queue; the window "
                "stands for maxUnackedMessagesPerSubscription",
            ),
        ),
        Preset(
            "danube",
            "Danube's Key-Shared dispatch architecture",
            "strict",
            "danube",
            # Danube reads its log at the heartbeat (KS-GEN-8) and measures its timers there, one tick late at most
            # for a delivery made between two heartbeats (KS-GEN-9); its engine writes the cursor on an advance once
            # the flush interval has passed, else at the next advance (KS-CUR-12).
            {
                "tick_order": ["danube"],
                "read_trigger": ["heartbeat"],
                "timer_slack": [1],
                "evict_after": [1, 2, 6],
                "persist_trigger": ["advance"],
            },
            capabilities={"ops": [op for op in SEED_OPS if op not in NOT_DANUBE]},
            differences=(
                "an evicted consumer's messages are delivered again (KS-MEM-1); the `danube_at_most_once` preset "
                "reproduces Danube's at-most-once eviction instead",
                "a message no member accepts is resolved as `filtered`, an event, where Danube acks it silently",
                "the timers run at every second tick, one of the schedules timer_slack 1 allows, where Danube's fire "
                "at the first heartbeat after they are due (one tick late for a delivery made between two)",
            ),
        ),
        Preset(
            "danube-at-most-once",
            "Danube's Key-Shared dispatch architecture, its eviction included",
            "strict",
            "danube",
            {"tick_order": ["danube"], "evict_after": [1, 2]},
            capabilities={"ops": [op for op in SEED_OPS if op not in NOT_DANUBE]},
            dispatcher=EvictionCountsAsAck,
            expected={
                "KS-CUR-1": "Danube counts an evicted consumer's in-flight messages as acked (at-most-once) so that "
                "the cursor can advance: the persisted cursor passes offsets that were never resolved",
            },
            consequences={
                "KS-MEM-1": "the evicted consumer's messages are never delivered again (`lost` at quiescence)",
                "KS-CUR-5": "the store's cursor and the resolutions the trace shows disagree, so persistence looks "
                "late (`persist-late`)",
                "KS-LIV-1": "a message counted as acked stays unresolved in the trace (`stuck-key`)",
                "KS-LIV-2": "the persisted cursor and the trace's resolutions disagree at quiescence",
                "KS-ISO-1": "the checker sees the message as awaiting redelivery while members have room",
                "KS-FLT-3": "the checker sees the message waiting while no member accepts its key",
                "KS-ORD-1": "later messages of the key go out while the checker still sees it unresolved",
                "KS-ORD-2": "as KS-ORD-1, in the strict profile",
                "KS-ORD-3": "as KS-ORD-1, for a message the checker sees awaiting redelivery",
                "KS-FLW-2": "the window the checker counts still holds the message",
                "KS-OBS-1": "the stats' cursor is ahead of the events (a warning)",
            },
        ),
        Preset(
            "task-queue",
            "a task queue with one attempt counter (procrastinate, BullMQ's stalled jobs, RabbitMQ quorum queues "
            "before 4.3): a consumer leaving uses up a retry",
            "strict",
            "any",
            {"returns_as_failures": [True], "max_redeliveries": [0, 1, 2]},
            capabilities={
                # Its workers renew their leases (`extend`, KS-RTY-8), as BullMQ extends a job's lock.
                "ops": [op for op in OPS if op not in NOT_DANUBE],
                "filters": False,
                "poison_policies": ["dead-letter"],
            },
            differences=(
                "returns count as failures: a declared departure (at-least-once under restarts, spec section 21.1), "
                "judged by KS-RTY-6 with the returns counted",
            ),
        ),
        Preset(
            "pip-486",
            "PIP-486: scalable topic Key-Shared consumption",
            "owner",
            "buckets",
            {
                "bucket_assignment": ["sticky", "controller"],
                "checkpoint_resume": [True],
                "controller_moves": [True],
                "layout": ["reported"],
            },
            # no seek and no delayed delivery: neither is specified with buckets yet (spec sections 6 and 14)
            capabilities={"filters": False, "ops": [op for op in SEED_OPS if op not in ("seek", "publish_delayed")]},
            differences=(
                "the controller evens the load by unresolved messages once per tick, moving one drained bucket at a "
                "time; PIP-486 leaves its controller's policy (and its measure of load) to the implementation",
                "a split is made at the hash that halves the segment's unresolved messages (the midpoint when it has "
                "none) and a merged segment keeps the larger of its predecessors' bucket counts (layout reported); "
                "PIP-468's controller measures load as throughput",
            ),
        ),
    )
}
"""Every preset by name."""


class PresetAdapter(ReferenceAdapter):
    """The reference adapter narrowed to one preset."""

    def __init__(self, preset: Preset, durable: bool = True) -> None:
        super().__init__(durable)
        self.preset = preset
        self.dispatcher_class = preset.dispatcher

    def start(self) -> dict[str, Any]:
        """The reference's start, with the preset's capabilities and name."""
        started = super().start()
        implementation = {**started["implementation"], "name": f"keyshared-reference ({self.preset.name})"}
        return {**started, "implementation": implementation, "capabilities": self.preset.declared_capabilities()}


def pulsar_379() -> PresetAdapter:
    """The reference as PIP-379 describes Pulsar's Key_Shared."""
    return PresetAdapter(PRESETS["pulsar-379"])


def danube() -> PresetAdapter:
    """The reference as Danube's architecture page describes its Key-Shared dispatcher (eviction excepted)."""
    return PresetAdapter(PRESETS["danube"])


def danube_at_most_once() -> PresetAdapter:
    """Danube, its at-most-once eviction included: the kit must report KS-MEM-1, and nothing else."""
    return PresetAdapter(PRESETS["danube-at-most-once"])


def task_queue() -> PresetAdapter:
    """The reference as a task queue whose one attempt counter also counts a consumer leaving (a departure)."""
    return PresetAdapter(PRESETS["task-queue"])


def pip_486() -> PresetAdapter:
    """The reference as PIP-486 describes scalable-topic Key-Shared consumption."""
    return PresetAdapter(PRESETS["pip-486"])


def pulsar_out_of_order() -> PresetAdapter:
    """Pulsar's Key_Shared with allowOutOfOrderDelivery: key order given up, declared (a departure)."""
    return PresetAdapter(PRESETS["pulsar-out-of-order"])


def classic_pulsar() -> PresetAdapter:
    """Pulsar's Key_Shared before PIP-379 (PIP-282's recently joined consumers): the kit must find what PIP-379
    lists against it."""
    return PresetAdapter(PRESETS["classic-pulsar"])
