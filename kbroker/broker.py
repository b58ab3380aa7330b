"""The broker process: metadata, logs, partitions, the listeners, and their lifecycle.

Start-up order: metadata (so the topics are known), logs (recovery), the
partitions this broker hosts (leaders and, in a cluster, followers), then every
listener; a cluster broker then registers its advertised endpoints in ZooKeeper.
Shutdown runs the other way: a cluster broker first hands its leaderships over
(controlled shutdown), then stop accepting and finish requests in progress, stop
replication, flush and close the logs with the clean-shutdown marker, then metadata.

zookeeper.connect chooses the ZooKeeper backend (controller/zk_backend.py);
without it the embedded single-node backend runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from controller.embedded import EmbeddedMetadata
from controller.interface import Endpoint, MetadataBackend, TopicInfo
from controller.zk_backend import ZkMetadata
from kbroker import heap
from kbroker.audit.publisher import AuditPublisher
from kbroker.authorization import build_authorizer
from kbroker.config import (
    BrokerConfig,
    ConfigError,
    DynamicConfigs,
    effective_topic_config,
    parse_per_ip_overrides,
)
from kbroker.dispatch import Dispatcher
from kbroker.dynamic_config import (
    changed_listeners,
    cleaner_changed,
    configuration_with,
    log_changes,
    stored_dynamic_configs,
)
from kbroker.features import DEFAULT_FINALIZED
from kbroker.fetch_sessions import FetchSessionCache
from kbroker.group.coordinator import GroupCoordinator
from kbroker.handlers.metadata import TopicMetadataCache
from kbroker.log.lifecycle import LifecycleSettings, StorageLifecycle
from kbroker.log.log_config import LogConfig
from kbroker.log.log_manager import LogManager
from kbroker.loop_stalls import LoopStallMonitor
from kbroker.metrics import BrokerMetrics, MetricsServer
from kbroker.mirror.manager import MirrorManager
from kbroker.partition import Partition
from kbroker.producer_ids import ProducerIdAllocator
from kbroker.purgatory import Purgatory
from kbroker.quotas import CONNECTION_CREATION_RATE, IP, QuotaManager
from kbroker.schema_registry.broker_registry import BrokerRegistry, parse_listeners
from kbroker.security.listener_security import (
    ListenerSecurity,
    SecuritySetupError,
    inter_broker_security,
    listener_security,
)
from kbroker.security.scram import ScramCredential
from kbroker.server.connection import ConnectionLimits
from kbroker.server.connection_quotas import (
    ConnectionLimitsConfig,
    ConnectionQuotas,
    ListenerLimits,
)
from kbroker.server.listener import KafkaServer
from kbroker.server.memory_pool import MemoryPool
from kbroker.share.coordinator import ShareCoordinator
from kbroker.share.end_offsets import LeaderEndOffsets
from kbroker.share.manager import SharePartitionManager
from kbroker.share.offsets import ShareGroupOffsets
from kbroker.share.persister import SharePersisterClient
from kbroker.share.persister_api import SharePersister
from kbroker.telemetry.service import ClientTelemetry
from kbroker.txn.coordinator import TransactionCoordinator
from kbroker.txn.verification import TxnVerifier
from replication.fetcher import make_settings
from replication.manager import ReplicaManager
from wire.errors import KafkaError

log = logging.getLogger(__name__)
T = TypeVar("T")

# How often logs with a flush.ms setting are checked.
FLUSH_CHECK_SECONDS = 1.0
# The exit status of a broker that shut down because every log directory failed.
EXIT_LOG_DIRS_FAILED = 1


def _positive_or_none(value: int) -> int | None:
    """Kafka's convention for limits: zero or negative means none."""
    return value if value > 0 else None


def connection_limits(config: BrokerConfig) -> ConnectionLimits:
    idle_ms = _positive_or_none(config.get("connections.max.idle.ms"))
    read_ms = _positive_or_none(config.get("request.read.timeout.ms"))
    return ConnectionLimits(
        max_frame_bytes=config.socket_request_max_bytes,
        idle_seconds=None if idle_ms is None else idle_ms / 1000,
        request_read_seconds=None if read_ms is None else read_ms / 1000,
        min_read_bytes_per_second=_positive_or_none(
            config.get("request.read.min.bytes.per.second")
        ),
        read_rate_window_seconds=config.get("request.read.min.rate.window.ms") / 1000,
    )


