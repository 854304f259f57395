"""Standalone reproductions, with pika only, of the recipe's findings (README.md, "Findings").

    python repro.py AMQP_URL single-active      # every queue's active consumer is the first subscriber
    python repro.py AMQP_URL return-counted     # a quorum queue counts a consumer's channel close as a failed delivery
    python repro.py AMQP_URL consume-after-crash  # after a SIGKILL of the node, consuming a quorum queue crashes
                                                  # the channel (541 INTERNAL_ERROR); needs broker.sh's node
    python repro.py AMQP_URL requeue-behind-return [classic]  # a quorum queue delivers a nacked message behind a
                                                              # later one (a classic queue does not)
    python repro.py AMQP_URL failover-newer-first [classic]   # a quorum queue's next active consumer gets a later
                                                              # message before the one its predecessor held
    python repro.py AMQP_URL failover-stall [per-consumer]    # global QoS: a classic queue that fails over to a
                                                              # consumer at its prefetch never serves it again
    python repro.py AMQP_URL nack-race [per-consumer]         # global QoS: a classic queue now and then delivers
                                                              # the next message before a nacked one (a race)

Each prints what it saw and exits 0 when RabbitMQ behaved as the finding says, 1 when it did not (the finding no
longer holds on that broker). It declares its own exchange and queues (names starting `repro.`) and deletes them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pika  # type: ignore[import-untyped]

TYPES = ("classic", "quorum")
"""The queue types the ordering reproductions take (default quorum)."""
SCOPES = ("global", "per-consumer")
"""basic.qos's scopes the global-QoS reproductions take (default global)."""


