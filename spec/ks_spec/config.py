"""Spec section 20 as data: every configuration field, its default and its domain, and what KS-CFG-1 refuses.

The checkers judge a trace's configuration with this module, so they never need an implementation's own
parser (the conformance kit must not import the reference: it would only ever agree with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ks_spec.slots import SLOT_SELECTORS

PROFILES = ("strict", "owner", "best-effort")
SELECTORS = (
    "ring", "pulsar-consistent", "pulsar-auto-split", "pulsar-sticky", "danube", "buckets", "partitions", "any"
)  # fmt: skip
POISON_POLICIES = ("drop", "dead-letter", "block")
DRAIN_GRANULARITIES = ("key", "hash")
TICK_ORDERS = ("standard", "danube")
FLOW_CONTROLS = ("capacity", "permits")
READ_BOUNDS = ("window", "lookahead")
BUCKET_ASSIGNMENTS = ("sorted", "sticky", "controller")
READ_TRIGGERS = ("every-op", "heartbeat")
PERSIST_TRIGGERS = ("tick", "advance")
LAYOUTS = ("imposed", "reported")


@dataclass(frozen=True)
class Field:
    """One configuration field of spec section 20."""

    name: str
    default: Any
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    boolean: bool = False
    only_selector: str = ""
    """The one selector the field applies to (KS-CFG-1 refuses it under another), or "" for every selector."""
    lookahead_only: bool = False


FIELDS: tuple[Field, ...] = (
    Field("profile", "strict", choices=PROFILES),
    Field("selector", "ring", choices=SELECTORS),
    Field("points", 100, minimum=1),
    Field("window", 10000, minimum=1),
    Field("ack_timeout", 0, minimum=0),
    Field("max_redeliveries", 5, minimum=0),
    Field("backoff_base", 1, minimum=0),
    Field("backoff_max", 60, minimum=0),
    Field("poison_policy", "block", choices=POISON_POLICIES),
    Field("evict_after", 6, minimum=0),
    Field("persist_interval", 0, minimum=0),
    Field("persist_ack_holes", False, boolean=True),
    Field("drain_granularity", "key", choices=DRAIN_GRANULARITIES),
    Field("tick_order", "standard", choices=TICK_ORDERS),
    Field("flow_control", "capacity", choices=FLOW_CONTROLS),
    Field("read_bound", "window", choices=READ_BOUNDS),
    Field("lookahead_per_consumer", 0, minimum=0, lookahead_only=True),
    Field("lookahead_per_subscription", 10000, minimum=0, lookahead_only=True),
    Field("park_after", 0, minimum=0),
    Field("returns_as_failures", False, boolean=True),
    Field("max_unacked", 0, minimum=0),
    Field("out_of_order", False, boolean=True),
    Field("read_trigger", "every-op", choices=READ_TRIGGERS),
    Field("timer_slack", 0, minimum=0),
    Field("ack_by_id", False, boolean=True),
    Field("persist_trigger", "tick", choices=PERSIST_TRIGGERS),
    Field("persist_flush", 0, minimum=0),
    Field("bucket_budget", 4, minimum=1, only_selector="buckets"),
    Field("bucket_max", 1024, minimum=1, only_selector="buckets"),
    Field("bucket_assignment", "sorted", choices=BUCKET_ASSIGNMENTS, only_selector="buckets"),
    Field("checkpoint_resume", False, boolean=True, only_selector="buckets"),
    Field("controller_moves", False, boolean=True, only_selector="buckets"),
    Field("layout", "imposed", choices=LAYOUTS, only_selector="buckets"),
    Field("partitions", 4, minimum=1, only_selector="partitions"),
)
BY_NAME = {field.name: field for field in FIELDS}
OUT_OF_ORDER_KINDS = ("key-reorder", "retry-overtaken", "overtaken-hold", "split-owner", "drain-stuck")
"""The checks of key order and draining that `out_of_order` gives up (Pulsar's allowOutOfOrderDelivery, spec
section 21.1): they do not apply to a configuration that declares it."""
CONFIG_DEFAULTS: dict[str, Any] = {field.name: field.default for field in FIELDS}
"""The value of every configuration field a configuration leaves out."""


def config_problem(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, why) if the spec refuses this configuration (KS-CFG-1), else None."""
    for name in config:
        if name not in BY_NAME:
            return name, f"unknown field (known: {', '.join(sorted(BY_NAME))})"
    for name, value in config.items():
        field = BY_NAME[name]
        if field.choices and value not in field.choices:
            return name, f"{value!r} is not one of {', '.join(field.choices)}"
        if field.boolean and not isinstance(value, bool):
            return name, f"must be true or false, got {value!r}"
        if field.minimum is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                return name, f"must be an integer, got {value!r}"
            if value < field.minimum:
                return name, f"must be >= {field.minimum}, got {value}"
    full = {**CONFIG_DEFAULTS, **config}
    if full["backoff_base"] > full["backoff_max"]:
        return "backoff_base", f"{full['backoff_base']} is above backoff_max {full['backoff_max']}"
    if full["drain_granularity"] == "hash" and full["selector"] not in SLOT_SELECTORS:
        return "drain_granularity", f"'hash' needs a selector with slots ({', '.join(SLOT_SELECTORS)})"
    if full["profile"] == "best-effort":
        for name, form in (("flow_control", "permits"), ("read_bound", "lookahead")):
            if full[name] == form:
                return name, f"'{form}' does not apply to the best-effort profile"
        if full["checkpoint_resume"]:
            return "checkpoint_resume", "does not apply to the best-effort profile (it has no cursor)"
        if full["park_after"] > 0:
            return "park_after", "parking does not apply to the best-effort profile (it has no read bound)"
        if full["returns_as_failures"]:
            return "returns_as_failures", "does not apply to the best-effort profile (nothing is delivered again)"
        if full["max_unacked"] > 0:
            return "max_unacked", "does not apply to the best-effort profile (nothing is acked)"
        if full["read_trigger"] != "every-op":
            return "read_trigger", "'heartbeat' does not apply to the best-effort profile (it has no read step)"
        if full["ack_by_id"]:
            return "ack_by_id", "does not apply to the best-effort profile (an ack resolves nothing)"
        if full["persist_trigger"] != "tick":
            return "persist_trigger", "'advance' does not apply to the best-effort profile (it has no cursor)"
    if full["persist_flush"] > 0 and full["persist_trigger"] != "advance":
        return "persist_flush", f"only applies to persist_trigger 'advance', not '{full['persist_trigger']}'"
    if full["read_bound"] != "lookahead":
        for field in FIELDS:
            if field.lookahead_only and field.name in config:
                return field.name, f"only applies to read_bound 'lookahead', not '{full['read_bound']}'"
    elif full["lookahead_per_consumer"] == 0 and full["lookahead_per_subscription"] == 0:
        return "lookahead_per_subscription", "both look-ahead limits are 0: nothing could ever be read"
    for field in FIELDS:
        if field.only_selector and field.only_selector != full["selector"] and field.name in config:
            return field.name, f"only applies to selector '{field.only_selector}', not '{full['selector']}'"
    if full["out_of_order"] and full["profile"] != "owner":
        return "out_of_order", f"only applies to the owner profile, not '{full['profile']}'"
    if full["controller_moves"] and full["bucket_assignment"] != "controller":
        return "controller_moves", f"needs bucket_assignment 'controller', not '{full['bucket_assignment']}'"
    if full["selector"] == "buckets" and full["bucket_budget"] > full["bucket_max"]:
        return "bucket_budget", f"{full['bucket_budget']} buckets exceed bucket_max {full['bucket_max']}"
    return None


def lookahead_limit(config: Mapping[str, Any], members: int) -> int:
    """L of spec section 8: `lookahead_per_consumer` times the members, lowered to `lookahead_per_subscription`."""
    full = {**CONFIG_DEFAULTS, **config}
    per_consumer, per_subscription = int(full["lookahead_per_consumer"]), int(full["lookahead_per_subscription"])
    if per_consumer == 0:
        return per_subscription
    limit = per_consumer * members
    return min(limit, per_subscription) if per_subscription > 0 else limit
