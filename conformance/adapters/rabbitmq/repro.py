"""Standalone reproductions, with pika only, of the recipe's findings (README.md, "Findings").

    python repro.py AMQP_URL single-active      # every queue's active consumer is the first subscriber
    python repro.py AMQP_URL return-counted     # a quorum queue counts a consumer's channel close as a failed delivery
    python repro.py AMQP_URL consume-after-crash  # after a SIGKILL of the node, consuming a quorum queue crashes
                                                  # the channel (541 INTERNAL_ERROR); needs broker.sh's node

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
    }
    if len(argv) != 2 or argv[1] not in cases:
        print(f"usage: repro.py AMQP_URL {'|'.join(cases)}", file=sys.stderr)
        return 2
    try:
        shown = cases[argv[1]](argv[0])
    except pika.exceptions.AMQPError as error:
        print(f"repro.py: the broker at {argv[0]} failed: {error!r}", file=sys.stderr)
        return 2
    print("reproduced" if shown else "not reproduced")
    return 0 if shown else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
