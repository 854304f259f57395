"""The Spark dispatcher behind the adapter protocol (spec/adapter-protocol.md), as a batch engine.

`create()` is the zero-argument factory the conformance kit calls (`--adapter spark`). The dispatcher
answers `replay` (a whole run as Spark jobs) and declares `interactive: false`, so the kit drives it a
chunk of ops at a time; `op` also works, by replaying the run so far (slow, but `smoke` and scenario
replays need nothing more). It declares exactly what it does: the strict and owner profiles, the
selectors with a per-key target, no nack, ack timeouts or poison policies, and `flow_control: false`
(it is equivalent to the reference only where capacity and the window never bind).

The Spark master comes from `KEYSHARED_SPARK_MASTER` (default: an embedded `local[*]`), or from
spark-submit when run under it.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from ks_reference.config import Config, ConfigError

from ks_spark.dispatcher.engine import OPS, SELECTORS, EraRunner, Persister, replay, run_keys_locally

PROTOCOL_VERSION = 1
MASTER_ENV = "KEYSHARED_SPARK_MASTER"
IMPLEMENTATION = {"name": "keyshared-spark-dispatcher", "version": "0.1.0", "language": "python/pyspark"}
CAPABILITIES: dict[str, Any] = {
    "profiles": ["strict", "owner"],
    "selectors": list(SELECTORS),
    "ops": list(OPS),
    "filters": True,
    "ack_timeout": False,
    "poison_policies": [],
    "persist_ack_holes": True,
    "held_events": True,
    "stats": False,
    "batch": True,
    "interactive": False,
    "flow_control": False,
    "deterministic": True,
}
UNSUPPORTED = {
    "profile": ("strict", "owner"),
    "selector": SELECTORS,
}
"""Valid configurations the Spark dispatcher does not run (answered `skipped`, never silently misrun)."""


class SparkDispatcherAdapter:
    """The adapter object: start, reset, replay, op, stop."""

    implementation: dict[str, Any] = IMPLEMENTATION

    def __init__(self, run_era: EraRunner | None = None, persist: Persister | None = None) -> None:
        self.config: Config | None = None
        self.ops: list[dict[str, Any]] = []
        self.jobs = 0
        self.run_era = run_era
        """None: every era is a Spark job; an EraRunner runs the key engines some other way (tests)."""
        self.persist = persist

    def start(self) -> dict[str, Any]:
        """Protocol version, implementation, capabilities (no Spark yet: it starts at the first replay)."""
        return {"version": PROTOCOL_VERSION, "implementation": self.implementation, "capabilities": CAPABILITIES}

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Check a configuration (KS-CFG-1) and start an empty run; no job runs."""
        parsed = _parse(config)
        if isinstance(parsed, dict):
            return parsed
        self.config, self.ops = parsed, []
        return {"ok": True, "events": []}

    def replay(self, config: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Reset with `config` and run every op: one response per op."""
        parsed = _parse(config)
        if isinstance(parsed, dict):
            return parsed
        try:
            responses = self._run(parsed, ops)
        except Exception as error:  # an implementation failure: the kit reports the run as unknown
            return {
                "errored": True,
                "context": {"message": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()},
            }
        return {"ok": True, "results": responses}

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        """One op, answered by replaying the run so far (one job per op: for `smoke`, not for the suite)."""
        if self.config is None:
            return {"errored": True, "context": {"message": "op before reset: no subscription exists yet"}}
        self.ops.append(dict(op))
        try:
            return self._run(self.config, self.ops)[-1]
        except Exception as error:
            return {
                "errored": True,
                "context": {"message": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()},
            }

    def stop(self) -> None:
        """Forget the run; the Spark session stays up for the next adapter in this process."""
        self.config, self.ops = None, []

    def _run(self, config: Config, ops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if self.run_era is not None:
            return replay(config, ops, self.run_era, self.persist)
        from ks_spark.dispatcher.runner import SparkEraRunner
        from ks_spark.session import SessionOptions, get_session

        session = get_session(SessionOptions(master=os.environ.get(MASTER_ENV), quick=True, shuffle_partitions=4))
        runner = SparkEraRunner(session)
        responses = replay(config, ops, runner, self.persist)
        self.jobs += runner.jobs
        return responses


def _parse(config: Mapping[str, Any]) -> Config | dict[str, Any]:
    """The parsed configuration, or the response refusing (invalid_config) or skipping it."""
    try:
        parsed = Config.parse(config)
    except ConfigError as error:
        return {"ok": False, "error": {"code": "invalid_config", "message": str(error), "field": error.field}}
    for name, allowed in UNSUPPORTED.items():
        if getattr(parsed, name) not in allowed:
            return {"skipped": True, "message": f"the Spark dispatcher runs {name} {', '.join(allowed)} only"}
    if parsed.ack_timeout:
        return {"skipped": True, "message": "the Spark dispatcher has no ack timeouts"}
    return parsed


def create() -> SparkDispatcherAdapter:
    """The zero-argument factory the conformance kit calls."""
    return SparkDispatcherAdapter()


def create_local() -> SparkDispatcherAdapter:
    """The same dispatcher with its key engines run in this process, no Spark (fast tests of the batch path)."""
    adapter = SparkDispatcherAdapter(run_keys_locally)
    adapter.implementation = {**IMPLEMENTATION, "name": "keyshared-spark-dispatcher-local"}
    return adapter
