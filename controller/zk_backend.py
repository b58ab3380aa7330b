"""Cluster metadata in ZooKeeper (the only module that imports kazoo).

Every broker keeps a cache of the whole cluster state (brokers, controller, topics with their
assignments, configs and partition states; layout in controller/zk_paths.py), refreshed
whenever a ZooKeeper watch fires, after each of its own writes, and every few seconds as a
safety net. Reads (``topics()``, ``brokers()``, ...) answer from the cache; the broker learns
its roles from the topic listeners, called with every topic whose state changed.

How roles reach brokers: through ZooKeeper watches on the partition state znodes rather than
LeaderAndIsr/UpdateMetadata requests. Fencing: the controller's writes are transactions that
check the ``/controller_epoch`` znode version it got when elected, so a deposed controller's
writes fail; every partition state write (the controller's elections, a leader's ISR changes)
is conditional on the state znode's version; brokers never apply a state older than the
leader epoch they hold, and leaders and followers check leader epochs on every Fetch and
OffsetForLeaderEpoch (KIP-320), so a stale leader gets no follower and cannot commit.

Controller: the broker that creates the ephemeral ``/controller`` znode bumps
``/controller_epoch`` and, after every refresh, writes what controller/decisions.py decides
about the partitions (elections on broker loss, bounce or return), plus preferred-leader
elections every leader.imbalance.check.interval.seconds when auto.leader.rebalance.enable.
A broker that creates a topic writes its assignment and the partitions' initial states in one
transaction. Controlled shutdown: the stopping broker removes its own registration, so the
controller moves its leaderships as if it had failed, and waits for that before it stops.

Failed log directories (KIP-112): a broker whose directory failed writes the replicas that
were there to its ephemeral ``/kbroker/offline_replicas/<id>`` (made again with every new
session), then Kafka's ``/log_dir_event_notification`` sequential znode. The controller
watches the notifications; every refresh reads the offline replicas of every broker (so a
lost notification delays the reaction by a safety refresh at most), the controller moves
their leaderships and drops them from the ISR (controller/decisions.py) and deletes the
notifications it saw, as Kafka's controller does. A restarted broker has no such znode:
its replicas follow, catch up and rejoin the ISR as after any restart.

ACLs (controller/acl_store.py), SCRAM credentials and client quotas (the entity config
znodes, controller/config_znodes.py) are read from their znodes, which every broker
watches; writes follow each change with Kafka's change notification, which Kafka's brokers
read, and every broker deletes the notifications 15 minutes old, as Kafka's brokers do.

Also here, so that kazoo stays in this one module: ``read_consumer_offsets``, a read-only walk
of ``/consumers/<group>/offsets/<topic>/<partition>`` (offsets kept by ZooKeeper-based
consumers) for ``kbroker groups import-zk-offsets``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.handlers.utils import AsyncResult

from controller import (
    acl_store,
    config_znodes,
    credential_store,
    decisions,
    named_configs,
    producer_id_blocks,
    quota_store,
    zk_paths,
)
from controller.credential_store import CredentialTable, ScramChange
from controller.embedded import kafka_uuid_string, random_kafka_uuid
from controller.interface import (
    INTERNAL_TOPICS,
    BrokerInfo,
    Endpoint,
    PartitionInfo,
    TopicInfo,
)
from controller.producer_id_blocks import ProducerIdBlock
from controller.quota_store import QuotaChange
from controller.topic_cache import TopicCache
from controller.topic_plans import plan_partitions, plan_topic
from controller.zk_paths import PartitionState
from kbroker.config import (
    BrokerConfig,
    is_password_config,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from kbroker.quotas import CLIENT_ID, IP, USER, QuotaEntity
from kbroker.security.acls import AclBinding, ResourceType
from kbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kbroker.security.scram import ScramCredential
from wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
SAFETY_REFRESH_SECONDS = 3.0
# How often a refresh reads every partition state znode, not only those a watch or a write of
# ours marked: the safety net's own safety net.
FULL_READ_SECONDS = 60.0
RETRY_SECONDS = 1.0
# kazoo's threading handler raises KazooTimeoutError, which is not a KazooException.
ZK_ERRORS = (KazooException, ZookeeperError, KazooTimeoutError, OSError)
# How often a controlled shutdown's znode deletion checks that the connection is still up.
DELETE_POLL_SECONDS = 0.2
# How long a stopping broker waits for its ZooKeeper client to close (see stop()).
ZK_STOP_SECONDS = 3.0
# How often a refresh looks for change notifications past their lifetime.
PURGE_SECONDS = 60.0


@dataclass
class Snapshot:
    """Everything read from ZooKeeper in one refresh."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    sessions: dict[int, int] = field(default_factory=dict)
    czxids: dict[int, int] = field(default_factory=dict)
    controller: int = -1
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[TopicPartition, tuple[PartitionState, int]] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)
    default_broker_configs: dict[str, str] = field(default_factory=dict)
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    scram: dict[str, dict[str, ScramCredential]] = field(default_factory=dict)
    acls: frozenset[AclBinding] = frozenset()
    # Named configs by kind (client-metrics subscriptions, group configs).
    named: dict[named_configs.NamedConfigKind, dict[str, dict[str, str]]] = field(
        default_factory=lambda: {kind: {} for kind in named_configs.KINDS}
    )
    topic_versions: dict[str, int] = field(default_factory=dict)
    moving: dict[TopicPartition, decisions.Reassignment] = field(default_factory=dict)
    # Failed log directories and their replicas, by broker (KIP-112).
    offline: dict[int, zk_paths.OfflineReplicas] = field(default_factory=dict)
    # The log directory event notifications (read by the controller only): znode names.
    log_dir_events: list[str] = field(default_factory=list)

    def offline_by_partition(self) -> dict[TopicPartition, frozenset[int]]:
        """The replicas of each partition whose log directory failed on a live broker."""
        return decisions.offline_by_partition(
            {b: o.partitions for b, o in self.offline.items()}, set(self.brokers)
        )


