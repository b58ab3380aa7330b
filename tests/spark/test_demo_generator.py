"""The demo's page-view generator: keyed like Kafka's partitioner, clock carried over runs."""

from __future__ import annotations

import json
from typing import Any

from kbroker.client_core.partitioner import partition_for_key
from kbroker.data_client import LATEST, DataClient
from spark_conn.demo import EVENT_SPACING_MS, MAX_DISORDER_MS, generate, last_event_time
from tests.spark.helpers import make_topic


def test_generator_partitions_by_user_and_continues_its_clock(broker: Any, unique: str) -> None:
    make_topic(broker.bootstrap, unique, 3)
    with DataClient(broker.bootstrap) as client:
        assert last_event_time(client, unique) == (None, 0)
        first, last = generate(client, unique, 3, 50)
        assert last - first == 49 * EVENT_SPACING_MS
        newest, count = last_event_time(client, unique)
        assert count == 50 and newest is not None and last - MAX_DISORDER_MS < newest <= last
        second_first, _ = generate(client, unique, 3, 10)
        assert second_first == newest + EVENT_SPACING_MS
        ends = client.list_offsets([(unique, p) for p in range(3)], LATEST)
        assert sum(ends.values()) == 60
        for topic, partition in ends:
            for record in client.fetch((topic, partition), 0).records:
                event = json.loads(record.value or b"")
                assert record.key == event["user"].encode()
                assert record.timestamp == event["ts"]
                assert partition_for_key(record.key, 3) == partition