def connection_quotas_config(config: BrokerConfig) -> ConnectionLimitsConfig:
    """KIP-402 / KIP-612 limits, with each listener's listener.name.<l>.* overrides."""
    listeners = {
        lst.name: ListenerLimits(
            config.listener_value(lst.name, "max.connections"),
            config.listener_value(lst.name, "max.connection.creation.rate"),
            inter_broker=lst.name == config.inter_broker_listener_name,
        )
        for lst in config.listeners
    }
    return ConnectionLimitsConfig(
        max_connections=config.get("max.connections"),
        max_creation_rate=config.get("max.connection.creation.rate"),
        max_per_ip=config.get("max.connections.per.ip"),
        per_ip_overrides=resolve_hosts(
            parse_per_ip_overrides(config.get("max.connections.per.ip.overrides"))
        ),
        listeners=listeners,
    )


def resolve_hosts(limits: dict[str, int]) -> dict[str, int]:
    """Per-host limits keyed by address, as connections are counted (Kafka resolves the
    host names of max.connections.per.ip.overrides too); a name that does not resolve is
    kept as written."""
    out: dict[str, int] = {}
    for host, limit in limits.items():
        try:
            address = socket.gethostbyname(host)
        except OSError:
            address = host
        out[address] = limit
    return out


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        # The properties the broker was started with; ``config`` is what is in force, with
        # the dynamic broker configs on top (kbroker/dynamic_config.py).
        self.static_config = config
        self.config = config
        self.clock = clock
        self.zk: ZkMetadata | None = None
        if config.zookeeper_connect:
            self.zk = ZkMetadata(config, clock=clock)
            self.metadata: MetadataBackend = self.zk
        else:
            self.metadata = EmbeddedMetadata(config)
        self.logs = LogManager(
            list(config.log_dirs), clock=clock, cordoned=config.cordoned_log_dirs
        )
        # How this broker reaches the others (a bad setting stops the broker here).
        try:
            self.inter_broker_security = inter_broker_security(config)
        except SecuritySetupError as exc:
            raise ConfigError(str(exc)) from exc
        self.fetch_purgatory = Purgatory()
        # Incremental fetch sessions (KIP-227).
        self.fetch_sessions = FetchSessionCache(
            slots=config.get("max.incremental.fetch.session.cache.slots"),
            eviction_seconds=config.get("min.incremental.fetch.session.eviction.ms") / 1000,
        )
        # Metadata answers for each topic (kbroker/handlers/metadata.py).
        self.topic_answers = TopicMetadataCache()
        self.metadata.add_listener(self.topic_answers.forget)
        self.replica_manager = ReplicaManager(
            config.broker_id,
            self.logs,
            self._partition_changed,
            lag_max_ms=config.get("replica.lag.time.max.ms"),
            checkpoint_interval_ms=config.get("replica.high.watermark.checkpoint.interval.ms"),
            fetch_settings=make_settings(config.get, self.inter_broker_security),
            address_of=self._address_of,
            isr_writer=self.zk,
            clock=clock,
            on_storage_error=self._replica_storage_failed,
            on_log_dir_error=self.log_dir_failed,
        )
        # Every partition replica hosted here, leader or follower.
        self.partitions: dict[tuple[str, int], Partition] = self.replica_manager.partitions
        self.producer_ids = ProducerIdAllocator(self.metadata.allocate_producer_ids)
        # Client quotas (kbroker/quotas.py), from the metadata backend's table.
        self.quotas = QuotaManager(
            self.metadata.client_quotas,
            samples=config.get("quota.window.num"),
            window_seconds=config.get("quota.window.size.seconds"),
            clock=time.monotonic,
        )
        # ACL authorization (kbroker/authorization.py); None: every request is allowed.
        self.authorizer = build_authorizer(config, self.metadata.acls)
        # Client telemetry (KIP-714, kbroker/telemetry/).
        self.telemetry = ClientTelemetry(
            config.get("telemetry.max.bytes"), self.metadata.client_metrics
        )
        self.dispatcher = Dispatcher(self)
        self.group_coordinator = GroupCoordinator(self)
        # Share groups' partitions this broker leads, and their consumers' share sessions.
        self.share_partitions = SharePartitionManager(self)
        self.share_offsets = ShareGroupOffsets(self)
        self.leader_end_offsets = LeaderEndOffsets(self)
        self.txn_coordinator = TransactionCoordinator(self)
        self.txn_verifier = TxnVerifier(self)
        # Share-partition state (KIP-932): this broker's share coordinator, and the persister
        # through which partition leaders and the group coordinator reach any of them.
        self.share_coordinator = ShareCoordinator(self)
        self._persister_client = SharePersisterClient(self)
        self.share_persister: SharePersister = self._persister_client
        self.features = DEFAULT_FINALIZED
        # Mirror topics' fetchers on the partitions led here (kbroker/mirror/).
        self.mirrors = MirrorManager(self)
        # Per-window record counts of the partitions led here, to __audit (kbroker/audit/).
        self.audit = AuditPublisher(self) if config.get("audit.enable") else None
        # The schema registry, with schema.registry.listeners (kbroker/schema_registry/).
        registry_listeners = parse_listeners(config)
        self.schema_registry = (
            BrokerRegistry(self, registry_listeners) if registry_listeners else None
        )
        self.server = KafkaServer(
            self.dispatcher.handle,
            self.dispatcher.reject_version,
            connection_limits(config),
            MemoryPool(_positive_or_none(config.get("queued.max.request.bytes"))),
            ConnectionQuotas(connection_quotas_config(config), self._ip_creation_rate),
        )
        self.server.add_close_listener(self.share_partitions.connection_closed)
        # Each listener's TLS and SASL (a bad setting stops the broker here).
        self.listener_security = {
            lst.name: self._listener_security(lst.name) for lst in config.listeners
        }
        self._flusher: asyncio.Task[None] | None = None
        self.storage: StorageLifecycle | None = None
        self._reconfigurations: set[asyncio.Task[None]] = set()
        # The Prometheus endpoint, when metrics.port is set (kbroker/metrics.py).
        self.metrics_server: MetricsServer | None = None
        self.loop_stalls = LoopStallMonitor(self.config.get("event.loop.stall.threshold.ms"))
        self._stopped = False
        # Set when the broker must stop by itself (every log directory failed); serve()
        # then shuts down as on SIGTERM and exits with EXIT_LOG_DIRS_FAILED.
        self.stop_requested = asyncio.Event()
        # Bound ports: the first listener's, and every listener's by name.
        self.port = 0
        self.ports: dict[str, int] = {}

    def log_dir_failed(self, log_dir: Path, exc: OSError) -> None:
        """A write to `log_dir` failed (ENOSPC, EIO, ...): as Kafka does (KIP-112), the
        directory goes offline and its replicas with it: their clients get
        KAFKA_STORAGE_ERROR and look elsewhere. In a cluster the controller is told, and
        moves those replicas' leaderships to other in-sync replicas and drops them from the
        ISR (controller/zk_backend.py). With no directory left the broker shuts down
        (controlled shutdown first, so leadership moves in a cluster); after space returns,
        a restart recovers the directory's logs."""
        if log_dir not in self.logs.dirs:
            return  # offline already: the first failure was logged
        lost = self.logs.mark_offline(log_dir)
        log.error(
            "log directory %s failed (%s): %d replica(s) there are offline (KIP-112)",
            log_dir,
            exc.strerror or exc,
            len(lost),
        )
        self.replica_manager.take_offline(lost)
        if self.zk is not None:
            self.zk.log_dirs_failed([str(log_dir)], lost)
        if not self.logs.dirs and not self.stop_requested.is_set():
            log.error("every log directory has failed: shutting down")
            self.stop_requested.set()

    def _replica_storage_failed(self, key: tuple[str, int], exc: OSError) -> None:
        self.log_dir_failed(self.logs.dir_of(*key).parent, exc)

    def _listener_security(self, listener: str) -> ListenerSecurity:
        try:
            return listener_security(self.config, listener, self.scram_credential)
        except SecuritySetupError as exc:
            raise ConfigError(str(exc)) from exc

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.metadata.scram_credentials().get(user, {}).get(mechanism)

    def _ip_creation_rate(self, ip: str) -> float | None:
        """The connection_creation_rate client quota of an address, or of the default IP."""
        quotas = self.metadata.client_quotas()
        if not quotas:
            return None
        for key in (((IP, ip),), ((IP, None),)):
            rate = quotas.get(key, {}).get(CONNECTION_CREATION_RATE)
            if rate is not None:
                return rate
        return None

    def partition(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker leads it (what clients may produce to and read)."""
        return self.replica_manager.leader(topic, index)

    def _address_of(self, broker_id: int) -> tuple[str, int] | None:
        for info in self.metadata.brokers():
            if info.broker_id == broker_id:
                return info.host, info.port
        return None

    def advertised_endpoints(self) -> list[Endpoint]:
        """advertised.listeners, an advertised port 0 replaced by the port its listener
        bound."""
        return [
            Endpoint(a.name, a.host, a.port or self.ports.get(a.name, 0))
            for a in self.config.advertised_listeners
        ]

    async def start(self) -> int:
        """Start serving on every listener; returns the port the first one is bound to."""
        self.loop_stalls.start()
        loop = asyncio.get_running_loop()
        # A background fsync that failed takes its directory offline as a failed append does.
        self.logs.syncer.on_failure = lambda log_dir, exc: loop.call_soon_threadsafe(
            self.log_dir_failed, log_dir, exc
        )
        self.logs.lock_dirs()
        await self.metadata.start()
        self._use_dynamic_configs()
        self.metadata.add_broker_config_listener(self._use_dynamic_configs)
        self.logs.open_all()
        self.replica_manager.load_checkpoints()
        for topic in self.metadata.topics().values():
            self._host_topic(topic)
        self.metadata.add_listener(self._on_topic_change)
        # After the topics are hosted: creates __consumer_offsets and loads its partitions.
        await self.group_coordinator.start()
        await self.share_partitions.start()
        await self.txn_coordinator.start()
        await self.share_coordinator.start()
        for name, host, port in self.config.listeners:
            self.ports[name] = await self.server.start(
                host, port, name, self.listener_security[name]
            )
        self.port = self.ports[self.config.listeners[0].name]
        await self.replica_manager.start()
        self.mirrors.start()
        if self.audit is not None:
            self.audit.start()
        if self.zk is not None:
            await self.zk.register(self.advertised_endpoints())
        if self.schema_registry is not None:
            await self.schema_registry.start()
        self._flusher = asyncio.get_running_loop().create_task(self._flush_periodically())
        self.storage = self._start_storage_lifecycle()
        if self.config.metrics_port is not None:
            self.metrics_server = MetricsServer(BrokerMetrics(self).render)
            await self.metrics_server.start(self.config.listeners[0].host, self.config.metrics_port)
        log.info(
            "kbroker %d started: %d partitions, cluster id %s",
            self.config.broker_id,
            len(self.partitions),
            self.metadata.cluster_id,
        )
        return self.port

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        log.info("shutting down")
        if self.zk is not None and self.config.get("controlled.shutdown.enable"):
            # Kafka retries controlled.shutdown.max.retries times, backing off in between.
            await self.zk.controlled_shutdown(
                self.config.get("controlled.shutdown.max.retries")
                * self.config.get("controlled.shutdown.retry.backoff.ms")
                / 1000
            )
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        # First, so JoinGroup/SyncGroup requests parked in the coordinator are answered
        # (NOT_COORDINATOR) and their connections can finish.
        await self.group_coordinator.stop()
        await self.share_partitions.stop()
        await self.txn_coordinator.stop()
        await self.txn_verifier.close()
        await self.share_coordinator.stop()
        await self._persister_client.close()
        await self.leader_end_offsets.close()
        await self.server.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.mirrors.stop()
        if self.audit is not None:
            await self.audit.stop()
        await self.replica_manager.stop()
        if self.storage is not None:
            await self.storage.stop()
        self.loop_stalls.stop()
        self.logs.shutdown()
        await self.metadata.stop()
        log.info("shut down cleanly")

    def _host_topic(self, topic: TopicInfo) -> None:
        config = LogConfig.from_topic_config(
            effective_topic_config(topic.configs, self.config, self.dynamic_configs())
        )
        self.replica_manager.apply(topic, config)

    def dynamic_configs(self) -> DynamicConfigs:
        return stored_dynamic_configs(self.metadata)

    def _use_dynamic_configs(self) -> None:
        """Put the dynamic configs in force (at start, and whenever they change); configs
        this broker cannot use (another broker's default it cannot honour) are logged and
        left out, as Kafka ignores invalid dynamic configs."""
        try:
            config, security = configuration_with(
                self.static_config, self.dynamic_configs(), self.scram_credential
            )
        except KafkaError as exc:
            log.error("dynamic broker configs not applied: %s", exc.message)
            return
        previous, self.config = self.config, config
        log_changes(previous, config)
        for name in changed_listeners(self.listener_security, security, previous, config):
            self.server.set_security(name, security[name])
            log.info("listener %s: new connections use the new security settings", name)
        self.listener_security.update(
            (name, s) for name, s in security.items() if name in self.listener_security
        )
        cleaner = cleaner_changed(previous, config)
        if cleaner is not None and self.storage is not None:
            task = asyncio.get_running_loop().create_task(self.storage.cleaner.reconfigure(cleaner))
            self._reconfigurations.add(task)
            task.add_done_callback(self._reconfigurations.discard)

    def _on_topic_change(self, topic: TopicInfo | None, name: str) -> None:
        if topic is not None:
            self._host_topic(topic)
            return
        self.replica_manager.remove_topic(name)

    def _start_storage_lifecycle(self) -> StorageLifecycle:
        """Retention and the log cleaner (kbroker/log/lifecycle.py)."""

        def stable_offset(key: tuple[str, int]) -> int | None:
            partition = self.partitions.get(key)
            return None if partition is None else partition.last_stable_offset

        storage = StorageLifecycle(
            self.logs,
            LifecycleSettings.from_broker(self.config.get),
            stable_offset=stable_offset,
            on_change=self._partition_changed,
            clock=self.clock,
        )
        storage.start()
        return storage

    def _partition_changed(self, key: tuple[str, int]) -> None:
        self.fetch_purgatory.notify(key)

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_CHECK_SECONDS)
            for log_dir, exc in self.logs.flush_due():
                self.log_dir_failed(log_dir, exc)


async def _start_and_settle(broker: Broker) -> None:
    """Start without the garbage collector, then freeze what start-up made (kbroker/heap.py)."""
    with heap.collector_paused():
        await broker.start()
    took = heap.settle()
    log.info("heap settled in %.0f ms: %d objects frozen", took * 1000, gc.get_freeze_count())


async def serve(config: BrokerConfig) -> int:
    """Run a broker until SIGINT or SIGTERM, or until it must stop by itself, then shut it
    down gracefully; the process's exit status."""
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, broker.stop_requested.set)
    # A stop may come while the broker is still starting (re-registering in ZooKeeper can
    # wait for an earlier session's node to expire): it ends the start there.
    starting = asyncio.create_task(_start_and_settle(broker))
    stop_wanted = asyncio.create_task(broker.stop_requested.wait())
    settling: asyncio.Task[None] | None = None
    try:
        await asyncio.wait({starting, stop_wanted}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()
            settling = asyncio.create_task(heap.settle_periodically())
            await stop_wanted
        else:
            log.info("stop requested while starting")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
    finally:
        stop_wanted.cancel()
        if settling is not None:
            settling.cancel()
        await broker.stop()
    # Non-zero after a storage failure, so a supervisor restarts it (once space returns).
    return EXIT_LOG_DIRS_FAILED if not broker.logs.dirs else 0


class DaemonThreadExecutor(concurrent.futures.ThreadPoolExecutor):
    """The broker's default executor (asyncio.to_thread, name lookups): each call in a
    daemon thread of its own. A call blocked in kazoo, waiting for a ZooKeeper that will not
    come back, must not keep a stopped broker alive past its supervisor's grace period, and
    the interpreter waits at exit for a ThreadPoolExecutor's threads, never for daemons.
    (A ThreadPoolExecutor by type only: asyncio accepts nothing else as the default.)"""

    def submit(  # type: ignore[override]
        self, fn: Callable[..., T], /, *args: object, **kwargs: object
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="kbroker-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: the threads are daemons, each ending with its call."""


def run_broker(config: BrokerConfig) -> int:
    """Serve on an event loop of its own; the exit status. Unlike asyncio.run, closing the
    loop does not wait for the executor's threads (see DaemonThreadExecutor)."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(DaemonThreadExecutor())
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(serve(config))
    finally:
        leftover = asyncio.all_tasks(loop)
        for task in leftover:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()