class ZkMetadata(TopicCache):
    """The ZooKeeper ``MetadataBackend``, with the controller role when elected."""

    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        assert config.zookeeper_connect is not None
        self._config = config
        self._me = config.broker_id
        self._clock = clock
        self._zk = KazooClient(
            hosts=config.zookeeper_connect,
            timeout=config.zookeeper_session_timeout_ms / 1000,
        )
        self._cluster_id = ""
        self._snapshot = Snapshot()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = asyncio.Event()
        self._refresh_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._endpoints: tuple[Endpoint, ...] = ()
        # HTTP services this broker serves (the schema registry): name -> URL.
        self._service_urls: dict[str, str] = {}
        self._shutting_down = False
        # Controller role: the epoch and the /controller_epoch znode version that fence it.
        self._controller_epoch = -1
        self._epoch_version = -1
        self._known_czxids: dict[int, int] = {}
        self._last_preferred = 0.0
        # The znodes to read again at the next refresh, marked by the watches that fired and
        # by our own writes (None: every state znode). Each refresh reads the topics' own
        # znodes, but a partition's state znode only when marked, new or not yet read: with
        # 10,000 partitions reading them all took about a second of kazoo's Python time, at
        # every refresh. Marked from kazoo's threads and the loop, hence the lock.
        self._stale: set[str] | None = None
        self._stale_lock = threading.Lock()
        self._last_full_read = 0.0
        self._last_purge = -math.inf
        # This broker's failed log directories and their replicas (KIP-112), and whether the
        # controller has yet to be told (written at the next refresh, retried until done).
        self._offline = zk_paths.OfflineReplicas((), frozenset())
        self._offline_untold = False

    # --- reads -----------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def controller_id(self) -> int:
        return self._snapshot.controller

    def is_controller(self) -> bool:
        return self._snapshot.controller == self._me and self._controller_epoch >= 0

    def brokers(self) -> list[BrokerInfo]:
        return [self._snapshot.brokers[b] for b in sorted(self._snapshot.brokers)]

    def broker_configs(self) -> dict[str, str]:
        return dict(self._snapshot.broker_configs)

    def default_broker_configs(self) -> dict[str, str]:
        return dict(self._snapshot.default_broker_configs)

    def client_quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._snapshot.client_quotas

    def scram_credentials(self) -> CredentialTable:
        return self._snapshot.scram

    def acls(self) -> frozenset[AclBinding]:
        return self._snapshot.acls

    def client_metrics(self) -> Mapping[str, Mapping[str, str]]:
        return self._snapshot.named[named_configs.CLIENT_METRICS]

    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._snapshot.named[named_configs.GROUPS]

    def mirror_links(self) -> Mapping[str, Mapping[str, str]]:
        return self._snapshot.named[named_configs.MIRROR_LINKS]

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        timeout = (
            self._config.zookeeper_connection_timeout_ms
            or self._config.zookeeper_session_timeout_ms
        ) / 1000
        await asyncio.to_thread(self._zk.start, timeout)
        self._zk.add_listener(self._on_state)
        await self._in_thread(self._prepare)
        await self.refresh()
        self._tasks = [
            self._loop.create_task(self._refresh_on_change()),
            self._loop.create_task(self._refresh_periodically()),
        ]
        log.info(
            "zookeeper metadata: cluster id %s, %d topics", self._cluster_id, len(self._topics)
        )

    async def register(self, endpoints: Sequence[Endpoint]) -> None:
        """Register this broker with its advertised endpoints (after its listeners are up)
        and run for controller."""
        self._endpoints = tuple(endpoints)
        # ZooKeeper lost for a moment while starting (a restarting ensemble, a network
        # blip) is waited out for up to zookeeper.connection.timeout.ms, as Kafka waits for
        # its connection, rather than failing the start.
        deadline = time.monotonic() + self._config.zookeeper_connection_timeout_ms / 1000
        while True:
            try:
                await self._in_thread(self._register)
                break
            except (ConnectionLoss, KazooTimeoutError):
                if time.monotonic() > deadline:
                    raise
                log.warning("registration waits for the ZooKeeper connection")
            await asyncio.sleep(RETRY_SECONDS)
        await self.refresh()

    async def controlled_shutdown(self, timeout: float) -> None:
        """Hand this broker's leaderships over before stopping (see the module docstring).

        Everything here ends by `timeout` (Kafka's controlled-shutdown budget): without a
        ZooKeeper session nobody can take the leaderships over, so the hand-over is skipped
        and the broker goes on to stop cleanly rather than wait for ZooKeeper to return."""
        self._shutting_down = True
        deadline = time.monotonic() + timeout
        if self._zk.state != KazooState.CONNECTED:
            log.warning("controlled shutdown skipped: no ZooKeeper connection")
            return
        await self._delete_by(deadline, zk_paths.broker_path(self._me))
        if self._snapshot.controller == self._me:
            await self._delete_by(deadline, zk_paths.CONTROLLER)
            self._controller_epoch = -1
        while (
            time.monotonic() < deadline
            and self._zk.state == KazooState.CONNECTED
            and self._leads_with_others_in_sync()
        ):
            self._dirty.set()
            await asyncio.sleep(0.2)
        if self._leads_with_others_in_sync():
            log.warning("controlled shutdown: leaderships not handed over within %.1f s", timeout)

    async def _delete_by(self, deadline: float, path: str) -> None:
        """Delete a znode, giving up at `deadline` or as soon as the connection is lost.
        kazoo's blocking calls wait for a reconnection without limit, and a request sent
        just as the connection drops stays queued for the next one, so this waits on the
        asynchronous call in short slices, checking the connection in between; a request
        still queued then is failed when `stop` closes the client."""
        result = self._zk.delete_async(path)
        while (remaining := deadline - time.monotonic()) > 0:
            with contextlib.suppress(*ZK_ERRORS):
                await asyncio.to_thread(result.get, True, min(remaining, DELETE_POLL_SECONDS))
                return
            if result.ready() or self._zk.state != KazooState.CONNECTED:
                return

    def _leads_with_others_in_sync(self) -> bool:
        live = set(self._snapshot.brokers) - {self._me}
        return any(
            p.leader == self._me and any(b in live for b in p.isr)
            for t in self._topics.values()
            for p in t.partitions
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        # Stopping the client fails every request still waiting for a connection, which
        # releases worker threads a cancelled refresh left blocked in a kazoo call (the
        # event loop's executor is joined at exit). But kazoo's stop joins its connection
        # thread, which, while ZooKeeper is unreachable, may sit in a name lookup for many
        # seconds (a container whose ZooKeeper was stopped: its DNS name is gone) and take
        # the broker past its stop grace period. So the stop runs in a daemon thread of its
        # own and is waited for at most ZK_STOP_SECONDS; the process then exits without it.
        stopped = threading.Event()

        def stop_client() -> None:
            with contextlib.suppress(*ZK_ERRORS):
                self._zk.stop()
                self._zk.close()
            stopped.set()

        threading.Thread(target=stop_client, name="zookeeper-stop", daemon=True).start()
        if not await asyncio.to_thread(stopped.wait, ZK_STOP_SECONDS):
            log.warning(
                "ZooKeeper client still reconnecting after %.0f s: not waiting for it",
                ZK_STOP_SECONDS,
            )

    # --- ZooKeeper access (these run in worker threads) ------------------------------------

    def _watch(self, event: object = None) -> None:
        """A watch fired or the connection state changed (called on a kazoo thread)."""
        path = getattr(event, "path", None)
        if isinstance(path, str):
            self._mark_stale([path])
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._dirty.set)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            log.warning("zookeeper session lost")
        # Watches may have been lost with the connection: read everything again.
        self._mark_stale(None)
        self._watch()

    def _mark_stale(self, paths: Iterable[str] | None) -> None:
        """Read these znodes again at the next refresh (None: all)."""
        with self._stale_lock:
            if paths is None or self._stale is None:
                self._stale = None
            else:
                self._stale.update(paths)

    def _take_stale(self) -> set[str] | None:
        """The znodes marked since the last refresh (None: all), the mark cleared; every
        FULL_READ_SECONDS, all."""
        now = time.monotonic()
        with self._stale_lock:
            stale, self._stale = self._stale, set()
        if stale is None or now - self._last_full_read >= FULL_READ_SECONDS:
            self._last_full_read = now
            return None
        return stale

    def _session_id(self) -> int | None:
        """The current session's id; None while disconnected."""
        client_id = self._zk.client_id
        return None if client_id is None else int(client_id[0])

    def _prepare(self) -> None:
        for path in (*zk_paths.PERSISTENT_PATHS, *acl_store.PATHS):
            self._zk.ensure_path(path)
        try:
            self._zk.create(
                zk_paths.CLUSTER_ID,
                zk_paths.encode_cluster_id(kafka_uuid_string(random_kafka_uuid())),
            )
        except NodeExistsError:
            pass
        data, _ = self._zk.get(zk_paths.CLUSTER_ID)
        self._cluster_id = zk_paths.decode_cluster_id(data)

    async def publish_service_url(self, service: str, url: str) -> None:
        """An ephemeral znode (controller/zk_paths.py SERVICES) with the URL, made again with
        the broker's registration after a new session."""
        self._service_urls[service] = url
        await self._zk_call(self._publish_services)

    def _publish_services(self) -> None:
        for service, url in self._service_urls.items():
            path = zk_paths.service_path(service, self._me)
            try:
                self._zk.create(path, url.encode(), ephemeral=True, makepath=True)
            except NodeExistsError:
                _, stat = self._zk.get(path)
                if stat.ephemeralOwner != self._session_id():
                    self._zk.delete(path)
                    self._zk.create(path, url.encode(), ephemeral=True, makepath=True)
                else:
                    self._zk.set(path, url.encode())

    async def service_url(self, service: str, broker_id: int) -> str | None:
        try:
            data, _ = await self._zk_call(self._zk.get, zk_paths.service_path(service, broker_id))
        except KafkaError:
            return None
        return bytes(data).decode()

    def _register(self) -> None:
        """Create /brokers/ids/<id>; an old session's node (a restart before it expired)
        is waited out, as Kafka does."""
        assert self._endpoints
        inter = self._config.inter_broker_listener_name
        host, port = next(
            ((e.host, e.port) for e in self._endpoints if e.listener == inter),
            (self._endpoints[0].host, self._endpoints[0].port),
        )
        data = zk_paths.encode_broker(
            host, port, self._config.broker_rack, self._now_ms(), self._endpoints
        )
        path = zk_paths.broker_path(self._me)
        deadline = time.monotonic() + self._config.zookeeper_session_timeout_ms / 1000 * 2
        while True:
            try:
                if self._offline.log_dirs:
                    # Before the registration: no controller sees this session's broker
                    # without its failed replicas.
                    self._write_offline_replicas(self._offline)
                self._zk.create(path, data, ephemeral=True)
                log.info("registered broker %d at %s:%d", self._me, host, port)
                self._publish_services()
                return
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self._session_id():
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def log_dirs_failed(
        self, log_dirs: Iterable[str], partitions: Iterable[TopicPartition]
    ) -> None:
        """This broker's `log_dirs` failed with the replicas `partitions` in them: tell the
        controller at the next refresh (see the module docstring), retried until written."""
        self._offline = zk_paths.OfflineReplicas(
            tuple(dict.fromkeys((*self._offline.log_dirs, *log_dirs))),
            self._offline.partitions | frozenset(partitions),
        )
        self._offline_untold = True
        self._dirty.set()

    def _write_offline_replicas(self, offline: zk_paths.OfflineReplicas) -> None:
        """The ephemeral offline-replicas znode of this session, created or replaced."""
        path = zk_paths.offline_replicas_path(self._me)
        data = zk_paths.encode_offline_replicas(offline)
        try:
            self._zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            _, stat = self._zk.get(path)
            if stat.ephemeralOwner != self._session_id():
                self._zk.delete(path)
                self._zk.create(path, data, ephemeral=True, makepath=True)
            else:
                self._zk.set(path, data)

    def _tell_log_dir_failure(self, offline: zk_paths.OfflineReplicas) -> None:
        """The offline replicas first, then the event: the controller that reacts finds them."""
        self._write_offline_replicas(offline)
        self._zk.create(
            zk_paths.LOG_DIR_EVENT_PREFIX,
            zk_paths.encode_log_dir_event(self._me),
            sequence=True,
            makepath=True,
        )
        log.info(
            "told the controller: log directories %s failed, %d replicas offline",
            list(offline.log_dirs),
            len(offline.partitions),
        )

    def _broker_info(self, broker_id: int, data: bytes) -> BrokerInfo:
        """A registration as this broker sees it: the peer's endpoint for our
        inter.broker.listener.name is where replication reaches it."""
        host, port, rack = zk_paths.decode_broker(data)
        endpoints = zk_paths.decode_broker_endpoints(data)
        for endpoint in endpoints:
            if endpoint.listener == self._config.inter_broker_listener_name:
                host, port = endpoint.host, endpoint.port
        return BrokerInfo(broker_id, host, port, rack, endpoints)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _read(self) -> Snapshot:
        stale = self._take_stale()
        try:
            return self._read_marked(stale)
        except BaseException:
            # What was marked must not be forgotten: the next refresh reads everything.
            self._mark_stale(None)
            raise

    def _read_marked(self, stale: set[str] | None) -> Snapshot:
        """Everything, the partition states only where `stale` (None: all) asks."""
        zk = self._zk
        watch = self._watch
        previous = self._snapshot
        snap = Snapshot()
        for child in zk.get_children(zk_paths.BROKER_IDS, watch=watch):
            try:
                data, stat = zk.get(f"{zk_paths.BROKER_IDS}/{child}")
            except NoNodeError:
                continue
            try:
                snap.brokers[int(child)] = self._broker_info(int(child), data)
            except (ValueError, KeyError, TypeError) as exc:
                # Not a registration we can read (another tool's, a corrupt one): without
                # an address the broker is unusable, so it is left out, not fatal.
                log.warning("ignoring unreadable broker registration %s: %r", child, exc)
                continue
            snap.sessions[int(child)] = stat.ephemeralOwner
            snap.czxids[int(child)] = stat.czxid
        try:
            data, _ = zk.get(zk_paths.CONTROLLER, watch=watch)
            snap.controller = zk_paths.decode_controller(data)
        except NoNodeError:
            zk.exists(zk_paths.CONTROLLER, watch=watch)
        snap.offline = self._read_offline_replicas()
        if self.is_controller():
            snap.log_dir_events = sorted(zk.get_children(zk_paths.LOG_DIR_EVENTS, watch=watch))
        # Every znode read is sent before any answer is awaited (kazoo's async calls, one
        # connection, answered in order): a cluster of 10,000 partitions is 10,000 state
        # znodes, and one round trip each made every refresh take seconds.
        topics = zk.get_children(zk_paths.TOPICS, watch=watch)
        topic_reads = [
            (
                topic,
                zk.get_async(zk_paths.topic_path(topic), watch=watch),
                zk.get_async(zk_paths.topic_config_path(topic), watch=watch),
            )
            for topic in topics
        ]
        state_reads: list[tuple[str, int, AsyncResult]] = []
        for topic, topic_read, config_read in topic_reads:
            try:
                data, stat = topic_read.get()
            except NoNodeError:
                continue
            assignment = zk_paths.decode_topic(data)
            replicas = assignment.replicas
            snap.topic_ids[topic] = assignment.topic_id
            snap.topic_versions[topic] = stat.version
            snap.partition_counts[topic] = len(replicas)
            for index in set(assignment.adding) | set(assignment.removing):
                if index < len(replicas):
                    snap.moving[(topic, index)] = decisions.Reassignment(
                        replicas[index],
                        assignment.adding.get(index, ()),
                        assignment.removing.get(index, ()),
                    )
            try:
                data, _ = config_read.get()
                snap.configs[topic] = zk_paths.decode_config(data)
            except NoNodeError:
                snap.configs[topic] = {}
            same_topic = previous.topic_ids.get(topic) == assignment.topic_id
            for index, assigned in enumerate(replicas):
                key = (topic, index)
                snap.assignments[key] = assigned
                path = zk_paths.state_path(topic, index)
                known = previous.states.get(key)
                if stale is not None and same_topic and known is not None and path not in stale:
                    # Unchanged since it was read: its watch has not fired.
                    snap.states[key] = known
                    continue
                state_reads.append((topic, index, zk.get_async(path, watch=watch)))
        for topic, index, state_read in state_reads:
            try:
                data, stat = state_read.get()
            except NoNodeError:
                continue
            snap.states[(topic, index)] = (zk_paths.decode_state(data), stat.version)
        snap.broker_configs = self._read_watched_config(
            zk_paths.broker_config_path(self._me), watch
        )
        snap.default_broker_configs = self._read_watched_config(
            zk_paths.DEFAULT_BROKER_CONFIG_PATH, watch
        )
        snap.client_quotas, snap.scram = self._read_user_configs()
        if snap.client_quotas == self._snapshot.client_quotas:
            # Unchanged: keep the object, which the quota manager compares by identity.
            snap.client_quotas = self._snapshot.client_quotas
        snap.acls = self._read_acls()
        if snap.acls == self._snapshot.acls:
            # Unchanged: keep the object, which the authorizer's index compares by identity.
            snap.acls = self._snapshot.acls
        for kind in named_configs.KINDS:
            table = self._read_named(kind)
            # Unchanged: keep the object, which its users (the telemetry manager) compare by
            # identity.
            old = self._snapshot.named[kind]
            snap.named[kind] = old if table == old else table
        return snap

    def _read_offline_replicas(self) -> dict[int, zk_paths.OfflineReplicas]:
        """Every broker's failed log directories (unwatched: the notifications wake the
        controller, and its writes wake the other brokers)."""
        zk = self._zk
        reads = [
            (child, zk.get_async(f"{zk_paths.OFFLINE_REPLICAS}/{child}"))
            for child in zk.get_children(zk_paths.OFFLINE_REPLICAS)
        ]
        out: dict[int, zk_paths.OfflineReplicas] = {}
        for child, read in reads:
            try:
                data, _ = read.get()
                out[int(child)] = zk_paths.decode_offline_replicas(data)
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable offline replicas of broker %s: %r", child, exc)
        return out

    def _read_named(self, kind: named_configs.NamedConfigKind) -> dict[str, dict[str, str]]:
        """Every name's configs of one kind (controller/named_configs.py), watched."""
        zk = self._zk
        reads = [
            (node, zk.get_async(f"{kind.root}/{node}", watch=self._watch))
            for node in zk.get_children(kind.root, watch=self._watch)
        ]
        out: dict[str, dict[str, str]] = {}
        for node, read in reads:
            try:
                data, _ = read.get()
                configs = zk_paths.decode_config(data)
            except NoNodeError:
                continue
            except ValueError as exc:
                log.warning("ignoring unreadable %s znode %s: %s", kind.entity_type, node, exc)
                continue
            if configs:
                out[named_configs.node_name(node)] = configs
        return out

    def _read_acls(self) -> frozenset[AclBinding]:
        """Every ACL znode (controller/acl_store.py), watched, so that a change made
        through any broker (or Kafka's tools) reaches this one at once."""
        zk = self._zk
        watch = self._watch
        out: set[AclBinding] = set()
        for pattern_type, root in acl_store.ROOTS:
            for type_node in zk.get_children(root, watch=watch):
                resource_type = acl_store.parse_resource_type(type_node)
                try:
                    names = zk.get_children(f"{root}/{type_node}", watch=watch)
                except NoNodeError:
                    continue
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    log.warning("ignoring ACLs of unknown resource type %s", type_node)
                    continue
                for name in names:
                    path = f"{root}/{type_node}/{name}"
                    try:
                        data, _ = zk.get(path, watch=watch)
                        out |= acl_store.decode_acls(data, (resource_type, name, pattern_type))
                    except NoNodeError:
                        continue
                    except ValueError as exc:
                        log.warning("ignoring unreadable ACL znode %s: %s", path, exc)
        return frozenset(out)

    def _read_user_configs(
        self,
    ) -> tuple[dict[QuotaEntity, dict[str, float]], dict[str, dict[str, ScramCredential]]]:
        """Every quota znode (controller/quota_store.py) and the users' SCRAM credentials
        (controller/credential_store.py), watched."""
        zk = self._zk
        watch = self._watch
        out: dict[QuotaEntity, dict[str, float]] = {}
        scram: dict[str, dict[str, ScramCredential]] = {}

        def read(path: str, key: QuotaEntity) -> None:
            try:
                data, _ = zk.get(path, watch=watch)
            except NoNodeError:
                return
            config = zk_paths.decode_config(data)
            quotas = quota_store.decode_quotas(
                {k: v for k, v in config.items() if k not in SCRAM_MECHANISMS}
            )
            if quotas:
                out[key] = quotas
            if len(key) == 1 and key[0][0] == USER and key[0][1] is not None:
                credentials = credential_store.credentials_of_config(config)
                if credentials:
                    scram[key[0][1]] = credentials

        roots = ((quota_store.USERS, USER), (quota_store.CLIENTS, CLIENT_ID), (quota_store.IPS, IP))
        for root, kind in roots:
            for node in zk.get_children(root, watch=watch):
                name = quota_store.desanitize(node)
                read(f"{root}/{node}", ((kind, name),))
                if kind != USER:
                    continue
                try:
                    clients = zk.get_children(f"{root}/{node}/clients", watch=watch)
                except NoNodeError:
                    continue
                for client in clients:
                    key = ((CLIENT_ID, quota_store.desanitize(client)), (USER, name))
                    read(f"{root}/{node}/clients/{client}", key)
        return out, scram

    def _run_for_controller(self) -> None:
        try:
            self._zk.create(
                zk_paths.CONTROLLER,
                zk_paths.encode_controller(self._me, self._now_ms()),
                ephemeral=True,
            )
        except NodeExistsError:
            return
        while True:
            try:
                data, stat = self._zk.get(zk_paths.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self._zk.create(zk_paths.CONTROLLER_EPOCH, b"0")
                except NodeExistsError:
                    pass
                continue
            epoch = int(data.decode("ascii")) + 1
            try:
                new_stat = self._zk.set(
                    zk_paths.CONTROLLER_EPOCH, str(epoch).encode("ascii"), version=stat.version
                )
            except BadVersionError:
                continue
            self._controller_epoch = epoch
            self._epoch_version = new_stat.version
            self._known_czxids = {}
            log.info("broker %d is the controller, epoch %d", self._me, epoch)
            return

    def _write_states(self, changes: Sequence[decisions.StateChange]) -> set[TopicPartition]:
        """Controller writes, fenced by the controller epoch's znode version; the partitions
        written (a write loses when the state or the controller epoch moved meanwhile)."""
        written: set[TopicPartition] = set()
        for change in changes:
            topic, index = change.partition
            _, version = self._snapshot.states[change.partition]
            transaction = self._zk.transaction()
            transaction.check(zk_paths.CONTROLLER_EPOCH, self._epoch_version)
            transaction.set_data(
                zk_paths.state_path(topic, index), zk_paths.encode_state(change.new), version
            )
            results = transaction.commit()
            self._mark_stale([zk_paths.state_path(topic, index)])
            if any(isinstance(r, Exception) for r in results):
                log.info("controller write for %s-%d lost: %s", topic, index, results)
                continue
            written.add(change.partition)
            log.info(
                "controller: %s-%d leader %d epoch %d isr %s",
                topic,
                index,
                change.new.leader,
                change.new.leader_epoch,
                list(change.new.isr),
            )
        return written

    # --- refresh ---------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read ZooKeeper, publish changes, and act as controller if elected."""
        async with self._refresh_lock:
            snapshot = await self._in_thread(self._read)
            self._publish(snapshot)
            if self._endpoints and not self._shutting_down:
                session = self._session_id()
                # Without a session (connection lost) the state change will bring us back.
                if session is not None and self._snapshot.sessions.get(self._me) != session:
                    await self._in_thread(self._register)
                    self._dirty.set()
                if self._offline_untold:
                    told = self._offline
                    await self._in_thread(self._tell_log_dir_failure, told)
                    # Another directory may have failed meanwhile: told at the next refresh.
                    self._offline_untold = self._offline is not told
                    self._dirty.set()
                if self._snapshot.controller == -1:
                    await self._in_thread(self._run_for_controller)
                    self._dirty.set()
                elif self._snapshot.controller != self._me:
                    self._controller_epoch = -1
            if self.is_controller():
                await self._control()
            if time.monotonic() - self._last_purge >= PURGE_SECONDS:
                await self._in_thread(self._purge_notifications)
                self._last_purge = time.monotonic()

    def _purge_notifications(self) -> None:
        """Delete the change notifications past their lifetime (controller/config_znodes.py),
        oldest first, up to the first younger one: a parent's sequence nodes are created in
        order."""
        now_ms = self._clock() * 1000
        for root in config_znodes.NOTIFICATION_ROOTS:
            for name in sorted(_children(self._zk, root)):
                path = f"{root}/{name}"
                stat = self._zk.exists(path)
                if stat is None:
                    continue
                if not config_znodes.expired(stat.ctime, now_ms):
                    break
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(path)

    async def _refresh_after_write(self) -> None:
        """After one of our writes: show it at once; a failed read is retried later."""
        try:
            await self.refresh()
        except ZK_ERRORS as exc:
            log.info("zookeeper refresh failed: %s", exc)
            self._dirty.set()

    async def _refresh_on_change(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if self._zk.state != KazooState.CONNECTED:
                # Nothing to read; the reconnection's state change sets _dirty again.
                continue
            try:
                await self.refresh()
            except Exception as exc:
                # This loop keeps the registration and the controller alive: no failed
                # refresh, expected or a bug, may leave a broker that never re-registers.
                if isinstance(exc, ZK_ERRORS):
                    log.info("zookeeper refresh failed: %s", exc)
                else:
                    log.exception("zookeeper refresh failed")
                await asyncio.sleep(RETRY_SECONDS)
                self._dirty.set()

    async def _refresh_periodically(self) -> None:
        while True:
            await asyncio.sleep(SAFETY_REFRESH_SECONDS)
            self._dirty.set()

    def _publish(self, snapshot: Snapshot) -> None:
        live = set(snapshot.brokers)
        failed = snapshot.offline_by_partition()
        topics: dict[str, TopicInfo] = {}
        for name, topic_id in snapshot.topic_ids.items():
            partitions = []
            for index in range(snapshot.partition_counts[name]):
                replicas = snapshot.assignments[(name, index)]
                entry = snapshot.states.get((name, index))
                state = entry[0] if entry is not None else PartitionState(-1, 0, (), -1)
                partitions.append(
                    PartitionInfo(
                        partition=index,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        replicas=replicas,
                        isr=state.isr,
                        offline_replicas=tuple(
                            r
                            for r in replicas
                            if r not in live or r in failed.get((name, index), ())
                        ),
                    )
                )
            info = TopicInfo(
                name=name,
                topic_id=topic_id,
                partitions=tuple(partitions),
                configs=snapshot.configs.get(name, {}),
                internal=name in INTERNAL_TOPICS,
            )
            # An unchanged topic keeps its object: readers may cache by identity (the
            # Metadata answers, kbroker/handlers/metadata.py).
            known = self._topics.get(name)
            topics[name] = known if known == info else info
        changed: list[tuple[TopicInfo | None, str]] = [
            (t, n) for n, t in topics.items() if self._topics.get(n) is not t
        ]
        changed += [(None, n) for n in self._topics if n not in topics]
        configs_changed = (snapshot.broker_configs, snapshot.default_broker_configs) != (
            self._snapshot.broker_configs,
            self._snapshot.default_broker_configs,
        )
        if configs_changed:
            changed += [(t, n) for n, t in topics.items() if (t, n) not in changed]
        self._snapshot = snapshot
        self._publish_topics(topics, changed)
        if configs_changed:
            self._publish_broker_configs()

    # --- controller ------------------------------------------------------------------------

    def _unclean(self, topic: str) -> bool:
        configs = self._snapshot.configs.get(topic, {})
        value = configs.get(
            "unclean.leader.election.enable",
            str(self._config.get("unclean.leader.election.enable")).lower(),
        )
        return value.lower() == "true"

    async def _control(self) -> None:
        snap = self._snapshot
        live = set(snap.brokers)
        bounced = {
            b for b, czxid in snap.czxids.items() if self._known_czxids.get(b, czxid) != czxid
        }
        states = {key: entry[0] for key, entry in snap.states.items()}
        offline = snap.offline_by_partition()
        changes = decisions.on_brokers_changed(
            states,
            snap.assignments,
            live,
            bounced,
            self._controller_epoch,
            self._unclean,
            offline,
        )
        now = time.monotonic()
        interval = float(self._config.get("leader.imbalance.check.interval.seconds"))
        if (
            not changes
            and self._config.get("auto.leader.rebalance.enable")
            and now - self._last_preferred >= interval
        ):
            self._last_preferred = now
            imbalanced = decisions.imbalanced_brokers(
                states,
                snap.assignments,
                int(self._config.get("leader.imbalance.per.broker.percentage")),
            )
            changes = [
                c
                for c in decisions.preferred_elections(
                    states, snap.assignments, live, self._controller_epoch, offline
                )
                if snap.assignments[c.partition][0] in imbalanced
            ]
        if changes:
            await self._in_thread(self._write_states, changes)
            self._dirty.set()
        elif snap.moving:
            await self._in_thread(self._complete_reassignments, live)
        self._known_czxids = dict(snap.czxids)
        if snap.log_dir_events:
            await self._in_thread(self._delete_log_dir_events, snap.log_dir_events)

    def _delete_log_dir_events(self, names: Sequence[str]) -> None:
        """Acted on (this refresh read every broker's offline replicas): deleted, as Kafka's
        controller deletes the notifications it processed."""
        for name in names:
            path = f"{zk_paths.LOG_DIR_EVENTS}/{name}"
            try:
                data, _ = self._zk.get(path)
                broker, event = zk_paths.decode_log_dir_event(data)
                log.info("controller: log directory event %d of broker %d handled", event, broker)
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("deleting unreadable log directory event %s: %r", name, exc)
            with contextlib.suppress(NoNodeError):
                self._zk.delete(path)

    def _complete_reassignments(self, live: set[int]) -> None:
        """Finish the reassignments whose target replicas are all in sync: one transaction
        per topic (state znodes and the topic znode), fenced by the controller epoch."""
        snap = self._snapshot
        by_topic: dict[str, dict[int, PartitionState]] = {}
        for key, moving in snap.moving.items():
            entry = snap.states.get(key)
            if entry is None:
                continue
            new = decisions.complete_reassignment(entry[0], moving, live, self._controller_epoch)
            if new is not None:
                by_topic.setdefault(key[0], {})[key[1]] = new
        for topic, done in by_topic.items():
            data, stat = self._zk.get(zk_paths.topic_path(topic))
            if stat.version != snap.topic_versions.get(topic):
                self._watch()
                continue
            assignment = zk_paths.decode_topic(data)
            replicas = list(assignment.replicas)
            adding, removing = dict(assignment.adding), dict(assignment.removing)
            transaction = self._zk.transaction()
            transaction.check(zk_paths.CONTROLLER_EPOCH, self._epoch_version)
            for index, new in done.items():
                replicas[index] = snap.moving[(topic, index)].target
                adding.pop(index, None)
                removing.pop(index, None)
                old, version = snap.states[(topic, index)]
                if new != old:
                    transaction.set_data(
                        zk_paths.state_path(topic, index), zk_paths.encode_state(new), version
                    )
            transaction.set_data(
                zk_paths.topic_path(topic),
                zk_paths.encode_assignment(assignment.topic_id, replicas, adding, removing),
                stat.version,
            )
            results = transaction.commit()
            self._mark_stale(zk_paths.state_path(topic, index) for index in done)
            if any(isinstance(r, Exception) for r in results):
                log.info("completing reassignments of %s lost: %s", topic, results)
            else:
                log.info("controller: reassignment of %s done: %s", topic, sorted(done))
            self._watch()

    # --- reassignments (KIP-455) -----------------------------------------------------------

    def list_reassignments(
        self, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, decisions.Reassignment]:
        moving = self._snapshot.moving
        if partitions is None:
            return dict(moving)
        return {key: moving[key] for key in partitions if key in moving}

    async def alter_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start (a replica list) or cancel (None) reassignments; per partition, the error or
        None. Each topic's znode is rewritten conditionally on its version."""
        results: dict[TopicPartition, KafkaError | None] = {}
        by_topic: dict[str, dict[int, Sequence[int] | None]] = {}
        live = set(self._snapshot.brokers)
        for (topic, index), target in targets.items():
            info = self._topics.get(topic)
            if info is None or not 0 <= index < len(info.partitions):
                results[(topic, index)] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if target is not None:
                if not target or len(set(target)) != len(target):
                    results[(topic, index)] = KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty or duplicate replicas"
                    )
                    continue
                if any(b not in live for b in target):
                    results[(topic, index)] = KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "unknown broker in the replicas"
                    )
                    continue
            elif (topic, index) not in self._snapshot.moving:
                results[(topic, index)] = KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                continue
            by_topic.setdefault(topic, {})[index] = target

        def write(topic: str, changes: dict[int, Sequence[int] | None]) -> None:
            data, stat = self._zk.get(zk_paths.topic_path(topic))
            assignment = zk_paths.decode_topic(data)
            replicas = list(assignment.replicas)
            adding, removing = dict(assignment.adding), dict(assignment.removing)
            for index, target in changes.items():
                current = decisions.Reassignment(
                    replicas[index], adding.get(index, ()), removing.get(index, ())
                )
                moved = (
                    decisions.cancel_reassignment(current)
                    if target is None
                    else decisions.start_reassignment(current, target)
                )
                replicas[index] = moved.replicas
                adding[index] = moved.adding
                removing[index] = moved.removing
            # Fenced like every controller write (the controller epoch's znode version).
            transaction = self._zk.transaction()
            transaction.check(zk_paths.CONTROLLER_EPOCH, self._epoch_version)
            transaction.set_data(
                zk_paths.topic_path(topic),
                zk_paths.encode_assignment(assignment.topic_id, replicas, adding, removing),
                stat.version,
            )
            epoch_check, topic_write = transaction.commit()
            # In a failed transaction the operations that did not fail report RolledBackError.
            if isinstance(epoch_check, Exception) and not isinstance(epoch_check, RolledBackError):
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "the controller moved")
            if isinstance(topic_write, Exception):
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{topic} changed meanwhile")

        for topic, changes in by_topic.items():
            try:
                await self._zk_call(write, topic, changes)
                outcome = None
            except KafkaError as exc:
                outcome = exc
            for index in changes:
                results[(topic, index)] = outcome
        await self._refresh_after_write()
        return results

    async def elect_leaders(
        self, partitions: Sequence[TopicPartition], *, unclean: bool
    ) -> dict[TopicPartition, ErrorCode]:
        """Preferred (or, with ``unclean``, unclean) leader election for ``partitions``, the
        ElectLeaders API (the controller's): written like every controller write."""
        snap = self._snapshot
        live = set(snap.brokers)
        result: dict[TopicPartition, ErrorCode] = {}
        wanted: dict[TopicPartition, PartitionState] = {}
        for key in partitions:
            entry = snap.states.get(key)
            if entry is None:
                result[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted[key] = entry[0]
        epoch = max(self._controller_epoch, 0)
        offline = snap.offline_by_partition()
        if unclean:
            changes = decisions.unclean_elections(wanted, snap.assignments, live, epoch, offline)
        else:
            changes = decisions.preferred_elections(wanted, snap.assignments, live, epoch, offline)
        elected = {c.partition for c in changes}
        for key, state in wanted.items():
            if key in elected:
                continue
            replicas = snap.assignments.get(key, ())
            leader_serves = state.leader in live and state.leader not in offline.get(key, ())
            done = leader_serves if unclean else bool(replicas) and state.leader == replicas[0]
            if done:
                result[key] = ErrorCode.ELECTION_NOT_NEEDED
            elif unclean:
                result[key] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            else:
                result[key] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        written = await self._zk_call(self._write_states, changes)
        for change in changes:
            # A lost write: the state or the controller moved meanwhile; the client may retry.
            lost = change.partition not in written
            result[change.partition] = ErrorCode.REQUEST_TIMED_OUT if lost else ErrorCode.NONE
        await self._refresh_after_write()
        return result

    # --- leader-side ISR changes -----------------------------------------------------------

    async def alter_isr(
        self, topic: str, partition: int, leader_epoch: int, isr: tuple[int, ...]
    ) -> tuple[int, ...] | None:
        """Write ``isr`` conditionally on the state version this broker last read; returns
        the ISR stored afterwards (``isr`` when written), None when this broker no longer
        leads at ``leader_epoch``."""
        entry = self._snapshot.states.get((topic, partition))
        if entry is None:
            return None
        state, version = entry
        if state.leader != self._me or state.leader_epoch != leader_epoch:
            return None
        new = PartitionState(self._me, leader_epoch, tuple(isr), state.controller_epoch)
        path = zk_paths.state_path(topic, partition)
        try:
            await self._in_thread(self._zk.set, path, zk_paths.encode_state(new), version)
        except (BadVersionError, NoNodeError):
            self._mark_stale([path])
            await self._refresh_after_write()
            entry = self._snapshot.states.get((topic, partition))
            if entry is None or entry[0].leader != self._me:
                return None
            return entry[0].isr if entry[0].leader_epoch == leader_epoch else None
        self._mark_stale([path])
        await self._refresh_after_write()
        return tuple(isr)

    async def raise_leader_epoch(
        self, topic: str, partition: int, leader_epoch: int, above: int
    ) -> int | None:
        """The leader's own write, as ``alter_isr``: conditional on the state version it last
        read, so it loses against the controller's elections."""
        entry = self._snapshot.states.get((topic, partition))
        if entry is None:
            return None
        state, version = entry
        if state.leader != self._me or state.leader_epoch != leader_epoch:
            return None
        epoch = max(leader_epoch, above) + 1
        new = PartitionState(self._me, epoch, state.isr, state.controller_epoch)
        path = zk_paths.state_path(topic, partition)
        try:
            await self._in_thread(self._zk.set, path, zk_paths.encode_state(new), version)
        except (BadVersionError, NoNodeError):
            self._mark_stale([path])
            await self._refresh_after_write()
            return None
        self._mark_stale([path])
        await self._refresh_after_write()
        return epoch

    # --- changes ---------------------------------------------------------------------------

    def _racks(self) -> dict[int, str | None]:
        return {b: info.rack for b, info in self._snapshot.brokers.items()}

    def _create_nodes(
        self,
        name: str,
        topic_id: uuid.UUID,
        replicas: list[tuple[int, ...]],
        configs: Mapping[str, str],
        live: set[int],
    ) -> None:
        transaction = self._zk.transaction()
        transaction.create(
            zk_paths.topic_path(name), zk_paths.encode_assignment(topic_id, replicas)
        )
        transaction.create(zk_paths.partitions_path(name))
        epoch = max(self._controller_epoch, 0)
        for index, assigned in enumerate(replicas):
            state = decisions.initial_state(assigned, live, epoch)
            transaction.create(zk_paths.partition_path(name, index))
            transaction.create(zk_paths.state_path(name, index), zk_paths.encode_state(state))
        results = transaction.commit()
        for r in results:
            if isinstance(r, NodeExistsError):
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic {name!r} already exists")
            if isinstance(r, Exception):
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot create {name!r}: {r!r}")
        self._set_config_node(zk_paths.topic_config_path(name), configs)

    def _replace_entity_config(self, entity_path: str, configs: Mapping[str, str]) -> None:
        def replace(config: dict[str, str]) -> None:
            config.clear()
            config.update(configs)

        alter_entity_config(self._zk, entity_path, replace)

    def _set_config_node(self, path: str, configs: Mapping[str, str]) -> None:
        data = zk_paths.encode_config(configs)
        try:
            self._zk.set(path, data)
        except NoNodeError:
            self._zk.create(path, data, makepath=True)

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        racks = self._racks()
        topic = plan_topic(
            self._config,
            name,
            num_partitions,
            replication_factor,
            assignments=assignments,
            configs=configs,
            existing=self._topics,
            racks=racks,
            topic_id=random_kafka_uuid(),
        )
        if validate_only:
            return topic
        replicas = [p.replicas for p in topic.partitions]
        await self._zk_call(
            self._create_nodes, name, topic.topic_id, replicas, topic.configs, set(racks)
        )
        await self._refresh_after_write()
        return self._topics.get(name, topic)

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking ZooKeeper calls in a worker thread, only while connected.

        kazoo queues a request made without a connection until one returns, without a
        time limit, which would hold a worker thread and the awaiting task (rule 5 of
        DESIGN.md). Requests in flight when a connection drops fail with ConnectionLoss,
        so checking first bounds every call but those racing a disconnection, which
        `stop` releases."""
        if self._zk.state != KazooState.CONNECTED:
            raise ConnectionLoss("no ZooKeeper connection")
        return await asyncio.to_thread(fn, *args)

    async def _zk_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await self._in_thread(fn, *args)
        except ZK_ERRORS as exc:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"zookeeper: {exc!r}") from exc

    async def delete_topic(self, name: str) -> None:
        self._existing(name)

        def delete() -> None:
            with contextlib.suppress(NoNodeError):
                self._zk.delete(zk_paths.topic_path(name), recursive=True)
            with contextlib.suppress(NoNodeError):
                self._zk.delete(zk_paths.topic_config_path(name))

        await self._zk_call(delete)
        await self._refresh_after_write()

    async def create_partitions(
        self,
        name: str,
        total: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        topic = self._existing(name)
        current = len(topic.partitions)
        racks = self._racks()
        grown = plan_partitions(topic, total, assignments=assignments, racks=racks)
        new = [p.replicas for p in grown.partitions[current:]]
        live = set(racks)
        if validate_only:
            return grown

        def write() -> None:
            data, stat = self._zk.get(zk_paths.topic_path(name))
            topic_id, replicas = zk_paths.decode_assignment(data)
            if len(replicas) != current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "partitions changed concurrently")
            transaction = self._zk.transaction()
            transaction.set_data(
                zk_paths.topic_path(name),
                zk_paths.encode_assignment(topic_id, [*replicas, *new]),
                stat.version,
            )
            epoch = max(self._controller_epoch, 0)
            for i, assigned in enumerate(new):
                state = decisions.initial_state(assigned, live, epoch)
                transaction.create(zk_paths.partition_path(name, current + i))
                transaction.create(
                    zk_paths.state_path(name, current + i), zk_paths.encode_state(state)
                )
            results = transaction.commit()
            if any(isinstance(r, Exception) for r in results):
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"cannot add partitions: {results}")

        await self._zk_call(write)
        await self._refresh_after_write()
        return self._topics.get(name, grown)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        self._existing(name)
        validate_topic_configs(configs)
        await self._zk_call(self._replace_entity_config, f"topics/{name}", configs)
        await self._refresh_after_write()
        return self._existing(name)

    async def set_broker_configs(self, configs: Mapping[str, str]) -> None:
        validate_dynamic_broker_configs(configs)
        await self._write_broker_configs(str(self._me), configs)

    async def set_default_broker_configs(self, configs: Mapping[str, str]) -> None:
        validate_dynamic_broker_configs(configs, per_broker=False)
        await self._write_broker_configs("<default>", configs)

    async def _write_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Kafka's ZooKeeper mode stores passwords only encrypted with
        password.encoder.secret, which kbroker uses so far only for the mirror links'
        secrets (kbroker/mirror/secrets.py): refused as Kafka refuses them without it."""
        if any(is_password_config(name) for name in configs):
            raise KafkaError(ErrorCode.INVALID_CONFIG, "Password encoder secret not configured")
        await self._zk_call(self._replace_entity_config, f"brokers/{entity}", configs)
        await self._refresh_after_write()

    async def allocate_producer_ids(self) -> ProducerIdBlock:
        block: ProducerIdBlock = await self._zk_call(self._take_producer_id_block)
        log.info("producer ids %d..%d taken for this broker", block.first, block.last)
        return block

    def _take_producer_id_block(self) -> ProducerIdBlock:
        """Take the block after the latest one, written conditionally on the version read,
        as Kafka's ZooKeeper mode does; another broker taking one at the same time makes
        the write fail, and the loop reads again."""
        path = zk_paths.LATEST_PRODUCER_ID_BLOCK
        while True:
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                block = producer_id_blocks.block_after(None, self._me)
                try:
                    self._zk.create(path, producer_id_blocks.encode_znode(block))
                except NodeExistsError:
                    continue
                return block
            block = producer_id_blocks.block_after(producer_id_blocks.decode_znode(data), self._me)
            try:
                self._zk.set(path, producer_id_blocks.encode_znode(block), version=stat.version)
            except BadVersionError:
                continue
            return block

    async def alter_client_quotas(self, changes: Sequence[QuotaChange]) -> None:
        await self._zk_call(self._write_client_quotas, changes)
        await self._refresh_after_write()

    def _write_client_quotas(self, changes: Sequence[QuotaChange]) -> None:
        for key, ops in changes:

            def alter(config: dict[str, str], ops: Mapping[str, float | None] = ops) -> None:
                # A user's node holds its SCRAM credentials too: only the quota keys change.
                for name, value in ops.items():
                    if value is None:
                        config.pop(name, None)
                    else:
                        config[name] = quota_store.encode_quota(name, value)

            alter_entity_config(self._zk, quota_store.entity_path(key), alter)

    def quota_entity_refusal(self, key: QuotaEntity) -> str | None:
        return quota_store.zookeeper_problem(key)

    def _read_watched_config(self, path: str, watch: Callable[[Any], None]) -> dict[str, str]:
        try:
            data, _ = self._zk.get(path, watch=watch)
        except NoNodeError:
            self._zk.exists(path, watch=watch)
            return {}
        return zk_paths.decode_config(data)

    async def alter_scram_credentials(self, changes: Sequence[ScramChange]) -> None:
        await self._zk_call(write_scram_changes, self._zk, changes)
        await self._refresh_after_write()

    async def set_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        await self._set_named(named_configs.CLIENT_METRICS, name, configs)

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        await self._set_named(named_configs.GROUPS, group_id, configs)

    async def set_mirror_link(self, name: str, configs: Mapping[str, str]) -> None:
        await self._set_named(named_configs.MIRROR_LINKS, name, configs)

    async def _set_named(
        self, kind: named_configs.NamedConfigKind, name: str, configs: Mapping[str, str]
    ) -> None:
        def replace(config: dict[str, str]) -> None:
            config.clear()
            config.update(configs)

        await self._zk_call(alter_entity_config, self._zk, kind.entity_path(name), replace)
        await self._refresh_after_write()

    def scram_user_refusal(self, user: str) -> str | None:
        return credential_store.zookeeper_problem(user)

    async def alter_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]) -> None:
        await self._zk_call(self._write_acls, add, remove)
        await self._refresh_after_write()

    def acl_refusal(self, acl: AclBinding) -> str | None:
        return acl_store.zookeeper_problem(acl)

    def _write_acls(self, add: Sequence[AclBinding], remove: Sequence[AclBinding]) -> None:
        """Each affected pattern's znode is read, changed and written back conditionally on
        its version (another broker may change it at the same time), then announced."""
        adding = acl_store.by_pattern(add)
        removing = acl_store.by_pattern(remove)
        for pattern in sorted({*adding, *removing}, key=repr):
            path = acl_store.resource_path(pattern)
            while True:
                try:
                    data, stat = self._zk.get(path)
                    version: int | None = stat.version
                    current = acl_store.decode_acls(data, pattern)
                except NoNodeError:
                    version, current = None, set()
                wanted = (current - removing.get(pattern, set())) | adding.get(pattern, set())
                if wanted == current:
                    break
                try:
                    if version is None:
                        self._zk.create(path, acl_store.encode_acls(wanted), makepath=True)
                    elif wanted:
                        self._zk.set(path, acl_store.encode_acls(wanted), version=version)
                    else:
                        self._zk.delete(path, version=version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
                prefix, event = acl_store.change_notification(pattern)
                self._zk.create(prefix, event, sequence=True, makepath=True)
                break


# Offsets stored by ZooKeeper-based consumers: /consumers/<group>/offsets/<topic>/<partition>.
ZK_CONSUMERS = "/consumers"


def read_consumer_offsets(
    hosts: str, group: str | None, timeout: float
) -> dict[str, dict[tuple[str, int], bytes]]:
    """Group -> (topic, partition) -> the raw offset znode, from ``/consumers`` (blocking).

    Read-only; ``group`` None reads every group. Groups without offsets are left out, and a
    missing ``/consumers`` gives an empty result. For ``kbroker groups import-zk-offsets``;
    it lives here so that kazoo is imported by this module only.
    """
    zk = KazooClient(hosts=hosts, timeout=timeout, read_only=True)
    zk.start(timeout=timeout)
    found: dict[str, dict[tuple[str, int], bytes]] = {}
    try:
        groups = [group] if group is not None else sorted(zk.get_children(ZK_CONSUMERS))
        for g in groups:
            base = f"{ZK_CONSUMERS}/{g}/offsets"
            try:
                topics = zk.get_children(base)
            except NoNodeError:
                continue
            for topic in sorted(topics):
                for child in zk.get_children(f"{base}/{topic}"):
                    if child.isdigit():
                        data, _ = zk.get(f"{base}/{topic}/{child}")
                        found.setdefault(g, {})[(topic, int(child))] = data
    except NoNodeError:
        return {}
    finally:
        zk.stop()
        zk.close()
    return found


def alter_entity_config(
    zk: KazooClient, entity_path: str, alter: Callable[[dict[str, str]], None]
) -> None:
    """Change the config of the entity at `entity_path` (``users/alice``) in place with
    `alter`, read from and written back to its znode, then announce the change, as
    Kafka's AdminZkClient does (controller/config_znodes.py): an emptied quota entity's
    znode is deleted rather than left holding nothing."""
    path = config_znodes.config_path(entity_path)
    config = _entity_config(zk, path)
    alter(config)
    doomed = (
        None
        if config
        else config_znodes.node_to_delete(
            entity_path, lambda p: _children(zk, p), lambda p: _entity_config(zk, p)
        )
    )
    if doomed is not None:
        with contextlib.suppress(NoNodeError):
            zk.delete(doomed, recursive=True)
    else:
        data = zk_paths.encode_config(config)
        try:
            zk.set(path, data)
        except NoNodeError:
            zk.create(path, data, makepath=True)
    zk.create(
        config_znodes.CHANGE_PREFIX,
        config_znodes.encode_change(entity_path),
        sequence=True,
        makepath=True,
    )


def _entity_config(zk: KazooClient, path: str) -> dict[str, str]:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return {}
    return zk_paths.decode_config(data)


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def write_scram_changes(zk: KazooClient, changes: Sequence[ScramChange]) -> None:
    """Apply SCRAM credential changes to the users' znodes, user by user."""
    for user in dict.fromkeys(user for user, _, _ in changes):

        def alter(config: dict[str, str], user: str = user) -> None:
            changed = credential_store.changed_config(config, user, changes)
            config.clear()
            config.update(changed)

        alter_entity_config(zk, credential_store.entity_path(user), alter)


def write_scram_credentials(hosts: str, changes: Sequence[ScramChange], timeout: float) -> None:
    """Write SCRAM credential changes to a cluster's ZooKeeper (blocking), for
    ``kbroker users --zookeeper`` before any broker runs; it lives here so that kazoo is
    imported by this module only."""
    zk = KazooClient(hosts=hosts, timeout=timeout)
    zk.start(timeout=timeout)
    try:
        write_scram_changes(zk, changes)
    finally:
        zk.stop()
        zk.close()
