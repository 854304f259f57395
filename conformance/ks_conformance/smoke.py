"""`conformance smoke`: does an adapter work at all? A short scripted exchange, every message validated.

The script stays inside the declared capabilities: start, reset, a consumer, three publishes, an ack, an
ack from a consumer that does not exist (a refusal), a tick, the stats, settling to quiescence, stop. A batch
engine (`interactive: false`) gets the same script as `replay` requests.
Every request and response is checked against the protocol schema and the trace is judged like a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS, config_problem

from ks_conformance.anomalies import Anomaly
from ks_conformance.batch import open_session
from ks_conformance.harness import UNBOUNDED_CAPACITY
from ks_conformance.protocol import AdapterFault, Capabilities, Connection, StartFailed, StartInfo


@dataclass
class SmokeResult:
    """What the smoke test saw."""

    info: StartInfo | None = None
    exchanges: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    fault: AdapterFault | None = None
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True if the adapter answered everything correctly and nothing contradicted the spec."""
        return self.fault is None and not self.anomalies


def declared_config(base: dict[str, Any], capabilities: Capabilities) -> dict[str, Any]:
    """The plain configuration, plus each declared field whose spec default the adapter does not support.

    Smoke stays inside the declared capabilities: a field left out is judged at its spec default, so a field
    whose declared values exclude that default is sent with its first declared value (where it applies).
    """
    config = dict(base)
    for name, values in capabilities.config_values.items():
        if CONFIG_DEFAULTS.get(name) in values:
            continue
        candidate = {**config, name: values[0]}
        if config_problem(candidate) is None:
            config = candidate
    return config


def smoke(connection: Connection) -> SmokeResult:
    """Run the smoke script; StartFailed propagates (the adapter did not start)."""
    result = SmokeResult()
    connection.validate = True
    connection.exchanges = result.exchanges
    try:
        info = result.info = connection.start()
        capabilities = info.capabilities
        selector = "ring" if "ring" in capabilities.selectors else capabilities.selectors[0]
        profile = "owner" if "owner" in capabilities.profiles else capabilities.profiles[0]
        result.config = declared_config({"profile": profile, "selector": selector}, capabilities)
        batch = not capabilities.interactive
        session = open_session(
            connection, capabilities, result.config, batch=batch, implementation=info.implementation, chunk=1000
        )
        outcome = session.begin()
        if not outcome.ok:
            raise AdapterFault("protocol", f"reset refused the plain configuration {result.config}: {outcome.code}")
        capacity = 2 if capabilities.capacity else UNBOUNDED_CAPACITY
        consumer: dict[str, Any] = {"op": "add_consumer", "consumer": "c1", "capacity": capacity, "filters": []}
        if selector == "pulsar-sticky":
            consumer["ranges"] = [[0, 65535]]
        session.perform(consumer)
        for offset, key in enumerate(("k1", "k2", "k1")):
            session.perform({"op": "publish", "offset": offset, "key": key})
        session.flush()  # a batch engine replays here: the deliveries so far are known after it
        delivered = [d for m in session.checker.members.values() for d in m.outstanding.values()]
        if delivered and "ack" in capabilities.ops:
            session.perform({"op": "ack", "consumer": delivered[0].holder.name, "offset": delivered[0].offset})
        if "ack" in capabilities.ops:
            session.perform({"op": "ack", "consumer": "nobody", "offset": 0})
        if "tick" in capabilities.ops:
            session.perform({"op": "tick"})
        session.settle("oldest")
        result.anomalies = list(session.anomalies)
    except StartFailed:
        raise
    except AdapterFault as fault:
        result.fault = fault
    finally:
        connection.exchanges = None
        connection.close()
    return result
