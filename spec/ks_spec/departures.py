"""Spec section 21.1 as data: the declared options that weaken a guarantee of strict Key-Shared, in user words.

A system that declares one of these is judged by the option's own rule (so the choice is never a failure), and the
report lists it on a *departures sheet*: what a user gives up, and which requirement no longer promises it. The
conformance kit and `check-trace` read this table; the spec's section 21.1 is tested against it row by row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS

GUARANTEES = ("ordering", "exclusivity", "at-least-once", "isolation", "key affinity", "liveness", "timeliness")
"""The guarantees a departure names, in the words a user of a queue would use."""


@dataclass(frozen=True)
class Departure:
    """One option value (or range of values) that weakens a guarantee, and what it weakens."""

    option: str
    """The configuration field (section 20) that carries the choice."""
    label: str
    """The choice as a user declares it, e.g. `drain_granularity = hash`."""
    guarantee: str
    """One of GUARANTEES: what a user gives up."""
    rule: str
    """The requirement that says what a system making this choice must still do."""
    relaxes: tuple[str, ...]
    """The requirements of strict Key-Shared that no longer promise the guarantee (may be empty when the spec itself
    allows the choice, e.g. a poison policy that drops)."""
    text: str
    """One plain sentence: what happens to a user's messages."""
    takes: Callable[[Any], bool]
    """Whether a value of `option` is this choice."""


def _equals(expected: Any) -> Callable[[Any], bool]:
    return lambda value: bool(value == expected)


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


DEPARTURES: tuple[Departure, ...] = (
    Departure(
        "profile", "profile = owner", "ordering", "KS-ORD-4", ("KS-ORD-2",),
        "A key's later messages may be delivered while an earlier one is still unacknowledged (prefetch), so their "
        "processing overlaps and a failed earlier message is redelivered after later ones may have finished.",
        _equals("owner"),
    ),
    Departure(
        "profile", "profile = best-effort", "at-least-once", "KS-BEF-1", ("KS-RES-1", "KS-MEM-1", "KS-RTY-1"),
        "A message is delivered at most once: when its consumer leaves or fails it, it is dropped (counted and "
        "visible), never delivered again.",
        _equals("best-effort"),
    ),
    Departure(
        "ack_by_id", "ack_by_id = true", "exclusivity", "KS-ACK-3", ("KS-ACK-3",),
        "An ack names the message, not the delivery: a consumer whose delivery already timed out or was taken away "
        "can still mark the message done, even while another consumer is retrying it, so a failure of that retry is "
        "lost.",
        _equals(True),
    ),
    Departure(
        "out_of_order", "out_of_order = true", "ordering", "KS-ASN-1", ("KS-ORD-1", "KS-ORD-3", "KS-DRN-1", "KS-FLW-3"),
        "A key still goes to one consumer at a time in each membership, but across a rebalance or a redelivery two "
        "consumers may hold it at once and its messages may be processed out of order (Pulsar's "
        "allowOutOfOrderDelivery).",
        _equals(True),
    ),
    Departure(
        "selector", "selector = any", "key affinity", "KS-ASN-10", ("KS-ASN-1",),
        "A key has no fixed consumer: once its previous message is resolved, its next one may go to any consumer "
        "with room (order still holds).",
        _equals("any"),
    ),
    Departure(
        "selector", "selector = partitions", "isolation", "KS-ASN-11", ("KS-ISO-1",),
        "Keys that hash to one partition share one consumer and one queue: a slow or stuck key delays the other "
        "keys of its partition.",
        _equals("partitions"),
    ),
    Departure(
        "drain_granularity", "drain_granularity = hash", "isolation", "KS-DRN-3", ("KS-ISO-1",),
        "After a reassignment, a key may wait for an unrelated key whose hash shares its slot to drain.",
        _equals("hash"),
    ),
    Departure(
        "read_trigger", "read_trigger = heartbeat", "timeliness", "KS-GEN-8", ("KS-GEN-6", "KS-ISO-1"),
        "A message that an ack makes room for is read and delivered at the next heartbeat rather than at once; "
        "messages already read still go out immediately.",
        _equals("heartbeat"),
    ),
    Departure(
        "max_unacked", "max_unacked > 0", "timeliness", "KS-FLW-1", ("KS-ISO-1",),
        "A consumer that reaches max_unacked unacknowledged messages gets nothing more until half of them are "
        "acked, although it may have room: its keys wait meanwhile.",
        _positive,
    ),
    Departure(
        "timer_slack",
        "timer_slack > 0",
        "timeliness",
        "KS-GEN-9",
        ("KS-RTY-3", "KS-RTY-4", "KS-MEM-2", "KS-CUR-5", "KS-ORD-7"),
        "Timeouts, retries, evictions, cursor writes and delayed messages falling due may come up to timer_slack "
        "ticks late, never early: a hung or vanished consumer keeps its keys, and a crash may replay work, that much "
        "longer.",
        _positive,
    ),
    Departure(
        "poison_policy", "poison_policy = drop", "at-least-once", "KS-POI-1", (),
        "A message that failed more than max_redeliveries times is discarded: nobody processed it and nothing "
        "keeps it for inspection.",
        _equals("drop"),
    ),
    Departure(
        "controller_moves", "controller_moves = true", "key affinity", "KS-BKT-3", ("KS-ASN-1",),
        "The controller moves drained buckets between staying consumers to even the load: a key may change consumer "
        "with nobody joining or leaving (its order holds: the bucket drains first).",
        _equals(True),
    ),
    Departure(
        "persist_trigger", "persist_trigger = advance", "timeliness", "KS-CUR-12", ("KS-CUR-5", "KS-LIV-2"),
        "The cursor is written only when an ack moves it and the interval has passed since the last write: a crash "
        "replays the acks since then, and without a periodic flush (persist_flush) the last acks before traffic "
        "stops may never be written.",
        _equals("advance"),
    ),
    Departure(
        "returns_as_failures", "returns_as_failures = true", "at-least-once", "KS-RTY-6", ("KS-RTY-7",),
        "A delivery that ends because its consumer left or was evicted uses up one of the message's retries, so "
        "deploys and crashed workers alone can poison a healthy message.",
        _equals(True),
    ),
)  # fmt: skip
"""Every departure, in the order of the sheet."""

