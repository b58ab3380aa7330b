"""The broker's audit shell: counts the partitions it leads and publishes to ``__audit``.

Every ``audit.publish.interval.ms`` the publisher reads, for each partition led here (topics
whose name starts with ``__`` excepted: they are the brokers' own state), the batches appended
since its last look, below the high watermark, into the partition's PartitionCounter
(kbroker/audit/counter.py), and produces the windows that changed to ``__audit`` (acks=all,
through the brokers' listener as any client would: the partition of ``__audit`` may be led
elsewhere). Counting reads the log behind the produce path instead of sitting in it, so a
Produce costs the same with the audit on; mirrored appends (kbroker/mirror/) land in the same
log and are counted the same way.

A counter starts over from the log start offset when that moved past where it started
(DeleteRecords, retention) or the log was truncated below what it counted; the windows it
had that the recount no longer finds are published as tombstones. A new leader counts the
partition from its log start and publishes every window, the same values the previous
leader published for the records they both had.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from typing import TYPE_CHECKING

from kbroker.audit.counter import PartitionCounter
from kbroker.audit.records import AUDIT_TOPIC, WindowKey, encode_key, encode_value
from kbroker.cli.ops.admin import OpsError, create_topic, leaders, produce
from kbroker.client import KafkaClient
from kbroker.metrics import Exposition
from kbroker.partition import Partition
from wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1 << 20
RECORDS_PER_BATCH = 500
CLIENT_TIMEOUT_SECONDS = 30.0
AUDIT_REPLICATION_FACTOR = 3


class AuditPublisher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.window_ms: int = broker.config.get("audit.window.ms")
        self.interval_s: float = broker.config.get("audit.publish.interval.ms") / 1000
        self._counters: dict[tuple[str, int], PartitionCounter] = {}
        # Key -> value (None: tombstone) not yet acknowledged by __audit's leader.
        self._unpublished: dict[WindowKey, bytes | None] = {}
        self.published_total = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        client: KafkaClient | None = None
        try:
            while True:
                await asyncio.sleep(self.interval_s)
                await self.count()
                if not self._unpublished:
                    continue
                if client is None:
                    client = self._local_client()
                try:
                    await self._publish(client)
                except (OSError, KafkaError, OpsError, TimeoutError) as exc:
                    log.warning("audit: publishing to %s failed, retrying: %s", AUDIT_TOPIC, exc)
                    await client.close()
                    client = None
        finally:
            if client is not None:
                await client.close()

    def _local_client(self) -> KafkaClient:
        broker = self._broker
        me = broker.config.broker_id
        address = next((b.host, b.port) for b in broker.metadata.brokers() if b.broker_id == me)
        return KafkaClient(
            [address],
            client_id="kbroker-audit",
            timeout=CLIENT_TIMEOUT_SECONDS,
            security=broker.inter_broker_security,
        )

    # Counting --------------------------------------------------------------------------

    async def count(self) -> None:
        """Bring every led partition's counter up to its high watermark."""
        led = {
            key: p
            for key, p in list(self._broker.partitions.items())
            if p.is_leader and not key[0].startswith("__")
        }
        for key in set(self._counters) - set(led):
            del self._counters[key]
        for key, partition in led.items():
            try:
                await self._count_partition(partition)
            except (KafkaError, OSError) as exc:
                log.warning("audit: counting %s-%d failed, recounting: %s", *key, exc)
                self._counters.pop(key, None)

    async def _count_partition(self, partition: Partition) -> None:
        log_ = partition.log
        counter = self._counters.get(partition.key)
        vanishing: set[int] = set()
        if counter is None or (
            log_.log_start_offset > counter.start_offset
            or log_.log_end_offset < counter.next_offset
        ):
            if counter is not None:
                vanishing = set(counter.windows)
            counter = PartitionCounter(self.window_ms, log_.log_start_offset)
            self._counters[partition.key] = counter
        high_watermark = partition.high_watermark
        while counter.next_offset < high_watermark:
            region = log_.read(
                counter.next_offset, READ_CHUNK_BYTES, max_offset=high_watermark, min_one_batch=True
            )
            if region is None:
                break
            counter.add(region.read())
            # A long log (a new leader counts from the log start) is read a chunk at a time
            # between the loop's other work; a truncation meanwhile fails the read and the
            # partition is counted again.
            await asyncio.sleep(0)
        topic, index = partition.key
        for window, count in counter.take_changed().items():
            value = encode_value(count, self.window_ms)
            self._unpublished[WindowKey(topic, index, window)] = value
        for window in vanishing - set(counter.windows):
            self._unpublished[WindowKey(topic, index, window)] = None

    # Publishing ------------------------------------------------------------------------

    async def _publish(self, client: KafkaClient) -> None:
        try:
            partition_leaders = await leaders(client, AUDIT_TOPIC)
        except OpsError as exc:
            if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise
            await self._create_topic(client)
            partition_leaders = await leaders(client, AUDIT_TOPIC)
        pending = dict(self._unpublished)
        by_partition: dict[int, list[tuple[WindowKey, bytes | None]]] = {}
        for key, value in sorted(pending.items()):
            raw = encode_key(key)
            index = zlib.crc32(raw) % len(partition_leaders)
            by_partition.setdefault(index, []).append((key, value))
        for index, entries in by_partition.items():
            for start in range(0, len(entries), RECORDS_PER_BATCH):
                chunk = entries[start : start + RECORDS_PER_BATCH]
                records = [(encode_key(k), v, []) for k, v in chunk]
                await produce(
                    client, AUDIT_TOPIC, index, partition_leaders[index], records, acks=-1
                )
                for key, value in chunk:
                    if self._unpublished.get(key, b"") == value:
                        del self._unpublished[key]
                self.published_total += len(chunk)

    async def _create_topic(self, client: KafkaClient) -> None:
        live = len(self._broker.metadata.brokers())
        try:
            await create_topic(
                client,
                AUDIT_TOPIC,
                1,
                min(AUDIT_REPLICATION_FACTOR, live),
                {"cleanup.policy": "compact"},
            )
        except OpsError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    # Metrics ---------------------------------------------------------------------------

    def expose(self, out: Exposition) -> None:
        out.family(
            "kbroker_audit_windows", "gauge", "Audit windows counted on the partitions led here."
        )
        out.sample(
            "kbroker_audit_windows", (), sum(len(c.windows) for c in self._counters.values())
        )
        out.family("kbroker_audit_published_total", "counter", "Window counts written to __audit.")
        out.sample("kbroker_audit_published_total", (), self.published_total)
