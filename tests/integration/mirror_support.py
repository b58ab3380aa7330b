"""Helpers of the mirror topic tests (tests/integration/test_mirror_topics.py and
tests/cluster/test_mirror_cluster.py): the CLI as an operator runs it, producing, reading
raw batches, waiting for a mirror to catch up and comparing it with its source."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.broker_process import REPO_ROOT
from kbroker.cli.ops.admin import OpsError, leaders, produce
from kbroker.client import LATEST, KafkaClient, parse_address
from wire.api_keys import ApiKey
from wire.errors import KafkaError as WireKafkaError
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from wire.messages.fetch_response import FetchResponse
from wire.records.batch import iter_batches

DEADLINE_SECONDS = 90.0


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    return [parse_address(a) for a in bootstrap.split(",")]


def mirrors(*args: str) -> subprocess.CompletedProcess[str]:
    """``kbroker mirrors ...`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kbroker", "mirrors", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def create_topic(bootstrap: str, name: str, partitions: int, replicas: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replicas)])[name].result(timeout=30)


def produce_plain(
    bootstrap: str, topic: str, values: list[str], batch_size: int | None = None
) -> None:
    """``batch_size``: librdkafka's batch.size (its default, 1 MB, packs a burst in one
    batch)."""
    config: dict[str, str | int] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    if batch_size is not None:
        config["batch.size"] = batch_size
    producer = Producer(config)
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), key=b"%d" % i)
    assert producer.flush(30) == 0


def produce_transactions(bootstrap: str, topic: str) -> tuple[list[str], list[str]]:
    """A committed, an aborted and a committed transaction; returns (committed, aborted)
    values."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"mirror-{topic}", "linger.ms": 5}
    )
    producer.init_transactions(30)
    committed: list[str] = []
    aborted: list[str] = []
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = [f"txn-{round_}-{i}" for i in range(20)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value.encode(), key=b"%d" % i)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.abort_transaction(30)
            aborted += values
    return committed, aborted


async def _raw_batches(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every record batch of the partition, as the leader stores it (READ_UNCOMMITTED)."""
    async with KafkaClient(addresses(bootstrap)) as client:
        end = (await client.list_offsets([(topic, partition)], LATEST))[(topic, partition)]
        await client.metadata([topic])
        leader = client.cluster.leader((topic, partition))
        assert leader is not None
        connection = await client.node(leader.node_id)
        batches: list[bytes] = []
        offset = 0
        while offset < end:
            request = FetchRequest(
                max_wait_ms=100,
                min_bytes=1,
                topics=[
                    FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchPartition(
                                partition=partition,
                                fetch_offset=offset,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            )
            response, _ = await connection.request(ApiKey.FETCH, request, 12)
            assert isinstance(response, FetchResponse)
            data = bytes(response.responses[0].partitions[0].records or b"")
            assert response.responses[0].partitions[0].error_code == 0
            for pos, header in iter_batches(data):
                if pos + header.size <= len(data) and header.next_offset > offset:
                    batches.append(data[pos : pos + header.size])
                    offset = header.next_offset
        return batches


def raw_batches(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    return asyncio.run(_raw_batches(bootstrap, topic, partition))


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    async def ask() -> dict[int, int]:
        async with KafkaClient(addresses(bootstrap)) as client:
            found = await client.list_offsets([(topic, p) for p in range(partitions)], LATEST)
            return {p: found[(topic, p)] for p in range(partitions)}

    return asyncio.run(ask())


def end_offsets_now(bootstrap: str, topic: str, partitions: int) -> dict[int, int] | str:
    """The end offsets, or why they cannot be had now (a partition without a reachable
    leader after a kill, a mirror partition not created yet)."""
    try:
        return end_offsets(bootstrap, topic, partitions)
    except (OSError, KafkaException, WireKafkaError) as exc:
        return repr(exc)


def wait_caught_up(source: str, mirror: str, topic: str, partitions: int) -> dict[int, int]:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        want = end_offsets_now(source, topic, partitions)
        have = end_offsets_now(mirror, topic, partitions)
        if isinstance(want, dict) and have == want:
            return want
        if time.monotonic() > deadline:
            raise AssertionError(f"mirror at {have}, source at {want}")
        time.sleep(0.2)


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[str]:
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    done: set[int] = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                    continue
                raise AssertionError(message.error())
            values.append(message.value().decode())
    finally:
        consumer.close()
    assert len(done) == partitions, "consumer did not reach the end of every partition"
    return values


def produce_error_message(bootstrap: str, topic: str) -> str:
    """The error message of a Produce (v8+ carries one, KIP-467) to partition 0."""

    async def send() -> str:
        async with KafkaClient(addresses(bootstrap)) as client:
            leader = (await leaders(client, topic))[0]
            try:
                await produce(client, topic, 0, leader, [(None, b"local", [])], acks=-1)
            except OpsError as exc:
                return str(exc)
            return ""

    return asyncio.run(send())


def assert_identical(source: str, mirror: str, topic: str, partitions: int) -> None:
    for p in range(partitions):
        theirs = raw_batches(source, topic, p)
        mine = raw_batches(mirror, topic, p)
        assert len(mine) == len(theirs), f"partition {p}: {len(mine)} vs {len(theirs)} batches"
        for i, (a, b) in enumerate(zip(theirs, mine, strict=True)):
            assert a == b, f"partition {p}, batch {i}: bytes differ"


class CuttableLink:
    """A TCP relay between the mirror and one source listener, which a test can cut: every
    relayed connection is reset and new ones are closed at once until ``heal``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        # Every socket of a live relayed connection; cut() closes them all, and no socket
        # joins while the link is cut (checked under the lock).
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _keep(self, *sockets: socket.socket) -> bool:
        with self._lock:
            if not self._cut:
                self._open.update(sockets)
                return True
        for s in sockets:
            s.close()
        return False

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._keep(client):
                threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            alive = client in self._open
        if not alive or not self._keep(upstream):
            client.close()
            upstream.close()
            return
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def heal(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self.cut()
        self._listener.close()
