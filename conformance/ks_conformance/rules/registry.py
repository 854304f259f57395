"""What a rule is: one anomaly kind of spec/checking.md with everything the kit knows about it in one place.

A rule names the anomaly, the one requirement it violates, when it is judged (stage), the situation it judges
(scope), the three columns of checking.md's tables, and when a conformance run can exercise it at all (`needs`,
from the capabilities an adapter declares). Standard library and ks_spec only: Spark and the reports import it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from functools import cache, cached_property
from typing import Any


class Stage(Enum):
    """When a checker judges an anomaly (the subsections of spec/checking.md section 2)."""

    EVENT = "event"
    """2.1: at the event that shows it."""
    OP = "op"
    """2.2: at the end of an op (or at a phase boundary inside a tick)."""
    QUIESCENT = "quiescent"
    """2.3: at a `quiescent` event."""
    HARNESS = "harness"
    """2.4: by the conformance harness, from what the adapter answered; not from a trace."""


class Scope(StrEnum):
    """The situation a rule judges: what must be known, besides membership, time and layout, to judge it."""

    KEY = "key"
    """The messages of one key (a message's own history included)."""
    CONSUMER = "consumer"
    """One consumer's deliveries across keys, or its membership (capacity, permits, eviction)."""
    SUBSCRIPTION = "subscription"
    """The whole subscription: the window, the cursor, a tick's phases, a bucket's or slot's several keys."""


Needs = Callable[["Abilities"], "str | None"]
"""Why a rule cannot be exercised against an adapter's declared abilities, or None if it can."""


def need(condition: bool, what: str) -> str | None:
    """None when `condition` holds, else `what` (the missing ability, as a skip reason words it)."""
    return None if condition else what


def always(_: Abilities) -> str | None:
    """A rule any adapter can exercise."""
    return None


@dataclass(frozen=True)
class Rule:
    """One anomaly kind: a row of spec/checking.md's tables and when a run can exercise it."""

    name: str
    requirement: str
    stage: Stage
    scope: Scope
    condition: str
    """When a checker reports it (checking.md's third column)."""
    witness: str = ""
    """The events that make its witness (trace rules only)."""
    exercised: str = ""
    """The situation that counts as exercising it, whether or not the anomaly occurs (trace rules only)."""
    needs: Needs = always
    module: str = field(default="", compare=False)
    """The module that defines it (set by `define`)."""

    @property
    def level(self) -> str:
        """MUST or SHOULD: the level of its requirement in spec/requirements.json."""
        return _levels()[self.requirement]


@cache
def _levels() -> dict[str, str]:
    """Requirement ID -> MUST, SHOULD or MAY, from the generated index."""
    from ks_spec.requirements import load_index

    return {str(entry["id"]): str(entry["level"]) for entry in load_index()}


NO_TIMERS = "behaviour driven by ticks (the implementation declares timers: false)"
NO_REDELIVERY = "a source of redelivery: nack, ack_timeout, remove_consumer, disconnect with eviction, or restart"
NO_DELAY = "op publish_delayed, a reliable profile and a selector other than buckets"
NO_SEEK = "op seek and a selector other than buckets"
NO_ENDING = "a delivery that ends without a result: ack_timeout, remove_consumer, or disconnect with eviction"
NO_CURSOR = "a persisted cursor (capability cursor)"


@dataclass(frozen=True)
class Abilities:
    """What the kit may draw against one adapter: its declared capabilities less the ops it skipped and the
    values it refused. Rules' `needs` read it; the conformance kit builds it (ks_conformance.statuses)."""

    ops: frozenset[str]
    selectors: frozenset[str]
    policies: frozenset[str]
    profiles: tuple[str, ...]
    declared: Mapping[str, Sequence[Any]]
    """The adapter's `config_values`: the only values it supports of each listed field."""
    usable: Callable[[str], list[Any]]
    """The values of a timing field the kit may still draw."""
    forms: Callable[[str], list[Any]]
    """The values of an option the kit may draw: the declared ones (else the default alone) less refused ones."""
    refused: Mapping[str, Sequence[Any]]
    filters: bool
    filter_selectors_refused: tuple[str, ...]
    ack_timeout: bool
    timers: bool
    cursor: bool
    capacity: bool
    window: bool
    stats: bool
    held_events: bool
    deterministic: bool
    key_batches: bool
    """`publish_entry` takes key-based batches outside selector buckets (PIP-34)."""

    def positive(self, field_name: str) -> bool:
        """True if the kit may draw a value above 0 for a timing field (declared, and not refused)."""
        return any(v > 0 for v in self.usable(field_name))

    def supported(self, field_name: str) -> str:
        """The skip reason for a timing field no value above 0 of which can be drawn."""
        if not self.timers:
            return NO_TIMERS
        values = self.usable(field_name)
        gone = sorted(set(self.refused.get(field_name, ())))
        said = f"; refused {gone}" if gone else ""
        return f"{field_name} > 0 (the adapter supports {values or 'none of the values drawn'}{said})"

    def above_zero(self, field_name: str) -> str | None:
        """Why the kit cannot draw a timing field above 0, or None."""
        return need(self.positive(field_name), self.supported(field_name))

    def timeouts_drawn(self) -> str | None:
        """Why no delivery can time out (the capability, ticks, an ack_timeout above 0), or None."""
        return need(self.ack_timeout and "tick" in self.ops, "capability ack_timeout") or self.above_zero("ack_timeout")

    @cached_property
    def failures(self) -> bool:
        """A delivery can fail: a nack, or an ack timeout."""
        return "nack" in self.ops or self.ack_timeout

    @cached_property
    def timeouts(self) -> bool:
        """A delivery can time out."""
        return self.ack_timeout and "tick" in self.ops and self.positive("ack_timeout")

    @cached_property
    def evictions(self) -> bool:
        """A disconnected member can be evicted."""
        return "disconnect" in self.ops and "tick" in self.ops and self.positive("evict_after")

    @cached_property
    def redelivery(self) -> bool:
        """Something can deliver a message again (KS-RES-2, KS-RTY-5): a failure, a leave, an eviction or a
        restart."""
        return (
            "nack" in self.ops
            or self.timeouts
            or "remove_consumer" in self.ops
            or self.evictions
            or "restart" in self.ops
        )

    @cached_property
    def ended(self) -> bool:
        """A delivery can end without a result, so that a zombie op has something to answer (KS-ACK-3)."""
        return self.timeouts or "remove_consumer" in self.ops or self.evictions

    @cached_property
    def two_phases(self) -> bool:
        """One tick can have effects of two phases (KS-GEN-7): a timeout (phase 1, its poisoning 2, a redelivery
        5), an eviction (phase 4, then the returned messages' delivery 5), or a retry made ready by the tick (5)
        with a cursor persisted at an interval (6)."""
        return (
            (self.ack_timeout and self.positive("ack_timeout"))
            or ("disconnect" in self.ops and self.positive("evict_after"))
            or (self.failures and self.positive("backoff_base") and self.cursor and self.positive("persist_interval"))
        )

    @cached_property
    def delaying(self) -> bool:
        """Delays are specified for the reliable profiles without buckets (spec section 6)."""
        return (
            "publish_delayed" in self.ops
            and "tick" in self.ops
            and bool(self.selectors - {"buckets"})
            and bool(set(self.profiles) - {"best-effort"})
        )

    @cached_property
    def seeking(self) -> bool:
        """A seek is drawn under a selector other than buckets (spec section 14)."""
        return "seek" in self.ops and bool(self.selectors - {"buckets"})

    @cached_property
    def fixed_target(self) -> bool:
        """Some selector gives a key a fixed target (not pulsar-sticky's or buckets' moving ones)."""
        return bool(self.selectors - {"pulsar-sticky", "buckets"})

    @cached_property
    def filtering(self) -> bool:
        """Filters are drawn only under a selector that takes them (the others refuse them, spec section 5)."""
        return self.filters and bool(self.selectors - set(self.filter_selectors_refused))

    @property
    def no_filters(self) -> str:
        """The skip reason of a filter rule."""
        return f"capability filters and a selector that takes them (not {', '.join(self.filter_selectors_refused)})"


_DEFINED: list[Rule] = []
_BY_NAME: dict[str, Rule] = {}


def define(
    name: str,
    requirement: str,
    stage: Stage,
    scope: Scope,
    condition: str,
    *,
    witness: str = "",
    exercised: str = "",
    needs: Needs = always,
) -> Rule:
    """Register one rule (a module of this package calls it once per anomaly kind, in the order of its tables)."""
    module = str(sys._getframe(1).f_globals["__name__"]).rsplit(".", 1)[-1]
    if name in _BY_NAME:
        raise ValueError(f"rule {name!r} is defined twice")
    rule = Rule(name, requirement, stage, scope, condition, witness, exercised, needs, module)
    _DEFINED.append(rule)
    _BY_NAME[name] = rule
    return rule


def rule_named(name: str) -> Rule:
    """The rule of an anomaly name (KeyError names the unknown anomaly); for modules the sections' checks import."""
    return _BY_NAME[name]


def defined() -> tuple[Rule, ...]:
    """Every rule defined so far, by module name, then in definition order within its module (so that the order
    does not depend on which section's checks import which)."""
    position = {id(rule): index for index, rule in enumerate(_DEFINED)}
    return tuple(sorted(_DEFINED, key=lambda rule: (rule.module, position[id(rule)])))
