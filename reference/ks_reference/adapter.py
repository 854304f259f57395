"""The in-process adapter (spec/adapter-protocol.md v1): the reference as the conformance kit drives it.

`create()` returns an adapter object with `start`, `reset`, `op`, `stats`, `replay` and `stop`,
taking and returning the protocol's JSON-compatible dicts (without `cmd` and `seq`). Each
`reset` gives a fresh subscription over a fresh temporary SQLite store, removed on the next
reset or at `stop`. The kit's `serve_stdio` serves it over stdio.
"""

from __future__ import annotations

import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ks_reference.config import (
    BUCKET_ASSIGNMENTS,
    DRAIN_GRANULARITIES,
    FLOW_CONTROLS,
    LAYOUTS,
    POISON_POLICIES,
    PROFILES,
    READ_BOUNDS,
    READ_TRIGGERS,
    SELECTORS,
    TICK_ORDERS,
    Config,
    ConfigError,
)
from ks_reference.core import Refusal
from ks_reference.dispatcher import IMPLEMENTATION, OPS, Dispatcher
from ks_reference.store import MemoryStore, SqliteStore, Store

PROTOCOL_VERSION = 2

CAPABILITIES: dict[str, Any] = {
    "profiles": list(PROFILES),
    "selectors": list(SELECTORS),
    "ops": list(OPS),
    "filters": True,
    "ack_timeout": True,
    "poison_policies": list(POISON_POLICIES),
    "persist_ack_holes": True,
    "held_events": True,
    "stats": True,
    "batch": True,
    "deterministic": True,
    "shared_names": True,
    "key_batches": True,
    # The options the kit draws only when declared (spec section 20): the reference has every value.
    "config_values": {
        "drain_granularity": list(DRAIN_GRANULARITIES),
        "tick_order": list(TICK_ORDERS),
        "bucket_assignment": list(BUCKET_ASSIGNMENTS),
        "checkpoint_resume": [False, True],
        "flow_control": list(FLOW_CONTROLS),
        "read_bound": list(READ_BOUNDS),
        "lookahead_per_consumer": [1, 2, 0],
        "lookahead_per_subscription": [3, 6, 0],
        "park_after": [0, 1, 2],
        "read_trigger": list(READ_TRIGGERS),
        "timer_slack": [0, 1, 2],
        "ack_by_id": [False, True],
        "persist_trigger": ["tick", "advance"],
        "persist_flush": [0, 2, 3],
        "layout": list(LAYOUTS),
    },
}


class ReferenceAdapter:
    """The reference dispatcher behind the adapter protocol's in-process methods.

    `dispatcher_class` is the one plug point: a subclass may name a variant of `Dispatcher` (the
    kit's own tests serve deliberately broken ones this way) and everything else stays the same.
    """

    dispatcher_class: type[Dispatcher] = Dispatcher

    def __init__(self, durable: bool = True) -> None:
        self.durable = durable
        self._dispatcher: Dispatcher | None = None
        self._store: Store | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> dict[str, Any]:
        """The protocol version, who we are, and everything the reference supports."""
        return {"version": PROTOCOL_VERSION, "implementation": dict(IMPLEMENTATION), "capabilities": CAPABILITIES}

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh subscription with this configuration, or `invalid_config` naming the field (KS-CFG-1)."""
        try:
            if not isinstance(config, Mapping):
                raise ConfigError("(config)", f"must be a JSON object, got {type(config).__name__}")
            parsed = Config.parse(config)
        except ConfigError as error:
            # req: KS-CFG-1
            return {"ok": False, "error": {"code": "invalid_config", "message": str(error), "field": error.field}}
        self._close()
        if self.durable:
            self._folder = tempfile.TemporaryDirectory(prefix="ks-reference-")
            self._store = SqliteStore(Path(self._folder.name) / "store.sqlite", parsed.as_dict())
        else:
            self._store = MemoryStore()
        self._dispatcher = self.dispatcher_class(parsed, self._store)
        return {"ok": True, "events": []}

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one op: its effect events, a refusal, or `errored` with the traceback."""
        if self._dispatcher is None:
            return _errored("op before reset: no subscription exists yet")
        try:
            outcome = self._dispatcher.apply(op)
        except Refusal as refusal:
            return {"ok": False, "error": {"code": refusal.code, "message": refusal.message}}
        except Exception as error:  # an implementation failure: the kit reports the run as unknown
            return _errored(f"{type(error).__name__}: {error}", traceback.format_exc())
        response: dict[str, Any] = {"ok": True, "events": outcome.events}
        if outcome.placement is not None:
            response["placement"] = outcome.placement.as_dict()
        if outcome.placements is not None:
            response["placements"] = [placement.as_dict() for placement in outcome.placements]
        if outcome.segments is not None:
            response["segments"] = outcome.segments
        return response

    def stats(self) -> dict[str, Any]:
        """The stats of spec section 16."""
        if self._dispatcher is None:
            return _errored("stats before reset: no subscription exists yet")
        return {"ok": True, "stats": self._dispatcher.stats()}

    def replay(self, config: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Reset with `config`, then perform every op; one response per op (the `batch` capability)."""
        reset = self.reset(config)
        if not reset.get("ok"):
            return reset
        return {"ok": True, "results": [self.op(op) for op in ops]}

    def stop(self) -> None:
        """Release the store and its temporary folder."""
        self._close()

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._folder is not None:
            self._folder.cleanup()
        self._dispatcher = self._store = self._folder = None


def _errored(message: str, trace: str = "") -> dict[str, Any]:
    return {"errored": True, "context": {"message": message, "traceback": trace}}


def create() -> ReferenceAdapter:
    """The zero-argument factory the conformance kit calls: the reference with a durable SQLite store."""
    return ReferenceAdapter()
