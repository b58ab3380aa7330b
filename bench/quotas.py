"""Client quotas measured with confluent-kafka (issue 13): a producer with a 1 MB/s
producer_byte_rate and a consumer with a 2 MB/s consumer_byte_rate, each run flat out; their
rates over 30 s after a warm-up (the first quota.window.num - 1 windows admit a burst, as in
Kafka), the throttle times librdkafka reports (throttle_cb), and an unthrottled producer
beside them.

Run: .venv/bin/python bench/quotas.py [--seconds 30] [--warmup 12] [--bootstrap HOST:PORT]
(``--bootstrap`` measures a broker already running, Apache Kafka for one, with the same
quotas set through the same protocol requests.)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.throughput import own_broker  # noqa: E402

MB = 1024 * 1024
VALUE = b"q" * 1000


def set_quotas(bootstrap: str) -> None:
    import asyncio

    from kbroker.cli.ops.admin import parse_bootstrap
    from kbroker.cli.ops.quotas import alter_quotas  # the same code as `kbroker quotas alter`
    from kbroker.client import KafkaClient

    async def main() -> None:
        async with KafkaClient(parse_bootstrap(bootstrap), timeout=30) as client:
            await alter_quotas(
                client, [("client-id", "slow-producer")], {"producer_byte_rate": MB}, []
            )
            await alter_quotas(
                client, [("client-id", "slow-consumer")], {"consumer_byte_rate": 2 * MB}, []
            )

    asyncio.run(main())


def produce(
    bootstrap: str, topic: str, client_id: str, seconds: float, warmup: float, out: dict[str, Any]
) -> None:
    acked: list[tuple[float, int]] = []
    throttles: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 20,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    started = time.monotonic()
    while time.monotonic() - started < warmup + seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    window = [n for t, n in acked if started + warmup <= t <= started + warmup + seconds]
    out[client_id] = {
        "MB_per_s": sum(window) / seconds / MB,
        "throttle_events": len(throttles),
        "max_throttle_ms": max(throttles, default=0),
    }


def consume(bootstrap: str, topic: str, seconds: float, warmup: float, out: dict[str, Any]) -> None:
    throttles: list[int] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "slow-consumer",
            "group.id": "quota-bench",
            "enable.auto.commit": False,
            # librdkafka prefetches into a local queue (64 MiB by default): what it took
            # in the warm-up's burst would be counted as consumed in the measured window.
            # A small queue makes what the application sees follow what the broker sent.
            "queued.max.messages.kbytes": 1024,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    started = time.monotonic()
    counted = 0
    while time.monotonic() - started < warmup + seconds:
        for message in consumer.consume(1000, timeout=0.2):
            if message.error() is None and time.monotonic() - started >= warmup:
                counted += len(message.value())
    consumer.close()
    out["slow-consumer"] = {
        "MB_per_s": counted / seconds / MB,
        "throttle_events": len(throttles),
        "max_throttle_ms": max(throttles, default=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=12.0)
    parser.add_argument("--bootstrap", help="a running broker (default: start a kbroker)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(own_broker()).bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"quota-{uuid.uuid4().hex[:6]}" for _ in range(3)]
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            f.result(timeout=30)
        set_quotas(bootstrap)
        # The consumer's topic is filled first, unthrottled, with more than it can read.
        fill = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        for _ in range(int(2.5 * (args.seconds + args.warmup) * MB / len(VALUE))):
            try:
                fill.produce(topics[2], VALUE)
            except BufferError:
                fill.poll(0.05)
                fill.produce(topics[2], VALUE)
        fill.flush(60)
        results: dict[str, Any] = {}
        threads = [
            threading.Thread(
                target=produce,
                args=(bootstrap, topics[0], "slow-producer", args.seconds, args.warmup, results),
            ),
            threading.Thread(
                target=produce,
                args=(bootstrap, topics[1], "free-producer", args.seconds, args.warmup, results),
            ),
            threading.Thread(
                target=consume, args=(bootstrap, topics[2], args.seconds, args.warmup, results)
            ),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print(f"over {args.seconds:g} s after {args.warmup:g} s of warm-up:")
    for name, figures in sorted(results.items()):
        print(
            f"  {name:14s} {figures['MB_per_s']:8.3f} MB/s  throttle events "
            f"{figures['throttle_events']:5d}  max throttle {figures['max_throttle_ms']} ms"
        )
    print(
        "  quotas: slow-producer producer_byte_rate 1 MiB/s, slow-consumer consumer_byte_rate "
        "2 MiB/s, free-producer none"
    )


if __name__ == "__main__":
    main()
