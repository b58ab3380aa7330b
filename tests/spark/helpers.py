"""Producing and reading back test data with kbroker's data client."""

from __future__ import annotations

from kbroker.data_client import DataClient
from wire.records.record import Record

BASE_TS = 1_700_000_000_000


def make_topic(
    bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    with DataClient(bootstrap) as client:
        client.create_topics({topic: partitions}, configs=configs)


def produce_values(
    bootstrap: str,
    topic: str,
    partitions: int,
    per_partition: int,
    *,
    first: int = 0,
    batch: int = 7,
) -> dict[tuple[int, int], bytes]:
    """Values ``p<partition>-<n>`` for n in [first, first + per_partition), keys ``k<n>``,
    timestamps BASE_TS + n; returns (partition, offset) -> value assuming the partitions held
    ``first`` records each before."""
    produced: dict[tuple[int, int], bytes] = {}
    with DataClient(bootstrap) as client:
        for p in range(partitions):
            numbers = list(range(first, first + per_partition))
            for i in range(0, len(numbers), batch):
                chunk = numbers[i : i + batch]
                records = [
                    Record(
                        0, BASE_TS + n, f"k{n}".encode(), f"p{p}-{n}".encode(), [("n", b"%d" % n)]
                    )
                    for n in chunk
                ]
                base = client.produce((topic, p), records)
                for j, n in enumerate(chunk):
                    produced[(p, base + j)] = f"p{p}-{n}".encode()
    return produced
