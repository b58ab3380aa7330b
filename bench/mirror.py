"""Mirror topic throughput: a kbroker mirror topic copying a preloaded topic of another kbroker
broker, beside a confluent-kafka consumer and producer pair copying the same topic (the
usual answer without cluster links), alternating in one run.

For each record size and partition count: the source topic is filled with ``--records``
records (a quarter of them above 100 B), then each copier runs until the destination holds
all of them; records/s and MB/s of record payload are printed with the load average (the
machine may be shared). The mirror's time includes starting ``kbroker mirrors create`` (a
Python process, about a second), so short runs understate it.

    python bench/mirror.py [--records 200000] [--sizes 100,1024] [--partitions 1,64]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.mirror_support import end_offsets, mirrors  # noqa: E402


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def wait_total(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    while sum(end_offsets(bootstrap, topic, partitions).values()) < records:
        time.sleep(0.05)


def mirror_copy(source: str, destination: str, topic: str, partitions: int, records: int) -> float:
    started = time.monotonic()
    created = mirrors(
        "create", "--bootstrap-server", destination, "--source-bootstrap", source, "--topic", topic
    )
    assert created.returncode == 0, created.stderr
    wait_total(destination, topic, partitions, records)
    return time.monotonic() - started


def pair_copy(source: str, destination: str, topic: str, partitions: int, records: int) -> float:
    target = f"{topic}-copy"
    admin = AdminClient({"bootstrap.servers": destination})
    admin.create_topics([NewTopic(target, partitions, 1)])[target].result(timeout=60)
    started = time.monotonic()
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": f"copy-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer(
        {"bootstrap.servers": destination, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    consumer.subscribe([topic])
    copied = 0
    while copied < records:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is not None:
                continue
            while True:
                try:
                    producer.produce(
                        target, message.value(), message.key(), partition=message.partition()
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    producer.flush(120)
    consumer.close()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", default="1,64")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as work:
        source = BrokerProcess(Path(work) / "source")
        destination = BrokerProcess(Path(work) / "destination")
        source.start()
        destination.start()
        try:
            print("size  partitions  copier        records/s    MB/s  seconds  load")
            for size in (int(s) for s in args.sizes.split(",")):
                records = args.records if size <= 100 else args.records // 4
                for partitions in (int(p) for p in args.partitions.split(",")):
                    topic = f"bench-{size}-{partitions}"
                    fill(source.bootstrap, topic, partitions, records, size)
                    for name, copier in (
                        ("mirror topic", mirror_copy),
                        ("consumer+prod", pair_copy),
                    ):
                        seconds = copier(
                            source.bootstrap, destination.bootstrap, topic, partitions, records
                        )
                        rate = records / seconds
                        print(
                            f"{size:>4}  {partitions:>10}  {name:<12} {rate:>10,.0f} "
                            f"{rate * size / 1e6:>7.1f}  {seconds:>7.2f}  {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
        finally:
            source.stop()
            destination.stop()


if __name__ == "__main__":
    main()
