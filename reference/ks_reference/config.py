"""The subscription configuration (spec section 20), validated at construction (KS-CFG-1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ks_spec.errors import UserError

PROFILES = ("strict", "owner", "best-effort")
SELECTORS = (
    "ring", "pulsar-consistent", "pulsar-auto-split", "pulsar-sticky", "danube", "buckets", "partitions", "any"
)  # fmt: skip
POISON_POLICIES = ("drop", "dead-letter", "block")
BUCKET_FIELDS = (
    "bucket_budget", "bucket_max", "bucket_assignment", "checkpoint_resume", "controller_moves", "layout"
)  # fmt: skip
BUCKET_ASSIGNMENTS = ("sorted", "sticky", "controller")
DRAIN_GRANULARITIES = ("key", "hash")
TICK_ORDERS = ("standard", "danube")
FLOW_CONTROLS = ("capacity", "permits")
READ_BOUNDS = ("window", "lookahead")
READ_TRIGGERS = ("every-op", "heartbeat")
PERSIST_TRIGGERS = ("tick", "advance")
LAYOUTS = ("imposed", "reported")
LOOKAHEAD_FIELDS = ("lookahead_per_consumer", "lookahead_per_subscription")
SLOT_SELECTORS = ("pulsar-consistent", "pulsar-auto-split", "pulsar-sticky")


class ConfigError(UserError):
    """A configuration the spec refuses (`invalid_config`), naming the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"config field '{field}': {message}")
        self.field = field


OPTIONS_RECORDED_WHEN_SET: dict[str, Any] = {
    "read_trigger": "every-op",
    "timer_slack": 0,
    "returns_as_failures": False,
    "controller_moves": False,
    "max_unacked": 0,
    "out_of_order": False,
    "ack_by_id": False,
    "persist_trigger": "tick",
    "persist_flush": 0,
    "layout": "imposed",
}
"""Options added after spec 1.6 (spec section 21.1), recorded in a trace's config event only when not at their
default, so that every earlier trace of the reference replays byte for byte."""


