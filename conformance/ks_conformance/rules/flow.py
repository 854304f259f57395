"""The rules of spec section 8 Flow control."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

OVERTAKEN_HOLD = define(
    "overtaken-hold",
    "KS-FLW-3",
    Stage.EVENT,
    Scope.KEY,
    "as `key-reorder`, and the earlier message had been reported `held`",
    witness="the `held` event, publish of m, the delivery",
    exercised="a first delivery while an earlier message of its key has been held",
    needs=lambda a: need(
        a.held_events, "held events (capability held_events); a held message overtaken shows as key-reorder (KS-ORD-1)"
    ),
)

CAPACITY_OVERRUN = define(
    "capacity-overrun",
    "KS-FLW-1",
    Stage.EVENT,
    Scope.CONSUMER,
    (
        "a delivery that leaves its consumer holding more outstanding deliveries than its capacity "
        "(best-effort: delivered minus received)"
    ),
    witness="the `consumer_added`, the outstanding deliveries, the delivery",
    exercised="a delivery to a consumer at capacity minus one",
    needs=lambda a: (
        need(a.capacity, "capability capacity (capacity never binds)")
        or need("capacity" in a.forms("flow_control"), "flow_control capacity (the adapter declares only permits)")
    ),
)

PERMIT_OVERRUN = define(
    "permit-overrun",
    "KS-FLW-4",
    Stage.EVENT,
    Scope.CONSUMER,
    (
        'with `flow_control = "permits"`, a delivery to a consumer whose deliveries since it joined already '
        "equal its grants (its `capacity`, then every `permits_granted`)"
    ),
    witness="the `consumer_added`, the grants, the delivery",
    exercised="a delivery to a consumer with one permit left",
    needs=lambda a: (
        need("permits" in a.forms("flow_control"), "flow_control permits declared in config_values")
        or need("flow" in a.ops, "op flow (permits nobody can grant are not drawn)")
    ),
)

WINDOW_OVERRUN = define(
    "window-overrun",
    "KS-FLW-2",
    Stage.EVENT,
    Scope.SUBSCRIPTION,
    (
        "a first delivery of offset o while `window` or more offsets below o are unresolved (with "
        "`park_after` set: unresolved and not parked, KS-ISO-4)"
    ),
    witness="the delivery",
    exercised="a first delivery while at least `window - 1` earlier offsets are unresolved",
    needs=lambda a: (
        need(a.window, "capability window (no read-ahead window)")
        or need("window" in a.forms("read_bound"), "read_bound window (the adapter declares only lookahead)")
    ),
)
