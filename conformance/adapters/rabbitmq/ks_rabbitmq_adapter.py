"""A conformance adapter (spec/adapter-protocol.md, v2) for RabbitMQ's key-ordered consumers recipe, with pika.

The recipe: a consistent-hash exchange (`rabbitmq_consistent_hash_exchange`) spreads routing keys over N queues,
each declared with `x-single-active-consumer`; every consumer subscribes to every queue with a prefetch
(`basic.qos`) as its bound, acks what it processed and nacks with requeue what failed. Classic or quorum queues
(`--queue-type`); quorum queues add `x-delivery-limit` and dead-lettering. The mapping and its reasons are in this
folder's README.md.

Run it as `python conformance/adapters/rabbitmq/adapter.py [--url URL] [--queue-type classic|quorum] [--queues N]`;
without `--url` it reads $KS_RABBITMQ_URL, then asks `broker.sh status` (which also serves the `restart` op).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pika  # type: ignore[import-untyped]
import pika.exceptions  # type: ignore[import-untyped]
from ks_conformance.stdio import serve_stdio  # type: ignore[import-not-found,unused-ignore]

HERE = Path(__file__).resolve().parent
EXCHANGE = "ks.hash"
QUEUE_PREFIX = "ks.q"
DEAD_LETTER_EXCHANGE = "ks.dlx"
DEAD_LETTER_QUEUE = "ks.dlq"
KEY_HEADER = "ks-key"
MAX_PREFETCH = 65535
"""basic.qos's prefetch-count is an unsigned short: a larger capacity is served as this (it never binds in a run)."""

QUEUE_TYPES = ("classic", "quorum")
QOS_MODES = ("global", "per-consumer")
"""basic.qos's scope: `global`, one prefetch shared by the consumer's subscriptions to every queue (its whole bound;
classic queues only, a feature RabbitMQ deprecated in 2021), or `per-consumer`, a prefetch per subscription."""

QUIET_SECONDS = {"classic": 0.03, "quorum": 0.1}
"""How long the broker must stay still, with nothing in flight, before a dispatch pass is over (section "Time")."""
SETTLE_LIMIT_SECONDS = 8.0
"""The longest a dispatch pass waits for the broker to settle; past it the state is reported as it stands."""

UNLIMITED = 1_000_000
"""The `max_redeliveries` classic queues honour: they never poison, and the spec has no value for "never"."""

COMMON_VALUES: dict[str, list[Any]] = {
    "ack_timeout": [0],
    "backoff_base": [0],
    "backoff_max": [0],
    "persist_interval": [0],
    "persist_ack_holes": [False],
}
"""Values every queue type honours: no ack timeout, requeue at once (no back-off), no cursor."""

CONFIG_VALUES: dict[str, dict[str, list[Any]]] = {
    "classic": {**COMMON_VALUES, "max_redeliveries": [UNLIMITED]},
    "quorum": {**COMMON_VALUES, "max_redeliveries": [0, 1, 2, 3, 4, 5], "poison_policy": ["dead-letter"]},
}
"""Per queue type, the values of each configuration field this adapter honours (protocol v2 `config_values`).
Classic queues have no delivery limit: a nacked message is requeued for ever, which honours only a
`max_redeliveries` no run reaches (UNLIMITED); quorum queues take any `max_redeliveries` >= 0 as
`x-delivery-limit`, with a dead-letter exchange."""

FIELDS = (
    "profile",
    "selector",
    "window",
    "points",
    "ack_timeout",
    "max_redeliveries",
    "backoff_base",
    "backoff_max",
    "poison_policy",
    "persist_interval",
    "persist_ack_holes",
    "evict_after",
    "bucket_budget",
    "bucket_max",
    "partitions",
)
"""The configuration fields of spec section 20 this adapter knows, in the spec's order; any other is refused."""

OPS = ["publish", "add_consumer", "remove_consumer", "ack", "nack", "tick", "restart"]