@dataclass(frozen=True)
class Config:
    """A valid configuration; build it with `Config.parse` so that every field is checked."""

    profile: str = "strict"
    selector: str = "ring"
    points: int = 100
    window: int = 10000
    ack_timeout: int = 0
    max_redeliveries: int = 5
    backoff_base: int = 1
    backoff_max: int = 60
    poison_policy: str = "block"
    evict_after: int = 6
    persist_interval: int = 0
    persist_ack_holes: bool = False
    drain_granularity: str = "key"
    tick_order: str = "standard"
    flow_control: str = "capacity"
    read_bound: str = "window"
    lookahead_per_consumer: int = 0
    lookahead_per_subscription: int = 10000
    park_after: int = 0
    returns_as_failures: bool = False
    max_unacked: int = 0
    out_of_order: bool = False
    read_trigger: str = "every-op"
    timer_slack: int = 0
    ack_by_id: bool = False
    persist_trigger: str = "tick"
    persist_flush: int = 0
    bucket_budget: int = 4
    bucket_max: int = 1024
    bucket_assignment: str = "sorted"
    checkpoint_resume: bool = False
    controller_moves: bool = False
    layout: str = "imposed"
    """`imposed`: split points and merged N follow spec section 17; `reported`: the dispatcher chooses them
    (KS-BKT-11)."""
    partitions: int = 4

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None = None) -> Config:
        """Check a JSON configuration object and fill in the defaults; raise ConfigError naming the field."""
        raw = dict(raw or {})
        known = set(cls.__dataclass_fields__)
        for field in raw:
            if field not in known:
                # req: KS-CFG-1
                raise ConfigError(field, f"unknown field (known: {', '.join(sorted(known))})")
        _choice(raw, "profile", PROFILES)  # req: KS-GEN-1 (one declared profile per subscription)
        _choice(raw, "selector", SELECTORS)
        _choice(raw, "poison_policy", POISON_POLICIES)
        _choice(raw, "drain_granularity", DRAIN_GRANULARITIES)
        _choice(raw, "tick_order", TICK_ORDERS)
        _choice(raw, "flow_control", FLOW_CONTROLS)
        _choice(raw, "read_bound", READ_BOUNDS)
        _choice(raw, "read_trigger", READ_TRIGGERS)
        _choice(raw, "persist_trigger", PERSIST_TRIGGERS)
        _choice(raw, "bucket_assignment", BUCKET_ASSIGNMENTS)
        _choice(raw, "layout", LAYOUTS)
        for field in ("points", "window", "bucket_budget", "bucket_max", "partitions"):
            _integer(raw, field, minimum=1)
        for field in ("ack_timeout", "max_redeliveries", "backoff_base", "backoff_max", "evict_after"):
            _integer(raw, field, minimum=0)
        _integer(raw, "persist_interval", minimum=0)
        _integer(raw, "park_after", minimum=0)
        _integer(raw, "timer_slack", minimum=0)
        _integer(raw, "max_unacked", minimum=0)
        _integer(raw, "persist_flush", minimum=0)
        for field in LOOKAHEAD_FIELDS:
            _integer(raw, field, minimum=0)
        for field in (
            "persist_ack_holes",
            "checkpoint_resume",
            "returns_as_failures",
            "controller_moves",
            "out_of_order",
            "ack_by_id",
        ):
            if field in raw and not isinstance(raw[field], bool):
                raise ConfigError(field, f"must be true or false, got {raw[field]!r}")
        config = cls(**raw)
        if config.backoff_base > config.backoff_max:
            # req: KS-CFG-1
            raise ConfigError("backoff_base", f"{config.backoff_base} is above backoff_max {config.backoff_max}")
        if config.drain_granularity == "hash" and config.selector not in SLOT_SELECTORS:
            # req: KS-CFG-1, KS-DRN-3 (hash-granularity draining needs a selector with slots)
            raise ConfigError("drain_granularity", f"'hash' needs a selector with slots ({', '.join(SLOT_SELECTORS)})")
        if not config.reliable:
            for field, form in (("flow_control", "permits"), ("read_bound", "lookahead")):
                if getattr(config, field) == form:
                    # req: KS-CFG-1 (Pulsar's forms apply to the reliable profiles only)
                    raise ConfigError(field, f"'{form}' does not apply to the best-effort profile")
            if config.checkpoint_resume:
                # req: KS-CFG-1 (best-effort has no cursor and nothing to resume)
                raise ConfigError("checkpoint_resume", "does not apply to the best-effort profile (it has no cursor)")
            if config.park_after > 0:
                # req: KS-CFG-1 (parking changes the read bound, which best-effort does not have)
                raise ConfigError(
                    "park_after", "parking does not apply to the best-effort profile (it has no read bound)"
                )
            if config.returns_as_failures:
                # req: KS-CFG-1 (best-effort delivers nothing again, so a return has no retry to use up)
                raise ConfigError(
                    "returns_as_failures", "does not apply to the best-effort profile (nothing is delivered again)"
                )
            if config.max_unacked > 0:
                # req: KS-CFG-1 (best-effort has no acks to count)
                raise ConfigError("max_unacked", "does not apply to the best-effort profile (nothing is acked)")
            if config.read_trigger != "every-op":
                # req: KS-CFG-1, KS-GEN-8 (best-effort dispatches each message as it is published: no read step)
                raise ConfigError(
                    "read_trigger", "'heartbeat' does not apply to the best-effort profile (it has no read step)"
                )
            if config.ack_by_id:
                # req: KS-CFG-1 (an ack resolves nothing in best-effort)
                raise ConfigError("ack_by_id", "does not apply to the best-effort profile (an ack resolves nothing)")
            if config.persist_trigger != "tick":
                # req: KS-CFG-1 (best-effort persists no cursor)
                raise ConfigError(
                    "persist_trigger", "'advance' does not apply to the best-effort profile (it has no cursor)"
                )
        if config.persist_flush > 0 and config.persist_trigger != "advance":
            # req: KS-CFG-1, KS-CUR-12 (the periodic flush backs up persistence on an advance only)
            raise ConfigError(
                "persist_flush", f"only applies to persist_trigger 'advance', not '{config.persist_trigger}'"
            )
        if config.out_of_order and config.profile != "owner":
            # req: KS-CFG-1 (giving up key order needs a profile that delivers several messages of a key at once)
            raise ConfigError("out_of_order", f"only applies to the owner profile, not '{config.profile}'")
        if config.read_bound != "lookahead":
            for field in LOOKAHEAD_FIELDS:
                if field in raw:
                    # req: KS-CFG-1
                    raise ConfigError(field, f"only applies to read_bound 'lookahead', not '{config.read_bound}'")
        elif config.lookahead_per_consumer == 0 and config.lookahead_per_subscription == 0:
            # req: KS-CFG-1 (a look-ahead of nothing never reads)
            raise ConfigError("lookahead_per_subscription", "both look-ahead limits are 0: nothing could ever be read")
        if config.selector != "partitions" and "partitions" in raw:
            # req: KS-CFG-1
            raise ConfigError("partitions", f"only applies to selector 'partitions', not '{config.selector}'")
        if config.selector != "buckets":
            for field in BUCKET_FIELDS:
                if field in raw:
                    # req: KS-CFG-1
                    raise ConfigError(field, f"only applies to selector 'buckets', not '{config.selector}'")
        elif config.controller_moves and config.bucket_assignment != "controller":
            # req: KS-CFG-1 (only the controller policy moves buckets on its own, KS-BKT-3)
            raise ConfigError(
                "controller_moves", f"needs bucket_assignment 'controller', not '{config.bucket_assignment}'"
            )
        elif config.bucket_budget > config.bucket_max:
            raise ConfigError(
                "bucket_budget", f"{config.bucket_budget} buckets exceed bucket_max {config.bucket_max} (KS-BKT-2)"
            )
        return config

    def as_dict(self) -> dict[str, Any]:
        """Every field with its value, defaults included (what the trace's `config` event records)."""
        values = asdict(self)
        if self.selector != "buckets":
            for field in BUCKET_FIELDS:
                values.pop(field)
        if self.selector != "partitions":
            values.pop("partitions")
        if self.read_bound != "lookahead":
            for field in LOOKAHEAD_FIELDS:
                values.pop(field)
        for field, default in OPTIONS_RECORDED_WHEN_SET.items():
            if values.get(field, default) == default:
                values.pop(field, None)  # the reader takes the default: traces of earlier versions stay the same
        return values

    def lookahead_limit(self, members: int) -> int:
        """L of spec section 8: per member times the members, lowered to the subscription's limit when set."""
        per_consumer, per_subscription = self.lookahead_per_consumer, self.lookahead_per_subscription
        if per_consumer == 0:
            return per_subscription
        limit = per_consumer * members
        return min(limit, per_subscription) if per_subscription > 0 else limit

    def heartbeat(self, now: int) -> bool:
        """True when tick `now` fires the timers: with `timer_slack = s`, every (s + 1)-th tick, so a timer due at
        tick t fires at a tick in [t, t + s] (KS-GEN-9); every tick when s is 0."""
        return now % (self.timer_slack + 1) == 0

    @property
    def reliable(self) -> bool:
        """True for the strict and owner profiles; False for best-effort (spec section 18)."""
        return self.profile != "best-effort"


def _choice(raw: Mapping[str, Any], field: str, allowed: tuple[str, ...]) -> None:
    if field in raw and raw[field] not in allowed:
        # req: KS-CFG-1
        raise ConfigError(field, f"{raw[field]!r} is not one of {', '.join(allowed)}")


def _integer(raw: Mapping[str, Any], field: str, minimum: int) -> None:
    if field not in raw:
        return
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer, got {value!r}")
    if value < minimum:
        # req: KS-CFG-1
        raise ConfigError(field, f"must be >= {minimum}, got {value}")
