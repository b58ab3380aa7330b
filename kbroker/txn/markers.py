"""The transaction coordinator's side of WriteTxnMarkers: sending a transaction's commit or
abort markers to the leader of each of its partitions, over the inter-broker listener.

A marker is retried until the leader of the moment has it: the leader is looked up again
before each round, so markers follow a partition whose leader moved. As in Kafka's
``TransactionMarkerChannelManager``, a partition whose topic no longer exists is dropped, and
a marker refused because a newer coordinator or producer epoch wrote one already
(TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH) is given up: another coordinator
owns the transaction now. Every other error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT, a lost connection, ...) is retried with a growing backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kbroker.inter_broker import BrokerConnections
from kbroker.txn.log_records import TopicPartition
from kbroker.txn.state_machine import SendMarkers
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from wire.messages.write_txn_markers_response import WriteTxnMarkersResponse

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

INITIAL_BACKOFF_SECONDS = 0.02
MAX_BACKOFF_SECONDS = 1.0
# Outcomes after which a marker is not sent again.
_GIVE_UP = {ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH}


class MarkerSender:
    """Sends markers to partition leaders, one connection per broker."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._connections = BrokerConnections(
            broker, f"kbroker-txn-coordinator-{broker.config.broker_id}"
        )

    async def close(self) -> None:
        await self._connections.close()

    async def send(self, markers: SendMarkers, still_wanted: Callable[[], bool]) -> bool:
        """Until every partition has the markers (True), or ``still_wanted`` turns false or a
        partition gives up (False)."""
        remaining = set(markers.partitions)
        backoff = INITIAL_BACKOFF_SECONDS
        while remaining:
            if not still_wanted():
                return False
            by_leader = self._leaders(remaining)
            results = await asyncio.gather(
                *(
                    self._send_to(leader, markers, sorted(partitions))
                    for leader, partitions in by_leader.items()
                    if leader >= 0
                )
            )
            for outcome in results:
                for tp, error in outcome.items():
                    if error == ErrorCode.NONE:
                        remaining.discard(tp)
                    elif error in _GIVE_UP:
                        log.warning(
                            "markers of %s for %s-%d refused: %s",
                            markers.transactional_id,
                            tp[0],
                            tp[1],
                            error.name,
                        )
                        return False
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        return True

    def _leaders(self, partitions: set[TopicPartition]) -> dict[int, set[TopicPartition]]:
        """Partitions by current leader (-1: none now); those of deleted topics are dropped."""
        metadata = self._broker.metadata
        by_leader: dict[int, set[TopicPartition]] = {}
        for tp in list(partitions):
            topic = metadata.topic(tp[0])
            if topic is None or tp[1] >= len(topic.partitions):
                log.info("markers for %s-%d dropped: the partition no longer exists", *tp)
                partitions.discard(tp)
                continue
            by_leader.setdefault(topic.partitions[tp[1]].leader, set()).add(tp)
        return by_leader

    async def _send_to(
        self, leader: int, markers: SendMarkers, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=markers.producer_id,
                    producer_epoch=markers.producer_epoch,
                    transaction_result=markers.commit,
                    topics=[
                        WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                        for name, indexes in topics.items()
                    ],
                    coordinator_epoch=markers.coordinator_epoch,
                    transaction_version=markers.transaction_version,
                )
            ]
        )
        try:
            connection = await self._connections.get(leader)
            if connection is None:
                return {}
            response, _ = await connection.request(ApiKey.WRITE_TXN_MARKERS, request)
        except (OSError, EOFError, TimeoutError, KafkaError, asyncio.IncompleteReadError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            await self._connections.drop(leader)
            return {}
        assert isinstance(response, WriteTxnMarkersResponse)
        outcome: dict[TopicPartition, ErrorCode] = {}
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    outcome[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return outcome
