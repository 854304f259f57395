"""Standalone reproductions, with pika only, of the recipe's findings (README.md, "Findings").

    python repro.py AMQP_URL single-active      # every queue's active consumer is the first subscriber
    python repro.py AMQP_URL return-counted     # a quorum queue counts a consumer's channel close as a failed delivery
    python repro.py AMQP_URL consume-after-crash  # after a SIGKILL of the node, consuming a quorum queue crashes
                                                  # the channel (541 INTERNAL_ERROR); needs broker.sh's node
    python repro.py AMQP_URL requeue-behind-return [classic]  # a quorum queue delivers a nacked message behind a
                                                              # later one (a classic queue does not)
    python repro.py AMQP_URL failover-newer-first [classic]   # a quorum queue's next active consumer gets a later
                                                              # message before the one its predecessor held

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
    }
    typed = {"requeue-behind-return": requeue_behind_return, "failover-newer-first": failover_newer_first}
    if not (len(argv) == 2 and argv[1] in cases) and not (len(argv) == 3 and argv[1] in typed and argv[2] in TYPES):
        print(f"usage: repro.py AMQP_URL {'|'.join(cases)} (the last two: optionally classic|quorum)", file=sys.stderr)
        return 2
    try:
        shown = typed[argv[1]](argv[0], argv[2]) if len(argv) == 3 else cases[argv[1]](argv[0])
    except pika.exceptions.AMQPError as error:
        print(f"repro.py: the broker at {argv[0]} failed: {error!r}", file=sys.stderr)
        return 2
    print("reproduced" if shown else "not reproduced")
    return 0 if shown else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
