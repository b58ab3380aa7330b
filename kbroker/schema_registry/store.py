"""Where the registry keeps its state: the compacted topic ``_schemas`` (one partition).

Two stores, one state (kbroker/schema_registry/state.py) built from the topic's records:

- ``BrokerStore``, the registry inside a broker. The broker leading ``_schemas``-0 is the
  registry's only writer: it loads the partition through the broker's internal-topic machinery
  (kbroker/state_topic.py, as ``__consumer_offsets`` and ``__transaction_state`` are: every
  committed record replayed when leadership arrives, writes appended with acks=all and applied
  once the ISR has them). Appending to its own replica is what fences a deposed leader: once
  another broker leads, this one's append fails, so two brokers never give out the same id.
  Every other broker follows the topic as a consumer (``Tailer``) and serves reads from what it
  has read; its writes go to the leader (the HTTP shell forwards them).
- ``ClientStore``, the registry beside any Kafka-compatible cluster (``kbroker
  schema-registry``): it creates ``_schemas`` if missing, follows it as a consumer and appends
  with acks=all. It is the only writer there: run one such registry per cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from kbroker.client import KafkaClient
from kbroker.client_core.fetched import decode_fetched
from kbroker.client_core.metadata import TopicPartition
from kbroker.client_core.requests import (
    create_topics_request,
    fetch_request,
    produce_answer,
    produce_request,
)
from kbroker.schema_registry import errors
from kbroker.schema_registry.records import SCHEMAS_TOPIC
from kbroker.schema_registry.state import Record, RegistryState
from kbroker.state_topic import StateTopic, StateTopicSettings
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.records.batch import BatchHeader
from wire.records.record import Record as LogRecord
from wire.records.record import build_batch

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

PARTITION: TopicPartition = (SCHEMAS_TOPIC, 0)
FETCH_MAX_BYTES = 4 << 20
FETCH_WAIT_MS = 500
RETRY_SECONDS = 0.5
# Fetch v13+ names topics by id; the tailer names ``_schemas`` by name.
FETCH_BY_NAME_MAX_VERSION = 12
# Confluent's defaults for the topic (kafkastore.topic.replication.factor, compaction).
TOPIC_CONFIGS = {"cleanup.policy": "compact"}


class SchemaStore(Protocol):
    state: RegistryState

    def is_writer(self) -> bool: ...

    async def write(self, records: Sequence[Record]) -> None:
        """Append with acks=all and apply to ``state``; RegistryError on failure."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Tailer:
    """Follows ``_schemas``-0 as a consumer, applying each record past ``position()`` (the
    offset of the last record applied)."""

    def __init__(
        self,
        client: KafkaClient,
        apply: Callable[[int, bytes | None, bytes | None], None],
        position: Callable[[], int],
    ) -> None:
        self._client = client
        self._apply = apply
        self._position = position
        self._task: asyncio.Task[None] | None = None
        # The partition's high watermark at the last fetch (-1: not fetched yet).
        self.high_watermark = -1
        self.progress = asyncio.Event()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def caught_up(self) -> bool:
        return self.high_watermark >= 0 and self._position() + 1 >= self.high_watermark

    async def _run(self) -> None:
        while True:
            try:
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, KafkaError, ConnectionError) as exc:
                log.debug("_schemas tailer: %s", exc)
                self._client.cluster.invalidate_leader(PARTITION)
                await asyncio.sleep(RETRY_SECONDS)

    async def _fetch_once(self) -> None:
        address = self._client.cluster.leader_address(PARTITION)
        if address is None:
            await self._client.metadata([SCHEMAS_TOPIC])
            address = self._client.cluster.leader_address(PARTITION)
            if address is None:
                await asyncio.sleep(RETRY_SECONDS)
                return
        connection = await self._client.connection(address)
        offset = self._position() + 1
        request = fetch_request(PARTITION, offset, FETCH_MAX_BYTES, FETCH_WAIT_MS)
        response, _ = await connection.request(
            ApiKey.FETCH, request, highest=FETCH_BY_NAME_MAX_VERSION
        )
        for topic in response.responses:
            for partition in topic.partitions:
                error = ErrorCode(partition.error_code)
                if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    # Nothing below the log start is left to read.
                    self._apply(partition.log_start_offset - 1, None, None)
                    return
                if error != ErrorCode.NONE:
                    raise KafkaError(error, "fetch _schemas")
                records, _ = decode_fetched(partition.records or b"", offset)
                for record in records:
                    self._apply(record.offset, record.key, record.value)
                self.high_watermark = partition.high_watermark
                self.progress.set()
                self.progress.clear()

    async def wait_caught_up(self, at_least: int, timeout: float) -> None:
        """Until ``position()`` is at least ``at_least`` (TimeoutError after ``timeout``)."""
        async with asyncio.timeout(timeout):
            while self._position() < at_least:
                await self.progress.wait()


class _Loader:
    """Builds a fresh state from the partition's batches while this broker loads it."""

    def __init__(self) -> None:
        self.state = RegistryState()

    def apply_batch(self, header: BatchHeader, records: list[LogRecord]) -> None:
        if header.is_control:
            self.state.apply(header.next_offset - 1, None, None)
            return
        for record in records:
            self.state.apply(record.offset, record.key, record.value)