def capabilities(queue_type: str, queues: int | None = None, restart: bool = True) -> dict[str, Any]:
    """What the recipe on this queue type declares (protocol v2 section 4): see README.md, "Declared capabilities".
    With a fixed number of queues only that `partitions` value is honoured; without, any (the kit draws 1 to 4).
    Without `restart` the op is not declared (the kit then says what it left unchecked)."""
    values = {**CONFIG_VALUES[queue_type], **({"partitions": [queues]} if queues is not None else {})}
    return {
        "profiles": ["owner"],  # prefetch: several messages of a key outstanding at once, all at the active consumer
        # a hash of the routing key to one of N queues, each with one active consumer (KS-ASN-11)
        "selectors": ["partitions"],
        "ops": OPS if restart else [op for op in OPS if op != "restart"],
        "filters": False,
        "ack_timeout": False,
        "poison_policies": ["dead-letter"] if queue_type == "quorum" else [],
        "persist_ack_holes": False,
        "held_events": False,
        "stats": False,
        "batch": False,
        "deterministic": False,  # deliveries are pushed by the broker's processes; settling waits on the wall clock
        "interactive": True,
        "flow_control": True,
        "capacity": True,  # basic.qos prefetch
        "window": False,  # a queue has no read-ahead window: every ready message is deliverable
        "cursor": False,  # acks remove messages; nothing like a cursor is persisted
        "durable_attempts": queue_type == "quorum",  # a quorum queue's delivery count lives in its Raft log
        "config_values": values,
        "terminal_outcomes": {},
    }


BROKER_FAULTS = (
    pika.exceptions.ChannelClosedByBroker,
    pika.exceptions.ConnectionClosedByBroker,
    pika.exceptions.NackError,
    pika.exceptions.UnroutableError,
)
"""The broker failing or rejecting a request the adapter made correctly: a `system_fault` answer (protocol section 2),
with the broker's own reply code and text, not an adapter fault."""


