"""The workload, run in the client's network namespace by chaos/run.py.

Creates the topic (3 partitions, replication factor 3, min.insync.replicas=2), touches
``<out>.ready``, then for ``--duration`` seconds writes unique values (``v<n>``) with one
producer (idempotent and acks=all, or plain acks=1 with ``--acks 1``) while a consumer reads
every partition from the start. Every acknowledgement (partition, offset, value), every
record read and the time each value was handed to the producer (``attempts``) is recorded.
When the producer stops, the workload waits for ``<out>.healed`` (every fault healed),
flushes, reads each partition from the log start to its high watermark and writes the
history (see chaos/checker.py; ``high`` holds the high watermarks read back) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "chaos"
PARTITIONS = 3


def create_topic(bootstrap: str, timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin.list_topics(timeout=5)
            if len(md.brokers) == 3 and md.controller_id >= 0:
                break
        except Exception:  # noqa: BLE001 - the cluster is still starting: try again
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the brokers did not register")
        time.sleep(0.5)
    topic = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    create_until_registered(admin, topic, deadline)
    while True:
        parts = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions
        if len(parts) == PARTITIONS and all(
            len(p.isrs) == 3 and p.leader >= 0 for p in parts.values()
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the topic did not get in sync")
        time.sleep(0.5)


def create_until_registered(admin: AdminClient, topic: NewTopic, deadline: float) -> None:
    """Create ``topic``, again while the brokers are not all registered yet: the broker that
    creates it may not see a broker yet that the one that answered Metadata saw ("only 2
    broker(s) are registered"). A retried create may find its first attempt done."""
    while True:
        try:
            admin.create_topics([topic], request_timeout=30)[topic.topic].result(60)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if code != KafkaError.INVALID_REPLICATION_FACTOR or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


class Reader(threading.Thread):
    """Reads every partition from the start until stopped, recording each record."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.seen: list[list[Any]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "chaos-reader",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        try:
            while not self.stop_event.is_set():
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    self.seen.append([time.time(), msg.partition(), msg.offset(), _value(msg)])
        finally:
            consumer.close()


def _value(msg: Message) -> str:
    value = msg.value()
    assert value is not None
    return value.decode()


def produce(bootstrap: str, acks: str, duration: float, history: dict[str, Any]) -> Producer:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": acks == "all",
        "linger.ms": 5,
        "request.timeout.ms": 10000,
        "message.timeout.ms": int((duration + 90) * 1000),
        "topic.metadata.refresh.interval.ms": 1000,
    }
    producer = Producer(settings)

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            history["failed"].append([time.time(), _value(msg), str(err)])
        else:
            history["acked"].append([time.time(), msg.partition(), msg.offset(), _value(msg)])

    history["start"] = time.time()
    n = 0
    while time.time() - history["start"] < duration:
        try:
            producer.produce(TOPIC, f"v{n}".encode(), on_delivery=delivered)
            history["attempts"].append(time.time())
            n += 1
        except BufferError:
            pass
        producer.poll(0.005)
    history["end"] = time.time()
    history["sent"] = n
    return producer


def final_read(
    bootstrap: str, timeout: float
) -> tuple[dict[int, list[list[Any]]], dict[int, int], bool]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "chaos-final", "enable.auto.commit": False}
    )
    deadline = time.monotonic() + timeout
    try:
        high: dict[int, int] = {}
        for p in range(PARTITIONS):
            while p not in high:
                try:
                    high[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[
                        1
                    ]
                except Exception:  # noqa: BLE001 - leader still moving: ask again
                    if time.monotonic() > deadline:
                        return {}, high, False
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: dict[int, list[list[Any]]] = {p: [] for p in range(PARTITIONS)}
        done = {p for p in range(PARTITIONS) if high[p] == 0}
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            p = msg.partition()
            if msg.offset() < high[p]:
                out[p].append([msg.offset(), _value(msg)])
            if msg.offset() >= high[p] - 1:
                done.add(p)
        return out, high, len(done) == PARTITIONS
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--acks", choices=["all", "1"], default="all")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    history: dict[str, Any] = {
        "acked": [],
        "failed": [],
        "seen": [],
        "attempts": [],
        "acks": args.acks,
    }
    create_topic(args.bootstrap, 120)
    Path(f"{args.out}.ready").touch()
    reader = Reader(args.bootstrap)
    reader.start()
    producer = produce(args.bootstrap, args.acks, args.duration, history)
    healed = Path(f"{args.out}.healed")
    while not healed.exists():
        producer.poll(0.1)
    history["unflushed"] = producer.flush(90)
    time.sleep(2.0)
    reader.stop_event.set()
    reader.join(30)
    history["seen"] = reader.seen
    history["final"], history["high"], history["final_complete"] = final_read(args.bootstrap, 90)
    args.out.write_text(json.dumps(history))


if __name__ == "__main__":
    main()
