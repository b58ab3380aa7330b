"""Transactional produce against idempotent produce, confluent-kafka (librdkafka) on one
partition: the cost of transactions (AddPartitionsToTxn, EndTxn, the markers) per record.

Starts a kbroker process on a temporary log directory and, alternating the two modes for
--repeat passes each, sends --records records of --record-size bytes: once with an
idempotent producer (acks=all), once with a transactional producer committing every
--txn-records records. Prints each pass and the median of each mode in records/s, and the
transactional median as a fraction of the idempotent one (the issue's target: at least 0.8
with 1,000-record transactions).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from compat_tests.broker_process import BrokerProcess  # noqa: E402

PRODUCER_SETTINGS = {"linger.ms": 5, "batch.size": 262_144, "acks": "all"}


def idempotent_pass(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER_SETTINGS}
    )
    start = time.perf_counter()
    for _ in range(records):
        _produce(producer, topic, value)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - start)


def transactional_pass(
    bootstrap: str, topic: str, records: int, value: bytes, per_txn: int, txn_id: str
) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, **PRODUCER_SETTINGS}
    )
    producer.init_transactions(30)
    start = time.perf_counter()
    for first in range(0, records, per_txn):
        producer.begin_transaction()
        for _ in range(min(per_txn, records - first)):
            _produce(producer, topic, value)
        producer.commit_transaction(60)
    return records / (time.perf_counter() - start)


def _produce(producer: Producer, topic: str, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value, partition=0)
            return
        except BufferError:
            producer.poll(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--txn-records", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    value = b"x" * args.record_size
    results: dict[str, list[float]] = {"idempotent": [], "transactional": []}
    with tempfile.TemporaryDirectory() as work:
        with BrokerProcess(Path(work) / "broker") as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            topics = [f"bench-{mode}-{n}" for n in range(args.repeat) for mode in results]
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
                future.result(30)
            for n in range(args.repeat):
                rate = idempotent_pass(
                    broker.bootstrap, f"bench-idempotent-{n}", args.records, value
                )
                results["idempotent"].append(rate)
                print(f"pass {n + 1} idempotent:    {rate:10,.0f} records/s", flush=True)
                rate = transactional_pass(
                    broker.bootstrap,
                    f"bench-transactional-{n}",
                    args.records,
                    value,
                    args.txn_records,
                    f"bench-tx-{n}",
                )
                results["transactional"].append(rate)
                print(f"pass {n + 1} transactional: {rate:10,.0f} records/s", flush=True)
    medians = {mode: statistics.median(rates) for mode, rates in results.items()}
    print(
        f"median: idempotent {medians['idempotent']:,.0f} records/s, transactional "
        f"({args.txn_records} records per transaction) {medians['transactional']:,.0f} "
        f"records/s, ratio {medians['transactional'] / medians['idempotent']:.2f}"
    )


if __name__ == "__main__":
    main()