def _drain(connections: list[Any], seconds: float = 0.5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for connection in connections:
            connection.process_data_events(time_limit=0.02)


def single_active(url: str) -> bool:
    """Two consumers, each with prefetch 1 and subscribed to all 4 single-active-consumer queues of a consistent-hash
    exchange; 8 keys published. Only the first consumer receives anything: the second, idle and with room, waits."""
    admin = pika.BlockingConnection(pika.URLParameters(url))
    channel = admin.channel()
    channel.exchange_declare("repro.hash", "x-consistent-hash")
    queues = [f"repro.sac{i}" for i in range(4)]
    for queue in queues:
        channel.queue_declare(queue, arguments={"x-single-active-consumer": True})
        channel.queue_bind(queue, "repro.hash", routing_key="1")
    received: dict[str, list[str]] = {"first": [], "second": []}
    consumers = []
    for name in received:
        connection = pika.BlockingConnection(pika.URLParameters(url))
        consumer = connection.channel()
        consumer.basic_qos(prefetch_count=1, global_qos=True)
        for queue in queues:
            consumer.basic_consume(
                queue, lambda _c, _m, properties, _b, n=name: received[n].append(properties.message_id)
            )
        consumers.append(connection)
    for index in range(8):
        channel.basic_publish("repro.hash", f"key-{index}", b"", pika.BasicProperties(message_id=f"key-{index}"))
    _drain(consumers)
    print(f"first consumer holds {received['first']}, second consumer holds {received['second']}")
    for connection in consumers:
        connection.close()
    for queue in queues:
        channel.queue_delete(queue)
    channel.exchange_delete("repro.hash")
    admin.close()
    return len(received["first"]) == 1 and not received["second"]


def return_counted(url: str) -> bool:
    """A quorum queue with x-delivery-limit 1 and a dead-letter queue. A consumer nacks (requeue) a message once and
    then its channel closes while it holds the redelivery: the message is dead-lettered, although it failed only once
    (the spec returns a leaving consumer's messages without counting a failure, KS-RTY-7)."""
    admin = pika.BlockingConnection(pika.URLParameters(url))
    channel = admin.channel()
    channel.exchange_declare("repro.dlx", "fanout")
    channel.queue_declare("repro.dlq")
    channel.queue_bind("repro.dlq", "repro.dlx")
    arguments = {"x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "repro.dlx"}
    channel.queue_declare("repro.qq", durable=True, arguments=arguments)
    channel.basic_publish("", "repro.qq", b"m", pika.BasicProperties(message_id="m", delivery_mode=2))
    consumer_connection = pika.BlockingConnection(pika.URLParameters(url))
    consumer = consumer_connection.channel()
    consumer.basic_qos(prefetch_count=1)
    tags: list[int] = []
    consumer.basic_consume("repro.qq", lambda _c, method, _p, _b: tags.append(method.delivery_tag))
    _drain([consumer_connection])
    consumer.basic_nack(tags[-1], requeue=True)  # the one failure
    _drain([consumer_connection])
    print(f"deliveries before the close: {len(tags)} (the first nacked, the second held)")
    consumer_connection.close()  # the consumer goes away holding the redelivery
    time.sleep(0.5)
    dead = channel.queue_declare("repro.dlq", passive=True).method.message_count
    ready = channel.queue_declare("repro.qq", durable=True, passive=True).method.message_count
    print(f"after the close: {ready} ready in the queue, {dead} dead-lettered")
    channel.queue_delete("repro.qq")
    channel.queue_delete("repro.dlq")
    channel.exchange_delete("repro.dlx")
    admin.close()
    return len(tags) == 2 and dead == 1 and ready == 0


def _order_queue(url: str, queue_type: str) -> tuple[Any, Any]:
    """A single-active-consumer queue of `queue_type` (quorum with a delivery limit of 3, as the adapter declares it)
    holding m0 then m1 of one key; the admin connection and its channel."""
    admin = pika.BlockingConnection(pika.URLParameters(url))
    channel = admin.channel()
    arguments: dict[str, Any] = {"x-single-active-consumer": True, "x-queue-type": queue_type}
    if queue_type == "quorum":
        arguments["x-delivery-limit"] = 3
    channel.queue_declare("repro.order", durable=True, arguments=arguments)
    for name in ("m0", "m1"):
        channel.basic_publish("", "repro.order", b"", pika.BasicProperties(message_id=name, delivery_mode=2))
    return admin, channel


def _subscriber(url: str, seen: list[str], tags: dict[str, int], prefetch: int = 1) -> tuple[Any, Any]:
    """A consumer on repro.order recording in `seen` the ids it receives; its connection and channel."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    consumer = connection.channel()
    consumer.basic_qos(prefetch_count=prefetch)

    def received(_channel: Any, method: Any, properties: Any, _body: bytes) -> None:
        seen.append(properties.message_id)
        tags[properties.message_id] = method.delivery_tag

    consumer.basic_consume("repro.order", received)
    return connection, consumer


def requeue_behind_return(url: str, queue_type: str = "quorum") -> bool:
    """m0 and m1 of one key in a single-active-consumer queue. The consumer holding both goes away (both are returned),
    the next one (prefetch 1) receives m0 and nacks it with requeue: RabbitMQ's nack guide puts a requeued message back
    at its original position if possible, and no other consumer competes here; a quorum queue delivers m1 next."""
    admin, channel = _order_queue(url, queue_type)
    first, _ = _subscriber(url, [], {}, prefetch=2)
    _drain([first])
    first.close()  # it held m0 and m1: both go back to the queue
    seen: list[str] = []
    tags: dict[str, int] = {}
    second, consumer = _subscriber(url, seen, tags)
    _drain([second])
    consumer.basic_nack(tags["m0"], requeue=True)
    _drain([second])
    print(f"{queue_type}: after the return and the nack of m0 the next consumer received, in order: {seen}")
    second.close()
    channel.queue_delete("repro.order")
    admin.close()
    return seen[:2] == ["m0", "m1"]


def failover_newer_first(url: str, queue_type: str = "quorum") -> bool:
    """m0 and m1 of one key in a single-active-consumer queue with two subscribers of prefetch 1; the active one holds
    m0 and goes away. The spec returns m0 ahead of m1 (KS-ORD-3); a quorum queue gives the new active consumer m1
    first, before the returned m0."""
    admin, channel = _order_queue(url, queue_type)
    first, _ = _subscriber(url, [], {})
    seen: list[str] = []
    second, _ = _subscriber(url, seen, {})
    _drain([first, second])
    first.close()  # the active consumer leaves holding m0
    _drain([second])
    print(f"{queue_type}: after the active consumer left holding m0, the next one received first: {seen[:1]}")
    second.close()
    channel.queue_delete("repro.order")
    admin.close()
    return seen[:1] == ["m1"]


def _classic_sac_queues(url: str, names: list[str]) -> tuple[Any, Any]:
    """Classic single-active-consumer queues named `names`, declared afresh; the admin connection and its channel."""
    admin = pika.BlockingConnection(pika.URLParameters(url))
    channel = admin.channel()
    for name in names:
        channel.queue_delete(name)
        channel.queue_declare(name, durable=True, arguments={"x-single-active-consumer": True})
    return admin, channel


def _publish(channel: Any, queue: str, message_id: str) -> None:
    channel.basic_publish("", queue, b"", pika.BasicProperties(message_id=message_id, delivery_mode=2))


def failover_stall(url: str, scope: str = "global") -> bool:
    """Classic single-active-consumer queues B and C. Consumer 1 (prefetch 3, global QoS) subscribes to both and
    holds m0, m1, m2 of B; m3 is published to C and waits (consumer 1 is at its prefetch). Consumer 2 (prefetch 1)
    subscribes to both; consumer 1 goes away. Consumer 2 becomes the active consumer of B and C, receives m0, m1, m2
    one at a time and acks each; then it holds nothing, yet C never delivers m3 (waited 5 s). With per-consumer QoS
    m3 is delivered (and consumer 1 held 4 messages: the prefetch bounds each subscription, not the consumer)."""
    queues = ["repro.stall.b", "repro.stall.c"]
    admin, channel = _classic_sac_queues(url, queues)
    received: dict[str, list[tuple[str, int]]] = {"first": [], "second": []}
    connections: dict[str, tuple[Any, Any]] = {}

    def subscribe(name: str, prefetch: int) -> None:
        connection = pika.BlockingConnection(pika.URLParameters(url))
        consumer = connection.channel()
        consumer.basic_qos(prefetch_count=prefetch, global_qos=scope == "global")
        for queue in queues:
            consumer.basic_consume(
                queue, lambda _c, method, props, _b, n=name: received[n].append((props.message_id, method.delivery_tag))
            )
        connections[name] = (connection, consumer)

    def drain(seconds: float = 0.3) -> None:
        _drain([connection for connection, _ in connections.values()], seconds)

    for index in range(2):
        _publish(channel, queues[0], f"m{index}")
    subscribe("first", 3)
    drain()
    _publish(channel, queues[0], "m2")
    drain()
    _publish(channel, queues[1], "m3")
    drain()
    subscribe("second", 1)
    drain()
    connections.pop("first")[0].close()  # consumer 1 goes away holding m0, m1, m2
    drain()
    acked: set[str] = set()
    while pending := [(m, tag) for m, tag in received["second"] if m not in acked]:
        message, tag = pending[0]
        connections["second"][1].basic_ack(tag)
        acked.add(message)
        drain()
    drain(5.0)
    waiting = channel.queue_declare(queues[1], durable=True, passive=True).method.message_count
    print(
        f"{scope} QoS: consumer 1 held {[m for m, _ in received['first']]}; after it left, consumer 2 received "
        f"{[m for m, _ in received['second']]} and acked them all; {waiting} message(s) still waiting in C"
    )
    connections["second"][0].close()
    for queue in queues:
        channel.queue_delete(queue)
    admin.close()
    return waiting == 1 and "m3" not in acked


def nack_race(url: str, scope: str = "global", attempts: int = 100_000) -> bool:
    """Classic single-active-consumer queues A and B; one consumer (prefetch 2) holds b0 of B and m0 of A, while m1
    waits in A. It nacks m0 with requeue, and again each time m0 comes back, up to `attempts` times: with global QoS,
    now and then A delivers m1 before m0 (here after 250 to 37,000 nacks, a race); with per-consumer QoS (prefetch 1
    per subscription, the same holdings), never in 100,000."""
    queues = ["repro.race.a", "repro.race.b"]
    admin, channel = _classic_sac_queues(url, queues)
    _publish(channel, queues[1], "b0")
    for name in ("m0", "m1"):
        _publish(channel, queues[0], name)
    connection = pika.BlockingConnection(pika.URLParameters(url))
    consumer = connection.channel()
    consumer.basic_qos(prefetch_count=2 if scope == "global" else 1, global_qos=scope == "global")
    seen: list[tuple[str, int]] = []

    def received(_channel: Any, method: Any, properties: Any, _body: bytes) -> None:
        seen.append((properties.message_id, method.delivery_tag))

    for queue in reversed(queues):
        consumer.basic_consume(queue, received)
    _drain([connection])
    held = dict(seen)
    seen.clear()
    tag, overtaken_at = held["m0"], None
    for attempt in range(1, attempts + 1):
        consumer.basic_nack(tag, requeue=True)
        deadline = time.monotonic() + 2
        while not seen and time.monotonic() < deadline:
            connection.process_data_events(time_limit=0.005)
        if not seen:
            break
        message, tag = seen.pop(0)
        if message != "m0":
            overtaken_at = attempt
            break
    print(
        f"{scope} QoS: holding {sorted(held)}, m0 nacked {attempt} times: "
        + (f"m1 was delivered before m0 after nack {overtaken_at}" if overtaken_at else "m0 always came back first")
    )
    connection.close()
    for queue in queues:
        channel.queue_delete(queue)
    admin.close()
    return overtaken_at is not None


def consume_after_crash(url: str, wait_seconds: float = 60.0) -> bool:
    """A durable quorum queue with one persistent message; the node is killed (broker.sh crash: SIGKILL of its VM)
    and started again on its data. Every basic.consume on the queue then closes the connection with 541
    INTERNAL_ERROR (the node logs a badmatch {error,noproc} in rabbit_quorum_queue:consume) for `wait_seconds`."""
    admin = pika.BlockingConnection(pika.URLParameters(url))
    channel = admin.channel()
    channel.confirm_delivery()
    channel.queue_delete("repro.qq")
    channel.queue_declare("repro.qq", durable=True, arguments={"x-queue-type": "quorum"})
    channel.basic_publish("", "repro.qq", b"m0", pika.BasicProperties(delivery_mode=2))
    admin.close()
    script = Path(__file__).resolve().parent / "broker.sh"
    crashed = subprocess.run([str(script), "crash"], capture_output=True, text=True, check=False, env=os.environ)
    if crashed.returncode != 0:
        raise SystemExit(f"repro.py: broker.sh crash failed (is KS_RMQ_STATE this node's?): {crashed.stderr.strip()}")
    url = crashed.stdout.strip() or url
    started, failures = time.monotonic(), 0
    while time.monotonic() - started < wait_seconds:
        connection = pika.BlockingConnection(pika.URLParameters(url))
        try:
            connection.channel().basic_consume("repro.qq", lambda *_: None)
            connection.process_data_events(time_limit=0.2)
        except pika.exceptions.ConnectionClosedByBroker as error:
            failures += 1
            print(f"basic.consume {failures} at {time.monotonic() - started:.1f} s after the restart: {error!r}")
            time.sleep(2)
            continue
        connection.close()
        print(f"basic.consume succeeded {time.monotonic() - started:.1f} s after the restart")
        break
    cleanup = pika.BlockingConnection(pika.URLParameters(url))
    cleanup.channel().queue_delete("repro.qq")
    cleanup.close()
    return failures > 0


def main(argv: list[str]) -> int:
    """Run the reproduction named on the command line."""
    cases = {
        "single-active": single_active,
        "return-counted": return_counted,
        "consume-after-crash": consume_after_crash,
        "requeue-behind-return": requeue_behind_return,
        "failover-newer-first": failover_newer_first,
        "failover-stall": failover_stall,
        "nack-race": nack_race,
    }
    typed = {"requeue-behind-return": requeue_behind_return, "failover-newer-first": failover_newer_first}
    scoped = {"failover-stall": failover_stall, "nack-race": nack_race}
    variant = argv[2] if len(argv) == 3 else None
    if not (len(argv) == 2 and argv[1] in cases) and not (
        variant is not None and ((argv[1] in typed and variant in TYPES) or (argv[1] in scoped and variant in SCOPES))
    ):
        print(
            f"usage: repro.py AMQP_URL {'|'.join(cases)} (requeue-behind-return and failover-newer-first: optionally "
            "classic|quorum; failover-stall and nack-race: optionally global|per-consumer)",
            file=sys.stderr,
        )
        return 2
    try:
        shown = {**typed, **scoped}[argv[1]](argv[0], variant) if variant else cases[argv[1]](argv[0])
    except pika.exceptions.AMQPError as error:
        print(f"repro.py: the broker at {argv[0]} failed: {error!r}", file=sys.stderr)
        return 2
    print("reproduced" if shown else "not reproduced")
    return 0 if shown else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
