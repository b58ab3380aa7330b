"""Partitions' high watermarks wherever they are led, for a share group's lag (KIP-1226).

The group coordinator describes the lag of every partition the group has state for, and the
leaders of those partitions are often other brokers. A partition led here answers from its
log; the others are asked of their leaders with one ListOffsets (LATEST, read_uncommitted:
the high watermark) per leader, as a consumer would. A partition whose leader is unknown or
does not answer has no high watermark here, and its lag stays unknown (-1).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kbroker.inter_broker import BrokerConnections
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages import list_offsets_request

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

LATEST_TIMESTAMP = -1
# The id a consumer sends in ListOffsets: not a replica.
CONSUMER_REPLICA_ID = -1

Key = tuple[str, int]


class LeaderEndOffsets:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._connections = BrokerConnections(broker, f"share-lag-{broker.config.broker_id}")

    async def high_watermarks(self, wanted: Iterable[Key]) -> dict[Key, int]:
        """The high watermark of each partition that could be told."""
        found: dict[Key, int] = {}
        by_leader: dict[int, list[Key]] = {}
        for topic, index in wanted:
            local = self._broker.partition(topic, index)
            if local is not None and local.is_leader:
                found[(topic, index)] = local.high_watermark
                continue
            info = self._broker.metadata.topic(topic)
            if info is None or not 0 <= index < len(info.partitions):
                continue
            leader = info.partitions[index].leader
            if leader >= 0 and leader != self._broker.config.broker_id:
                by_leader.setdefault(leader, []).append((topic, index))
        for answers in await asyncio.gather(
            *(self._ask(leader, keys) for leader, keys in by_leader.items())
        ):
            found.update(answers)
        return found

    async def _ask(self, leader: int, keys: list[Key]) -> dict[Key, int]:
        topics: dict[str, list[int]] = {}
        for topic, index in keys:
            topics.setdefault(topic, []).append(index)
        request = list_offsets_request.ListOffsetsRequest(
            replica_id=CONSUMER_REPLICA_ID,
            isolation_level=0,
            topics=[
                list_offsets_request.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        list_offsets_request.ListOffsetsPartition(
                            partition_index=index, timestamp=LATEST_TIMESTAMP
                        )
                        for index in indexes
                    ],
                )
                for topic, indexes in topics.items()
            ],
        )
        try:
            connection = await self._connections.get(leader)
            if connection is None:
                return {}
            response, _ = await connection.request(ApiKey.LIST_OFFSETS, request)
        except (OSError, TimeoutError, KafkaError) as exc:
            log.info("high watermarks from broker %d: %s", leader, exc)
            await self._connections.drop(leader)
            return {}
        return {
            (topic.name, p.partition_index): p.offset
            for topic in response.topics
            for p in topic.partitions
            if p.error_code == ErrorCode.NONE and p.offset >= 0
        }

    async def close(self) -> None:
        await self._connections.close()
