"""A transactional confluent-kafka producer run as its own process, so that a test can kill
it together with the broker at any point of a commit.

    python -m tests.txn.txn_writer BOOTSTRAP TOPIC TRANSACTIONAL_ID ROUND [--leave-open]

Writes transactions of PER_TXN records ("ROUND-TXN-I") to partition 0 of TOPIC, one after
another, and prints "committed ROUND-TXN" once commit_transaction returned, until killed.
With --leave-open it writes one transaction's records, prints "written ROUND-0" once the log
has them, and waits without committing.
"""

import sys
import time

from confluent_kafka import Producer

PER_TXN = 50
# Short, so that a transaction left open by the crash is aborted soon after the restart.
TRANSACTION_TIMEOUT_MS = 4000


def main(bootstrap: str, topic: str, transactional_id: str, round_: str, leave_open: bool) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "linger.ms": 2,
        }
    )
    producer.init_transactions(30)
    txn = 0
    while True:
        producer.begin_transaction()
        for i in range(PER_TXN):
            producer.produce(topic, value=f"{round_}-{txn}-{i}".encode(), partition=0)
        if leave_open:
            producer.flush(30)
            print(f"written {round_}-{txn}", flush=True)
            time.sleep(3600)
        producer.commit_transaction(30)
        print(f"committed {round_}-{txn}", flush=True)
        txn += 1


if __name__ == "__main__":
    main(*sys.argv[1:5], leave_open="--leave-open" in sys.argv[5:])