OPTIONS = tuple(dict.fromkeys(departure.option for departure in DEPARTURES))
"""The configuration fields that can carry a departure."""


def departures_of(config: Mapping[str, Any]) -> list[Departure]:
    """The departures one configuration takes (fields it leaves out are at their defaults: strict Key-Shared)."""
    full = {**CONFIG_DEFAULTS, **config}
    return [d for d in DEPARTURES if d.option in full and d.takes(full[d.option])]


def declarable(capabilities: Mapping[str, Any]) -> list[Departure]:
    """The departures an adapter's capabilities (adapter protocol section 4) declare it may take."""
    listed: dict[str, Iterable[Any]] = {
        "profile": capabilities.get("profiles", ()),
        "selector": capabilities.get("selectors", ()),
        "poison_policy": capabilities.get("poison_policies", ()),
    }
    values = capabilities.get("config_values", {})
    declared = []
    for departure in DEPARTURES:
        candidates = listed.get(departure.option, values.get(departure.option, ()) if isinstance(values, dict) else ())
        if any(departure.takes(value) for value in candidates):
            declared.append(departure)
    return declared


def departure_line(departure: Departure, declared: bool | None, in_effect: int) -> dict[str, Any]:
    """A report's `departure` line (spec/report-format.md section 1)."""
    line: dict[str, Any] = {
        "type": "departure",
        "option": departure.option,
        "choice": departure.label,
        "guarantee": departure.guarantee,
        "rule": departure.rule,
        "relaxes": list(departure.relaxes),
        "text": departure.text,
        "in_effect": in_effect,
    }
    if declared is not None:
        line["declared"] = declared
    return line