class BrokerStore:
    """The registry of a broker (see the module docstring)."""

    def __init__(self, broker: Broker, client: KafkaClient, replication_factor: int) -> None:
        self._broker = broker
        config = broker.config
        self.state = RegistryState()
        self.topic = StateTopic(
            broker,
            StateTopicSettings(
                name=SCHEMAS_TOPIC,
                num_partitions=1,
                replication_factor=replication_factor,
                segment_bytes=config.get("offsets.topic.segment.bytes"),
                min_insync_replicas=None,
                write_timeout_ms=config.get("request.timeout.ms"),
            ),
            self,
        )
        self._client = client
        self._tailer = Tailer(client, self._apply, lambda: self.state.offset)
        self._leading = False
        self._started = False

    # StateOwner: the broker leads _schemas-0 from complete_load to unload.

    def begin_load(self, index: int) -> _Loader:
        self._leading = False
        asyncio.get_running_loop().create_task(self._tailer.stop())
        return _Loader()

    def complete_load(self, index: int, loader: _Loader) -> None:  # type: ignore[override]
        self.state = loader.state
        self._leading = True
        log.info("schema registry: leading _schemas (%d schemas)", len(self.state.schemas))

    def unload(self, index: int) -> None:
        self._leading = False
        if self._started:
            self._tailer.start()

    def _apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        if not self._leading and offset > self.state.offset:
            self.state.apply(offset, key, value)

    def is_writer(self) -> bool:
        return self._leading

    def leader(self) -> int | None:
        """The broker id leading ``_schemas``-0, if known."""
        topic = self._broker.metadata.topic(SCHEMAS_TOPIC)
        if topic is None or not topic.partitions or topic.partitions[0].leader < 0:
            return None
        return topic.partitions[0].leader

    async def start(self) -> None:
        self._started = True
        await self.topic.start()
        if not self._leading and not self.topic.loading:
            self._tailer.start()

    async def stop(self) -> None:
        self._started = False
        await self._tailer.stop()
        await self.topic.stop()
        await self._client.close()

    async def write(self, records: Sequence[Record]) -> None:
        if not self._leading:
            raise errors.forwarding_error("this broker does not lead _schemas")
        pending = self.topic.start_write(0, list(records))
        if isinstance(pending, ErrorCode):
            raise errors.store_error(pending.name)
        error = await self.topic.finish_write(pending)
        if error != ErrorCode.NONE:
            raise errors.store_error(error.name)
        first = pending.last_offset - len(records) + 1
        for index, (key, value) in enumerate(records):
            self.state.apply(first + index, key, value)


class ClientStore:
    """The registry beside a cluster (see the module docstring)."""

    def __init__(self, client: KafkaClient, replication_factor: int, timeout: float) -> None:
        self.state = RegistryState()
        self._client = client
        self._replication_factor = replication_factor
        self._timeout = timeout
        self._tailer = Tailer(client, self.state.apply, lambda: self.state.offset)

    def is_writer(self) -> bool:
        return True

    async def start(self) -> None:
        await self._ensure_topic()
        self._tailer.start()
        async with asyncio.timeout(self._timeout):
            while not self._tailer.caught_up():
                await self._tailer.progress.wait()
        log.info("schema registry: %d schemas read from _schemas", len(self.state.schemas))

    async def stop(self) -> None:
        await self._tailer.stop()
        await self._client.close()

    async def _ensure_topic(self) -> None:
        metadata = await self._client.metadata([SCHEMAS_TOPIC])
        for topic in metadata.topics:
            if topic.name == SCHEMAS_TOPIC and topic.error_code == ErrorCode.NONE:
                return
        alive = len(self._client.brokers)
        factor = min(self._replication_factor, max(alive, 1))
        request = create_topics_request(
            {SCHEMAS_TOPIC: 1}, factor, TOPIC_CONFIGS, int(self._timeout * 1000)
        )
        connection = await self._client.any_connection()
        response, _ = await connection.request(ApiKey.CREATE_TOPICS, request)
        for result in response.topics:
            error = ErrorCode(result.error_code)
            if error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise KafkaError(error, f"cannot create {SCHEMAS_TOPIC}")
        log.info("created %s (replication factor %d)", SCHEMAS_TOPIC, factor)

    async def write(self, records: Sequence[Record]) -> None:
        batch = build_batch(
            [LogRecord(offset=i, timestamp=-1, key=k, value=v) for i, (k, v) in enumerate(records)]
        )
        try:
            address = self._client.cluster.leader_address(PARTITION)
            if address is None:
                await self._client.metadata([SCHEMAS_TOPIC])
                address = self._client.cluster.leader_address(PARTITION)
            if address is None:
                raise errors.store_error("no leader for _schemas")
            connection = await self._client.connection(address)
            request = produce_request(PARTITION, batch, int(self._timeout * 1000))
            response, _ = await connection.request(ApiKey.PRODUCE, request)
            answer, base_offset = produce_answer(response, PARTITION)
            if answer.error != ErrorCode.NONE:
                self._client.cluster.invalidate_leader(PARTITION)
                raise errors.store_error(answer.error.name)
            await self._tailer.wait_caught_up(base_offset + len(records) - 1, self._timeout)
        except (OSError, TimeoutError, KafkaError, ConnectionError) as exc:
            self._client.cluster.invalidate_leader(PARTITION)
            raise errors.store_error(str(exc) or type(exc).__name__) from exc
