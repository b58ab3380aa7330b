"""An exactly-once consume-transform-produce loop (confluent-kafka), run as its own process so
that tests can SIGKILL it.

    python -m compat_tests.eos_worker BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID TOTAL

Reads INPUT (every partition, assigned, read_committed) from the group's committed offsets and
writes each record's value, upper-cased, to OUTPUT, in transactions of up to 500 records that
also carry the consumer's positions (send_offsets_to_transaction). ``init_transactions`` comes
first, so a previous incarnation's open transaction is aborted before the offsets are read.
Exits 0 once the committed positions add up to TOTAL.
"""

import sys

from confluent_kafka import Consumer, Producer, TopicPartition

BATCH = 500


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str, total: int) -> int:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    )
    producer.init_transactions(60)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    partitions = consumer.list_topics(source, timeout=30).topics[source].partitions
    committed = consumer.committed(
        [TopicPartition(source, p) for p in sorted(partitions)], timeout=60
    )
    start = [TopicPartition(source, tp.partition, max(tp.offset, 0)) for tp in committed]
    consumer.assign(start)
    # Where each partition stands: position() answers OFFSET_INVALID for a partition this
    # incarnation has not read from yet (one already at its end, say), so keep the last known.
    done = {tp.partition: tp.offset for tp in start}
    while sum(done.values()) < total:
        messages = [m for m in consumer.consume(BATCH, timeout=1.0) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, key=m.key(), value=m.value().upper())
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        done.update((tp.partition, tp.offset) for tp in positions)
    consumer.close()
    return 0


if __name__ == "__main__":
    boot, src, dst, grp, tid, count = sys.argv[1:7]
    sys.exit(main(boot, src, dst, grp, tid, int(count)))
