"""Acceptance: acknowledged records survive kill -9 of the broker, twice.

A confluent-kafka producer (acks=all, idempotent) writes numbered records to a one-partition
topic while the broker is SIGKILLed and restarted on the same log directory. Afterwards the
whole partition is read back: offsets run from 0 with no gap, every acknowledged record sits
at the offset its delivery report gave, no record is torn (CRC-checked reads end cleanly),
and, since the producer is idempotent, there is no duplicate and nothing out of order.
"""

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "kill9"
KILLS = 2


def value_of(i: int) -> bytes:
    return b"record-%09d" % i


class NumberedWriter(threading.Thread):
    """Produces value_of(0), value_of(1), ... until stopped; records what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.fatal: list[KafkaError] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "error_cb": self._on_error,
            }
        )
        self.produced = 0
        self.acked: list[tuple[int, bytes]] = []
        self.failed: list[tuple[KafkaError, bytes]] = []
        self._halt = threading.Event()

    def _on_error(self, err: KafkaError) -> None:
        # Transport errors are expected while the broker is down; fatal ones are not.
        if err.fatal():
            self.fatal.append(err)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed.append((err, msg.value()))
        else:
            self.acked.append((msg.offset(), msg.value()))

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.producer.produce(
                    TOPIC, value=value_of(self.produced), partition=0, on_delivery=self._on_delivery
                )
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.produced += 1
            # About 20k records/s at most: enough load, a log that stays quick to verify.
            if self.produced % 200 == 0:
                self.producer.poll(0.01)
            else:
                self.producer.poll(0)

    def finish(self, timeout: float) -> int:
        """Stop producing, wait for every outstanding delivery; returns the undelivered count."""
        self._halt.set()
        self.join()
        return self.producer.flush(timeout)


def read_partition(bootstrap: str) -> list[Message]:
    """Every record of the partition, from offset 0 to the high watermark, CRC-checked."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kill9-verify",
            "enable.auto.commit": False,
            "check.crcs": True,
            "enable.partition.eof": True,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        assert low == 0, f"log start offset {low}"
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        out: list[Message] = []
        deadline = time.monotonic() + 120
        while len(out) < high:
            assert time.monotonic() < deadline, f"read {len(out)} of {high} records"
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    continue
                assert err is None, f"consumer error at offset ~{len(out)}: {err}"
                out.append(msg)
        return out
    finally:
        consumer.close()


def wait_for_acks(writer: NumberedWriter, more_than: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(writer.acked) <= more_than:
        assert time.monotonic() < deadline, f"no new acknowledgement within {timeout} s"
        time.sleep(0.05)


def test_acknowledged_records_survive_kill9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "broker")
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=20)

        writer = NumberedWriter(broker.bootstrap)
        writer.start()
        acked_before_kill: list[int] = []
        for _ in range(KILLS):
            wait_for_acks(writer, len(writer.acked), timeout=30)
            time.sleep(3.0)
            acked_before_kill.append(len(writer.acked))
            broker.kill()
            # Keep writing into the producer's queue while the broker is dead.
            time.sleep(0.5)
            broker.start()
            # Acknowledgements resume after the restart.
            wait_for_acks(writer, acked_before_kill[-1], timeout=60)
        time.sleep(1.0)
        undelivered = writer.finish(timeout=90)

        assert not writer.fatal, f"fatal producer errors: {writer.fatal}"
        assert undelivered == 0, f"{undelivered} records never delivered"
        assert not writer.failed, f"failed deliveries, e.g. {writer.failed[:5]}"
        assert acked_before_kill[0] > 100, "too little was written before the first kill"

        log = read_partition(broker.bootstrap)
        offsets = [m.offset() for m in log]
        assert offsets == list(range(len(log))), "offsets are not contiguous from 0"
        values = [m.value() for m in log]
        for offset, value in writer.acked:
            assert offset < len(values), f"acknowledged offset {offset} is missing"
            assert values[offset] == value, f"offset {offset}: {values[offset]!r} != {value!r}"
        assert len(set(values)) == len(values), "duplicate records"
        assert values == [value_of(i) for i in range(writer.produced)], (
            "the log is not exactly the produced sequence"
        )
    finally:
        broker.stop()
