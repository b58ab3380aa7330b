"""The persister: how partition leaders and the group coordinator reach share coordinators.

Each share partition's key goes to its share coordinator, found as FindCoordinator (key type
2) finds it: the leader of the ``__share_group_state`` partition the key hashes to, creating
the topic on first use. When that is this broker the coordinator is called directly;
otherwise the request goes over the inter-broker listener (kbroker/inter_broker.py), one
request per coordinator for all the partitions of a call, as Kafka's persister batches them.

A partition whose coordinator answers NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
COORDINATOR_NOT_AVAILABLE, or cannot be reached, is looked up and sent again, with Kafka's
persister's back-off (1 s, doubling, +-20 %, at most 30 s) and at most 5 attempts; after
that its last error is the answer. Every other error (FENCED_STATE_EPOCH,
FENCED_LEADER_EPOCH, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION ...) is answered at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kbroker.inter_broker import BrokerConnections
from kbroker.share.persister_api import PersisterError, SharePartitionState, StateBatch
from kbroker.share.state_records import ShareStateKey
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages import delete_share_group_state_request as delete_request
from wire.messages import initialize_share_group_state_request as initialize_request
from wire.messages import read_share_group_state_request as read_request
from wire.messages import read_share_group_state_summary_request as summary_request
from wire.messages import write_share_group_state_request as write_request

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

R = TypeVar("R")
P = TypeVar("P")
TopicPartition = tuple[uuid.UUID, int]

RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
# Kafka's PersisterStateManager: REQUEST_BACKOFF_MS, REQUEST_BACKOFF_MAX_MS,
# MAX_FIND_COORD_ATTEMPTS, and its jitter.
BACKOFF_MS = 1_000
MAX_BACKOFF_MS = 30_000
ATTEMPTS = 5
JITTER = 0.2


@dataclass(frozen=True, slots=True)
class _Api(Generic[P, R]):
    """One share-state API: its local call, its request for a group's partitions, and how its
    answer is read."""

    key: ApiKey
    local: Callable[[ShareStateKey, P], Awaitable[R]]
    request: Callable[[str, dict[uuid.UUID, list[tuple[int, P]]]], Any]
    answer: Callable[[Any], R]


def _batches(batches: Sequence[Any]) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in batches
    )


class SharePersisterClient:
    """The ``SharePersister`` of this broker (kbroker/share/persister_api.py)."""

    def __init__(
        self,
        broker: Broker,
        *,
        attempts: int = ATTEMPTS,
        backoff_ms: int = BACKOFF_MS,
        max_backoff_ms: int = MAX_BACKOFF_MS,
    ) -> None:
        self._broker = broker
        self._connections = BrokerConnections(broker, f"share-persister-{broker.config.broker_id}")
        self._attempts = attempts
        self._backoff_ms = backoff_ms
        self._max_backoff_ms = max_backoff_ms
        coordinator = broker.share_coordinator
        self._initialize: _Api[tuple[int, int], None] = _Api(
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            lambda key, p: coordinator.initialize(key, *p),
            lambda group, topics: initialize_request.InitializeShareGroupStateRequest(
                group_id=group,
                topics=[
                    initialize_request.InitializeStateData(
                        topic_id=topic_id,
                        partitions=[
                            initialize_request.PartitionData(
                                partition=index, state_epoch=epoch, start_offset=start
                            )
                            for index, (epoch, start) in parts
                        ],
                    )
                    for topic_id, parts in topics.items()
                ],
            ),
            lambda p: None,
        )
        self._read: _Api[int, SharePartitionState] = _Api(
            ApiKey.READ_SHARE_GROUP_STATE,
            coordinator.read,
            lambda group, topics: read_request.ReadShareGroupStateRequest(
                group_id=group,
                topics=[
                    read_request.ReadStateData(
                        topic_id=topic_id,
                        partitions=[
                            read_request.PartitionData(partition=index, leader_epoch=epoch)
                            for index, epoch in parts
                        ],
                    )
                    for topic_id, parts in topics.items()
                ],
            ),
            lambda p: SharePartitionState(p.state_epoch, p.start_offset, _batches(p.state_batches)),
        )
        self._write: _Api[SharePartitionState, None] = _Api(
            ApiKey.WRITE_SHARE_GROUP_STATE,
            coordinator.write,
            lambda group, topics: write_request.WriteShareGroupStateRequest(
                group_id=group,
                topics=[
                    write_request.WriteStateData(
                        topic_id=topic_id,
                        partitions=[
                            write_request.PartitionData(
                                partition=index,
                                state_epoch=state.state_epoch,
                                leader_epoch=state.leader_epoch,
                                start_offset=state.start_offset,
                                delivery_complete_count=state.delivery_complete_count,
                                state_batches=[
                                    write_request.StateBatch(
                                        first_offset=b.first_offset,
                                        last_offset=b.last_offset,
                                        delivery_state=b.delivery_state,
                                        delivery_count=b.delivery_count,
                                    )
                                    for b in state.batches
                                ],
                            )
                            for index, state in parts
                        ],
                    )
                    for topic_id, parts in topics.items()
                ],
            ),
            lambda p: None,
        )
        self._delete: _Api[None, None] = _Api(
            ApiKey.DELETE_SHARE_GROUP_STATE,
            lambda key, p: coordinator.delete(key),
            lambda group, topics: delete_request.DeleteShareGroupStateRequest(
                group_id=group,
                topics=[
                    delete_request.DeleteStateData(
                        topic_id=topic_id,
                        partitions=[delete_request.PartitionData(partition=i) for i, _ in parts],
                    )
                    for topic_id, parts in topics.items()
                ],
            ),
            lambda p: None,
        )
        self._summary: _Api[int, SharePartitionState] = _Api(
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            lambda key, p: coordinator.read_summary(key),
            lambda group, topics: summary_request.ReadShareGroupStateSummaryRequest(
                group_id=group,
                topics=[
                    summary_request.ReadStateSummaryData(
                        topic_id=topic_id,
                        partitions=[
                            summary_request.PartitionData(partition=index, leader_epoch=epoch)
                            for index, epoch in parts
                        ],
                    )
                    for topic_id, parts in topics.items()
                ],
            ),
            lambda p: SharePartitionState(
                p.state_epoch, p.start_offset, (), p.leader_epoch, p.delivery_complete_count
            ),
        )

    async def close(self) -> None:
        await self._connections.close()

    # --- SharePersister -------------------------------------------------------------------

    async def initialize(
        self, group_id: str, partitions: Sequence[tuple[uuid.UUID, int, int, int]]
    ) -> dict[TopicPartition, ErrorCode]:
        answers = await self._call(
            self._initialize,
            group_id,
            {(topic_id, index): (epoch, start) for topic_id, index, epoch, start in partitions},
        )
        return {tp: _code(answer) for tp, answer in answers.items()}

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> SharePartitionState:
        answer = (await self._call(self._read, group_id, {(topic_id, partition): leader_epoch}))[
            (topic_id, partition)
        ]
        if isinstance(answer, KafkaError):
            raise PersisterError(answer.code, answer.message or "")
        return answer

    async def write(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state: SharePartitionState
    ) -> None:
        answer = (await self._call(self._write, group_id, {(topic_id, partition): state}))[
            (topic_id, partition)
        ]
        if isinstance(answer, KafkaError):
            raise PersisterError(answer.code, answer.message or "")

    async def delete(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        answers = await self._call(self._delete, group_id, dict.fromkeys(partitions))
        return {tp: _code(answer) for tp, answer in answers.items()}

    async def read_summary(
        self, group_id: str, partitions: Sequence[TopicPartition], leader_epoch: int = -1
    ) -> dict[TopicPartition, SharePartitionState | ErrorCode]:
        answers = await self._call(self._summary, group_id, dict.fromkeys(partitions, leader_epoch))
        return {
            tp: answer.code if isinstance(answer, KafkaError) else answer
            for tp, answer in answers.items()
        }

    # --- routing and retries --------------------------------------------------------------

    async def _call(
        self, api: _Api[P, R], group_id: str, wanted: dict[TopicPartition, P]
    ) -> dict[TopicPartition, R | KafkaError]:
        """Each partition's answer, its coordinator found again and asked again while the
        answer is retriable, within the attempts."""
        answers: dict[TopicPartition, R | KafkaError] = {}
        pending = dict(wanted)
        for attempt in range(self._attempts):
            if attempt:
                await asyncio.sleep(self._backoff(attempt) / 1000)
            answers.update(await self._attempt(api, group_id, pending))
            pending = {tp: p for tp, p in pending.items() if _code(answers[tp]) in RETRIABLE}
            if not pending:
                break
        if pending:
            log.warning(
                "share state of %d partitions of group %s: no coordinator after %d attempts",
                len(pending),
                group_id,
                self._attempts,
            )
        return answers

    def _backoff(self, attempt: int) -> float:
        base = min(self._backoff_ms * 2 ** (attempt - 1), self._max_backoff_ms)
        return base * random.uniform(1 - JITTER, 1 + JITTER)

    async def _attempt(
        self, api: _Api[P, R], group_id: str, pending: dict[TopicPartition, P]
    ) -> dict[TopicPartition, R | KafkaError]:
        me = self._broker.config.broker_id
        answers: dict[TopicPartition, R | KafkaError] = {}
        by_broker: dict[int, dict[TopicPartition, P]] = {}
        for tp, payload in pending.items():
            key = ShareStateKey(group_id, *tp)
            error, coordinator = await self._broker.share_coordinator.find_coordinator(key)
            if coordinator is None:
                answers[tp] = KafkaError(error)
            else:
                by_broker.setdefault(coordinator.broker_id, {})[tp] = payload
        calls = [
            self._local(api, group_id, parts)
            if broker_id == me
            else self._remote(api, group_id, broker_id, parts)
            for broker_id, parts in by_broker.items()
        ]
        for result in await asyncio.gather(*calls):
            answers.update(result)
        return answers

    async def _local(
        self, api: _Api[P, R], group_id: str, parts: dict[TopicPartition, P]
    ) -> dict[TopicPartition, R | KafkaError]:
        async def one(tp: TopicPartition, payload: P) -> R | KafkaError:
            try:
                return await api.local(ShareStateKey(group_id, *tp), payload)
            except KafkaError as exc:
                return exc

        results = await asyncio.gather(*(one(tp, p) for tp, p in parts.items()))
        return dict(zip(parts, results, strict=True))

    async def _remote(
        self, api: _Api[P, R], group_id: str, broker_id: int, parts: dict[TopicPartition, P]
    ) -> dict[TopicPartition, R | KafkaError]:
        topics: dict[uuid.UUID, list[tuple[int, P]]] = {}
        for (topic_id, index), payload in parts.items():
            topics.setdefault(topic_id, []).append((index, payload))
        try:
            connection = await self._connections.get(broker_id)
            if connection is None:
                raise ConnectionError(f"broker {broker_id} is not registered")
            response, _ = await connection.request(api.key, api.request(group_id, topics))
        except (OSError, TimeoutError, KafkaError) as exc:
            log.info("share coordinator %d unreachable: %s", broker_id, exc)
            await self._connections.drop(broker_id)
            return dict.fromkeys(parts, KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        answers: dict[TopicPartition, R | KafkaError] = dict.fromkeys(
            parts, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition")
        )
        for result in response.results:
            for p in result.partitions:
                tp = (result.topic_id, p.partition)
                if tp not in answers:
                    continue
                answers[tp] = (
                    api.answer(p)
                    if p.error_code == ErrorCode.NONE
                    else KafkaError(_known(p.error_code), p.error_message)
                )
        return answers


def _code(answer: object) -> ErrorCode:
    return answer.code if isinstance(answer, KafkaError) else ErrorCode.NONE


def _known(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