class Refused(Exception):
    """A refusal the protocol defines: nothing happened."""

    def __init__(self, code: str, message: str, field_name: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field_name = code, message, field_name


def parse_config(config: Any, queue_type: str, queues: int | None = None) -> dict[str, Any]:
    """The configuration with defaults filled in, or Refused (invalid_config naming the field), in the spec's order.
    `queues`: the one number of queues honoured (None: any `partitions` >= 1)."""
    if not isinstance(config, Mapping):
        raise Refused("invalid_config", "the configuration must be a JSON object", "(config)")
    for name in config:
        if name not in FIELDS:
            raise Refused("invalid_config", f"unknown field {name!r}", str(name))
    values = capabilities(queue_type, queues)["config_values"]
    for name in FIELDS:
        if name not in config or name in ("profile", "selector"):
            continue
        value = config[name]
        if name in ("bucket_budget", "bucket_max"):
            raise Refused("invalid_config", f"{name}: only with the buckets selector, which the recipe lacks", name)
        if name in ("window", "points", "evict_after"):
            raise Refused("invalid_config", f"{name}: the recipe has no {name} (the capability is not declared)", name)
        if not honoured(name, value, values):
            raise Refused("invalid_config", f"{name}: {value!r} is not supported (supported: {values.get(name)})", name)
    if config.get("profile", "owner") != "owner":
        raise Refused(
            "invalid_config", "profile: only 'owner' (the active consumer prefetches a key's messages)", "profile"
        )
    if config.get("selector") != "partitions":
        raise Refused(
            "invalid_config",
            "selector: only 'partitions' (a hash to one of N single-active-consumer queues)",
            "selector",
        )
    if queues is not None and queues != 4 and "partitions" not in config:  # the spec's default 4 is not our count
        raise Refused("invalid_config", f"partitions: this recipe has {queues} queues (only {queues})", "partitions")
    if queue_type == "classic" and "max_redeliveries" not in config:  # the spec's default 5 cannot be honoured
        raise Refused(
            "invalid_config", f"max_redeliveries: classic queues never poison (only {UNLIMITED})", "max_redeliveries"
        )
    defaults: dict[str, Any] = {"profile": "owner", "max_redeliveries": 5, "partitions": 4}
    return {**defaults, **config}


def honoured(name: str, value: Any, values: Mapping[str, list[Any]]) -> bool:
    """True if `value` is honoured for field `name` (quorum queues: any `max_redeliveries` >= 0; any number of
    partitions >= 1 unless the queues are fixed)."""
    counting = (name == "max_redeliveries" and values.get("max_redeliveries") != [UNLIMITED]) or (
        name == "partitions" and "partitions" not in values
    )
    if counting:
        minimum = 1 if name == "partitions" else 0
        return isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    return any(type(value) is type(allowed) and value == allowed for allowed in values.get(name, []))


def queue_arguments(queue_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of each of the N queues: single active consumer; for quorum queues the delivery limit and the
    dead-letter exchange (poisoning, spec KS-RTY-6: dead-lettered once delivered unsuccessfully more than
    `x-delivery-limit` times)."""
    arguments: dict[str, Any] = {"x-single-active-consumer": True, "x-queue-type": queue_type}
    if queue_type == "quorum":
        arguments["x-delivery-limit"] = int(config["max_redeliveries"])
        arguments["x-dead-letter-exchange"] = DEAD_LETTER_EXCHANGE
    return arguments


def prefetch(capacity: int) -> int:
    """basic.qos's prefetch-count for a consumer of this capacity (0 would mean unlimited, so never 0)."""
    return max(1, min(capacity, MAX_PREFETCH))


@dataclass
class Consumer:
    """One kit consumer: its own connection and channel, subscribed to every queue with prefetch = capacity."""

    name: str
    capacity: int
    connection: Any
    channel: Any
    held: dict[int, int] = field(default_factory=dict)
    """The deliveries it holds: offset -> delivery tag on its channel."""


@dataclass
class Journal:
    """What the adapter saw of every message (the broker reports deliveries, nothing else)."""

    keys: dict[int, str] = field(default_factory=dict)
    deliveries: dict[int, int] = field(default_factory=dict)
    """Deliveries seen per offset (since publication for quorum queues, since the last restart for classic ones)."""
    resolved: set[int] = field(default_factory=set)
    last_end: dict[int, str] = field(default_factory=dict)
    """How each message's last delivery ended: `nack`, or `left` (its consumer's channel closed, or the broker died)."""


class RabbitMQAdapter:
    """The adapter protocol's in-process methods, driving a RabbitMQ node with pika's blocking connections."""

    def __init__(
        self,
        url: str,
        queue_type: str = "classic",
        queues: int | None = None,
        restart: bool = True,
        qos: str | None = None,
    ) -> None:
        if queue_type not in QUEUE_TYPES:
            raise ValueError(f"queue type must be one of {QUEUE_TYPES}")
        if queues is not None and queues < 1:
            raise ValueError("there must be at least one queue")
        if qos is not None and qos not in QOS_MODES:
            raise ValueError(f"qos must be one of {QOS_MODES}")
        if queue_type == "quorum" and qos == "global":
            raise ValueError("quorum queues refuse global QoS: their prefetch is per consumer")
        self.url, self.queue_type, self.queue_count = url, queue_type, queues
        self.qos = qos or ("global" if queue_type == "classic" else "per-consumer")
        """basic.qos's scope (QOS_MODES): global by default on classic queues, per consumer on quorum queues."""
        self.restart = restart
        """Whether the `restart` op (a SIGKILL of the node) is declared."""
        self.queues: list[str] = []
        """The queues of the current subscription: one per partition (the configuration's `partitions`)."""
        self.version = 2
        self.config: dict[str, Any] = {}
        self.control: Any = None
        self.control_channel: Any = None
        self.consumers: dict[str, Consumer] = {}
        self.journal = Journal()
        self.published = 0
        self.events: list[dict[str, Any]] = []
        """Effects seen since the current op began, in the order pika handed them to us."""

    # --- the protocol -----------------------------------------------------------------------------------

    def start(self, version: int = 2) -> dict[str, Any]:
        """Who we are and what the recipe supports; protocol v2 only (v1 has no selector `any`)."""
        if version != 2:
            raise SystemExit(f"rabbitmq adapter: speaks protocol version 2 only, not {version}")
        self.version = version
        implementation = {
            "name": f"rabbitmq-key-ordered-{self.queue_type}",
            "version": self._server_version(),
            "language": "erlang",
            "homepage": "https://www.rabbitmq.com/",
            "source": f"keyshared: conformance/adapters/rabbitmq (pika {metadata.version('pika')}, "
            f"{self.queue_count or 'N'} {self.queue_type} queues, {self.qos} QoS)",
        }
        capable = capabilities(self.queue_type, self.queue_count, self.restart)
        return {"version": version, "implementation": implementation, "capabilities": capable}

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh subscription: every consumer gone, the exchange and the N queues deleted and declared again."""
        try:
            self.config = parse_config(config, self.queue_type, self.queue_count)
        except Refused as refusal:
            return {
                "ok": False,
                "error": {"code": refusal.code, "message": refusal.message, "field": refusal.field_name},
            }
        for consumer in list(self.consumers.values()):
            self._close(consumer.connection)
        self.consumers, self.journal, self.published, self.events = {}, Journal(), 0, []
        self._connect()
        channel = self.control_channel
        for name in [*self.queues, DEAD_LETTER_QUEUE]:
            channel.queue_delete(queue=name)
        self.queues = [f"{QUEUE_PREFIX}{index}" for index in range(int(self.config["partitions"]))]
        for name in self.queues:
            channel.queue_delete(queue=name)  # left by an earlier adapter process with more partitions
        channel.exchange_delete(exchange=EXCHANGE)
        channel.exchange_delete(exchange=DEAD_LETTER_EXCHANGE)
        self._declare()
        # A channel keeps per-queue state for the quorum queues it published to; a queue deleted and declared again
        # under the same name must be published to from a new channel (the old one has its publishes nacked).
        self._close(self.control)
        self.control = None
        self._connect()
        self._declare()
        return {"ok": True, "events": []}

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one op, then a dispatch pass (wait until the broker is still); its effect events or a refusal."""
        if self.control is None:
            return {"errored": True, "context": {"message": "op before reset: no subscription exists yet"}}
        handler: Callable[[Mapping[str, Any]], None] | None = getattr(self, f"_op_{op.get('op')}", None)
        if handler is None or (op.get("op") == "restart" and not self.restart):
            return {"skipped": True, "message": f"the RabbitMQ recipe has nothing that {op.get('op')!r} maps to"}
        self.events = []
        try:
            handler(op)
        except Refused as refusal:
            return {"ok": False, "error": {"code": refusal.code, "message": refusal.message}}
        except BROKER_FAULTS as fault:
            self.events = []
            self._connect()  # the control connection again, if the broker closed it
            return {"ok": False, "error": {"code": "system_fault", "message": f"{type(fault).__name__}: {fault}"}}
        self._settle()
        events, self.events = in_broker_order(self.events), []
        return {"ok": True, "events": events}

    def stats(self) -> dict[str, Any]:
        """Not supported (the `stats` capability is false)."""
        return {"errored": True, "context": {"message": "the rabbitmq adapter has no stats"}}

    def stop(self) -> None:
        """Close every connection."""
        for consumer in self.consumers.values():
            self._close(consumer.connection)
        self.consumers = {}
        if self.control is not None:
            self._close(self.control)
            self.control = None

    # --- plumbing ---------------------------------------------------------------------------------------

    def _server_version(self) -> str:
        connection = pika.BlockingConnection(pika.URLParameters(self.url))
        try:
            properties = connection._impl.server_properties  # what the broker said in connection.start
            version = properties.get("version", b"unknown")
            return version.decode() if isinstance(version, bytes) else str(version)
        finally:
            self._close(connection)

    @staticmethod
    def _close(connection: Any) -> None:
        try:
            if connection.is_open:
                connection.close()
        except (pika.exceptions.AMQPError, OSError):
            pass  # a connection the broker already dropped (a crash) has nothing left to close

    def _connect(self) -> None:
        """The control connection: topology, publishing with confirms, and the dead-letter queue's reader."""
        if self.control is not None and self.control.is_open:
            return
        self.control = pika.BlockingConnection(pika.URLParameters(self.url))
        self.control_channel = self.control.channel()
        self.control_channel.confirm_delivery()

    def _declare(self) -> None:
        """The recipe's topology (idempotent: after a crash the durable declarations are found again)."""
        channel = self.control_channel
        channel.exchange_declare(exchange=EXCHANGE, exchange_type="x-consistent-hash", durable=True)
        arguments = queue_arguments(self.queue_type, self.config)
        for name in self.queues:
            channel.queue_declare(queue=name, durable=True, arguments=arguments)
            channel.queue_bind(queue=name, exchange=EXCHANGE, routing_key="1")  # weight 1: an equal share of the ring
        if self.queue_type == "quorum":
            channel.exchange_declare(exchange=DEAD_LETTER_EXCHANGE, exchange_type="fanout", durable=True)
            channel.queue_declare(queue=DEAD_LETTER_QUEUE, durable=True)
            channel.queue_bind(queue=DEAD_LETTER_QUEUE, exchange=DEAD_LETTER_EXCHANGE)
            channel.basic_consume(queue=DEAD_LETTER_QUEUE, on_message_callback=self._dead_lettered)

    def _member(self, op: Mapping[str, Any]) -> Consumer:
        consumer = self.consumers.get(str(op.get("consumer")))
        if consumer is None:
            raise Refused("unknown_consumer", f"no member named {op.get('consumer')!r}")
        return consumer

    def _message(self, properties: Any) -> tuple[int, str]:
        return int(properties.message_id), str((properties.headers or {}).get(KEY_HEADER, ""))

    def _delivered(self, consumer: Consumer, method: Any, properties: Any) -> None:
        offset, key = self._message(properties)
        consumer.held[offset] = int(method.delivery_tag)
        attempt = self.journal.deliveries.get(offset, 0) + 1
        self.journal.deliveries[offset] = attempt
        self.events.append(
            {"event": "deliver", "offset": offset, "key": key, "consumer": consumer.name, "attempt": attempt}
        )

    def _dead_lettered(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        offset, key = self._message(properties)
        channel.basic_ack(delivery_tag=method.delivery_tag)
        self.journal.resolved.add(offset)
        attempt = self.journal.deliveries.get(offset, 0)
        reason = self.journal.last_end.get(offset, "nack")
        self.events.append({"event": "dead_letter", "offset": offset, "key": key, "attempt": attempt, "reason": reason})

    def _pump(self) -> None:
        """Hand every frame that has arrived to its callback."""
        self.control.process_data_events(time_limit=0)
        for consumer in list(self.consumers.values()):
            consumer.connection.process_data_events(time_limit=0)

    def _settle(self) -> None:
        """The dispatch pass: RabbitMQ pushes deliveries from its queue processes, so wait until it is still.

        A round asks every queue for its ready count (a synchronous call through the queue), then makes one
        synchronous call on every consumer's channel (so that what the queue sent it has been written to its socket)
        and reads every frame that arrived. The pass is over when no message is in flight (every unresolved message is
        ready in a queue or held by a consumer) and nothing changed for QUIET_SECONDS; or after SETTLE_LIMIT_SECONDS.
        """
        quiet = QUIET_SECONDS[self.queue_type]
        began = time.monotonic()
        last: tuple[Any, ...] | None = None
        still_since = began
        while True:
            ready = [
                int(self.control_channel.queue_declare(queue=name, passive=True).method.message_count)
                for name in self.queues
            ]
            for consumer in list(self.consumers.values()):
                consumer.channel.basic_qos(prefetch_count=self._prefetch_of(consumer), global_qos=self._global_qos)
            self._pump()
            held = sum(len(consumer.held) for consumer in self.consumers.values())
            unresolved = self.published - len(self.journal.resolved)
            in_flight = unresolved - sum(ready) - held
            state = (tuple(ready), tuple(sorted((c.name, tuple(sorted(c.held))) for c in self.consumers.values())))
            now = time.monotonic()
            if state != last:
                last, still_since = state, now
            if in_flight <= 0 and (sum(ready) == 0 or now - still_since >= quiet):
                return
            if now - began >= SETTLE_LIMIT_SECONDS:
                return
            time.sleep(0.003)

    @property
    def _global_qos(self) -> bool:
        """Global QoS (classic queues' default): one prefetch for the channel, the consumer's whole bound. Per consumer
        (quorum queues refuse global QoS), the prefetch is per subscription: a consumer active on several queues may
        hold more than its capacity."""
        return self.qos == "global"

    def _prefetch_of(self, consumer: Consumer) -> int:
        return prefetch(consumer.capacity)

    def _ignored(self, kind: str, consumer: Consumer, offset: int) -> None:
        key = self.journal.keys.get(offset)
        if key is None:
            reason = "unknown-offset"
        elif offset in self.journal.resolved:
            reason = "resolved"
        else:
            reason = "not-holder"
        event: dict[str, Any] = {"event": kind, "offset": offset, "consumer": consumer.name, "reason": reason}
        if key is not None:
            event["key"] = key
        self.events.append(event)

    # --- ops ----------------------------------------------------------------------------------------------

    def _op_publish(self, op: Mapping[str, Any]) -> None:
        """basic.publish to the consistent-hash exchange with the key as routing key, persistent, confirmed."""
        offset, key = op.get("offset"), op.get("key")
        if offset != self.published or not isinstance(key, str):
            raise Refused("invalid_argument", f"expected offset {self.published} and a string key")
        properties = pika.BasicProperties(message_id=str(offset), headers={KEY_HEADER: key}, delivery_mode=2)
        self.control_channel.basic_publish(
            exchange=EXCHANGE, routing_key=key, body=str(offset).encode(), properties=properties, mandatory=True
        )
        self.journal.keys[offset] = key
        self.published += 1

    def _op_add_consumer(self, op: Mapping[str, Any]) -> None:
        """A consumer process starting: its own connection, basic.qos(prefetch = capacity), basic.consume on every
        queue (single active consumer: it becomes active on a queue only if no one else consumes from it)."""
        name, capacity = str(op.get("consumer")), op.get("capacity")
        if name in self.consumers:
            raise Refused("duplicate_consumer", f"{name!r} is a member")
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise Refused("invalid_argument", "capacity must be an integer >= 1")
        if op.get("filters"):
            raise Refused("invalid_argument", "the recipe's consumers take whole queues, not keys: no key filters")
        connection = pika.BlockingConnection(pika.URLParameters(self.url))
        channel = connection.channel()
        consumer = Consumer(name, capacity, connection, channel)
        try:
            channel.basic_qos(prefetch_count=prefetch(capacity), global_qos=self._global_qos)
            for queue in self.queues:
                channel.basic_consume(
                    queue=queue,
                    on_message_callback=lambda _channel, method, properties, _body, c=consumer: self._delivered(
                        c, method, properties
                    ),
                    consumer_tag=f"{name}.{queue}",
                )
        except BROKER_FAULTS:
            self._close(connection)  # the consumer never started: what it was handed goes back to its queues
            raise
        self.consumers[name] = consumer

    def _op_remove_consumer(self, op: Mapping[str, Any]) -> None:
        """The consumer process stops: its connection closes, and RabbitMQ requeues what it held (unacked), and
        hands each queue it was active on to the next subscribed consumer."""
        consumer = self._member(op)
        for offset in consumer.held:
            self.journal.last_end[offset] = "left"
        del self.consumers[consumer.name]
        self._close(consumer.connection)

    def _op_ack(self, op: Mapping[str, Any]) -> None:
        """basic.ack of the delivery; an ack for a message the consumer does not hold is never sent (RabbitMQ closes
        the channel on an unknown delivery tag), it is reported ignored."""
        consumer, offset = self._member(op), int(op.get("offset", -1))
        tag = consumer.held.pop(offset, None)
        if tag is None:
            self._ignored("ack_ignored", consumer, offset)
            return
        consumer.channel.basic_ack(delivery_tag=tag)
        self.journal.resolved.add(offset)
        self.events.append(
            {"event": "ack", "offset": offset, "key": self.journal.keys[offset], "consumer": consumer.name}
        )

    def _op_nack(self, op: Mapping[str, Any]) -> None:
        """basic.nack with requeue: the message goes back to its queue (and, on a quorum queue past its delivery
        limit, to the dead-letter exchange instead)."""
        consumer, offset = self._member(op), int(op.get("offset", -1))
        tag = consumer.held.pop(offset, None)
        if tag is None:
            self._ignored("nack_ignored", consumer, offset)
            return
        consumer.channel.basic_nack(delivery_tag=tag, multiple=False, requeue=True)
        self.journal.last_end[offset] = "nack"
        self.events.append(
            {
                "event": "nack",
                "offset": offset,
                "key": self.journal.keys[offset],
                "consumer": consumer.name,
                "attempt": self.journal.deliveries.get(offset, 1),
            }
        )

    def _op_tick(self, op: Mapping[str, Any]) -> None:
        """Nothing in the recipe runs on a timer (no consumer timeout, no delayed retry): a tick is a dispatch pass."""

    def _op_restart(self, op: Mapping[str, Any]) -> None:
        """The broker crashes (SIGKILL of the node's VM) and starts again on its data; every consumer process died
        with its connection. Durable queues come back with their persistent messages; unacked ones are ready again."""
        for consumer in self.consumers.values():
            for offset in consumer.held:
                self.journal.last_end[offset] = "left"
        crashed = subprocess.run([str(HERE / "broker.sh"), "crash"], capture_output=True, text=True, check=False)
        if crashed.returncode != 0:
            raise RuntimeError(f"broker.sh crash failed: {crashed.stderr.strip()}")
        self.url = crashed.stdout.strip() or self.url
        for consumer in self.consumers.values():
            self._close(consumer.connection)
        self.consumers, self.control = {}, None
        if self.queue_type == "classic":
            self.journal.deliveries = {}  # attempts count deliveries since the last restart (no durable attempts)
        self._connect()
        self._declare()


def in_broker_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An op's effects in the order the broker made them, from the order the adapter read them.

    A quorum queue dead-letters a message past its delivery limit in the same state-machine step that returns it,
    before any delivery that step allows; the adapter reads the dead letter later only because it travels through the
    dead-letter exchange to the adapter's own reader. So dead letters go before the op's deliveries (stable otherwise);
    the ack, nack or ignored answer that opened the op stays first.
    """
    first = [event for event in events if event["event"] not in ("deliver", "dead_letter")]
    dead = [event for event in events if event["event"] == "dead_letter"]
    delivered = [event for event in events if event["event"] == "deliver"]
    return first + dead + delivered


def url_from_environment() -> str:
    """$KS_RABBITMQ_URL, or the URL of the running private node (`broker.sh status`)."""
    url = os.environ.get("KS_RABBITMQ_URL")
    if url:
        return url
    status = subprocess.run([str(HERE / "broker.sh"), "status"], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        raise SystemExit(f"rabbitmq adapter: no broker: pass --url, set KS_RABBITMQ_URL or run {HERE}/broker.sh start")
    return status.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Serve the adapter over stdio."""
    parser = argparse.ArgumentParser(
        description="the keyshared conformance adapter for RabbitMQ key-ordered consumers (JSON lines over stdio)"
    )
    parser.add_argument("--url", help="the AMQP URL (default: $KS_RABBITMQ_URL, or broker.sh status)")
    parser.add_argument(
        "--queue-type", choices=QUEUE_TYPES, default="classic", help="the queues' type (default classic)"
    )
    parser.add_argument(
        "--queues",
        type=int,
        help="N, the queues behind the consistent-hash exchange: only `partitions` N is honoured (default: one queue "
        "per partition of each configuration)",
    )
    parser.add_argument(
        "--without-restart",
        action="store_true",
        help="do not declare the `restart` op (no broker crash): for a run whose crashes would each cost minutes, such "
        "as quorum queues that are not served again after one (REPORT.md)",
    )
    parser.add_argument(
        "--qos",
        choices=QOS_MODES,
        help="basic.qos's scope: global (one prefetch per consumer over all its queues; the default on classic queues, "
        "a RabbitMQ feature deprecated since 2021) or per-consumer (a prefetch per queue; the only one quorum queues "
        "take)",
    )
    arguments = parser.parse_args(argv)
    if arguments.queues is not None and arguments.queues < 1:
        parser.error("--queues must be at least 1")
    if arguments.queue_type == "quorum" and arguments.qos == "global":
        parser.error("--qos global: quorum queues refuse global QoS (their prefetch is per consumer)")
    adapter = RabbitMQAdapter(
        arguments.url or url_from_environment(),
        arguments.queue_type,
        arguments.queues,
        not arguments.without_restart,
        arguments.qos,
    )
    status: int = serve_stdio(adapter)
    return status
