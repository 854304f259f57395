"""Seed-faithful presets: the reference configured to behave as each seed design describes (spec section 21).

A preset is not another code base: it is the reference adapter with its capabilities narrowed to the
configuration a seed uses (its profile, selector and options, declared as `config_values` so the
conformance kit draws nothing else), plus, where a preset reproduces a weakness the seed admits on purpose,
the one behaviour that differs. Each preset lists the findings the kit must report for it (`expected`):
none for behaviour the seed describes as correct, exactly the admitted weakness otherwise.

Run one with `keyshared conformance run --adapter py:ks_reference.presets:danube` (or `pulsar_379`,
`pip_486`, `danube_at_most_once`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ks_reference.adapter import CAPABILITIES, ReferenceAdapter
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
        """The reference's capabilities narrowed to this preset."""
        return {
            **CAPABILITIES,
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
                "ack_by_id": [True],  # Pulsar acknowledges by message id, whichever consumer sends it
            },
            capabilities={
                # A dropped connection is a leave in Pulsar: there is no disconnected-member state.
                "ops": [
                    op
                    for op in OPS
                    if op not in ("disconnect", "reconnect", "rollover", "split", "merge", "publish_entry")
                ],
                "filters": False,
                "poison_policies": ["dead-letter"],
            },
            differences=(
                "the look-ahead limit is checked before each message is read, where Pulsar checks it before reading a "
                "batch of entries that may overshoot it (KS-FLW-5)",
                "redelivery keeps key order (KS-ORD-3), where Pulsar's replay may break it",
            ),
        ),
        Preset(
            "danube",
            "Danube's Key-Shared dispatch architecture",
            "strict",
            "danube",
            {"tick_order": ["danube"], "evict_after": [1, 2, 6]},
            capabilities={"ops": [op for op in OPS if op not in ("rollover", "split", "merge", "publish_entry")]},
            differences=(
                "an evicted consumer's messages are delivered again (KS-MEM-1); the `danube_at_most_once` preset "
                "reproduces Danube's at-most-once eviction instead",
                "a message no member accepts is resolved as `filtered`, an event, where Danube acks it silently",
            ),
        ),
        Preset(
            "danube-at-most-once",
            "Danube's Key-Shared dispatch architecture, its eviction included",
            "strict",
            "danube",
            {"tick_order": ["danube"], "evict_after": [1, 2]},
            capabilities={"ops": [op for op in OPS if op not in ("rollover", "split", "merge", "publish_entry")]},
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
            "pip-486",
            "PIP-486: scalable topic Key-Shared consumption",
            "owner",
            "buckets",
            {"bucket_assignment": ["sticky", "controller"], "checkpoint_resume": [True]},
            capabilities={"filters": False},
            differences=(
                "the controller moves a bucket only when a consumer joins or leaves, where PIP-486's controller may "
                "also move a drained bucket between staying consumers (to even the load)",
                "the conformance kit chooses every split point and the merged segment's bucket count, where PIP-486 "
                "leaves both to the implementation",
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


def pip_486() -> PresetAdapter:
    """The reference as PIP-486 describes scalable-topic Key-Shared consumption."""
    return PresetAdapter(PRESETS["pip-486"])
