"""The loop that reads the cluster every ``interval`` seconds into the console's samples and
keeps the newest snapshot of what list pages show beside live metadata (sizes, rates, lag,
hanging transactions), so that a page over 10,000 partitions and 1,000 groups is rendered
from memory instead of asking every broker about every partition while a person waits.

Everything is read through kbroker.cli.ops, so it works against any Kafka-compatible
cluster; when the broker is kbroker, its Prometheus endpoints (``--metrics-url``) add bytes
in and out per topic. A failed sample is logged and the next one tried: the console keeps
serving what it has.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import aiohttp

from kbroker.cli.ops import groups as ops_groups
from kbroker.cli.ops import transactions
from kbroker.cli.ops.topic_state import describe_log_dirs, offsets_at
from kbroker.client import EARLIEST, LATEST, KafkaClient, TopicPartition
from kbroker.console.prometheus import counters_by_label
from kbroker.console.samples import SampleStore
from wire.errors import KafkaError

log = logging.getLogger(__name__)

# kbroker's per-topic byte counters (kbroker/metrics.py), charted as rates.
TOPIC_COUNTERS = ("kbroker_bytes_in_total", "kbroker_bytes_out_total")
METRICS_TIMEOUT_SECONDS = 5.0
# Log dir sizes and open transactions are read at every SLOW_EVERY-th sample, and at least
# every SLOW_SECONDS.
SLOW_EVERY = 6
SLOW_SECONDS = 60.0


@dataclass
class Snapshot:
    """What the last sample found; ``time`` 0 before the first one."""

    time: float = 0.0
    log_start: dict[TopicPartition, int] = field(default_factory=dict)
    log_end: dict[TopicPartition, int] = field(default_factory=dict)
    topic_bytes: dict[str, int] = field(default_factory=dict)
    group_lag: dict[str, int] = field(default_factory=dict)
    hanging: list[transactions.OpenTransaction] = field(default_factory=list)
    error: str = ""
    took: float = 0.0


class Sampler:
    def __init__(
        self,
        client: KafkaClient,
        store: SampleStore,
        interval: float,
        metrics_urls: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.store = store
        self.interval = interval
        self.metrics_urls = list(metrics_urls)
        self.snapshot = Snapshot()
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._count = 0
        self._slow_time = 0.0

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.sample()
            except (KafkaError, OSError, TimeoutError, ConnectionError) as exc:
                self.snapshot.error = f"{type(exc).__name__}: {exc}"
                log.warning("sampling the cluster failed: %s", self.snapshot.error)
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def sample(self) -> None:
        started = time.monotonic()
        now = self._clock()
        client = self.client
        metadata = await client.metadata(None)
        partitions: list[TopicPartition] = []
        under = offline = 0
        for topic in metadata.topics:
            for p in topic.partitions:
                if not topic.is_internal:
                    partitions.append((topic.name or "", p.partition_index))
                if p.leader_id < 0:
                    offline += 1
                elif len(p.isr_nodes) < len(p.replica_nodes):
                    under += 1
        ends = await offsets_at(client, partitions, LATEST)
        starts = await offsets_at(client, partitions, EARLIEST)
        self.store.record_end_offsets(now, ends)
        self.store.record_partition_health(now, under, offline)
        listed = await ops_groups.list_groups(client)
        committed = await ops_groups.committed_offsets(
            client, [g.group_id for g in listed if g.group_type != ops_groups.SHARE]
        )
        for g in listed:
            if g.group_type == ops_groups.SHARE:
                try:
                    committed[g.group_id] = await ops_groups.share_group_offsets(client, g.group_id)
                except KafkaError:
                    continue
        self.store.record_lag(now, committed, ends)
        sizes, hanging = self.snapshot.topic_bytes, self.snapshot.hanging
        if self._count % SLOW_EVERY == 0 or now - self._slow_time >= SLOW_SECONDS:
            # Every partition's size on every broker, and every partition's open transactions:
            # the dearest questions, asked at most once a minute.
            replicas, _ = await describe_log_dirs(client, None)
            sizes = {}
            for r in replicas:
                if not r.future:
                    sizes[r.topic] = sizes.get(r.topic, 0) + r.size
            open_now = await transactions.open_transactions(client)
            max_timeout = await transactions.max_transaction_timeout_ms(client)
            hanging = transactions.hanging(open_now.found, int(now * 1000), max_timeout)
            self._slow_time = now
        self._count += 1
        await self._sample_metrics(now)
        self.store.prune(now)
        self.snapshot = Snapshot(
            now,
            starts,
            ends,
            sizes,
            {g: sum(lag.values()) for g, lag in self.store.partition_lag.items()},
            hanging,
            "",
            time.monotonic() - started,
        )

    async def _sample_metrics(self, now: float) -> None:
        if not self.metrics_urls:
            return
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=METRICS_TIMEOUT_SECONDS)
            )
        counters: dict[tuple[str, str], float] = {}
        for url in self.metrics_urls:
            try:
                async with self._session.get(url) as response:
                    text = await response.text()
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("metrics from %s: %s", url, exc)
                continue
            for key, value in counters_by_label(text, TOPIC_COUNTERS, "topic").items():
                counters[key] = counters.get(key, 0.0) + value
        self.store.record_counters(now, counters)
