"""A broker under hostile clients, on loopback, bounded in time (issue 13).

Starts its own kbroker (or measures --bootstrap with --pid for its RSS) and runs:

1. A quiet phase: a confluent-kafka producer and consumer for --seconds; their throughput
   and the producer's p99 delivery latency.
2. A hostile phase of the same length, with, from a separate process: --trickle
   connections (1,000) each announcing a maximal frame (socket.request.max.bytes) and
   trickling a few bytes a second, --idle connections (200) that connect and stay silent
   (half of them after half a size prefix), and connections sending random garbage. The
   broker's RSS is printed every second; the same producer and consumer run beside them.
3. Compression bombs: a zstd and a gzip batch that expand to --bomb-gb GB, produced to a
   compacted topic (whose keys the broker must check) and, for gzip, as a legacy Produce v2
   message set (up-converted): the error codes and the RSS before and after.
4. Connection limits: a second broker with max.connections.per.ip and max.connections set;
   how many of a burst of connections are served, refused or held back, while a client
   that was already connected keeps working.

With --fairness (issue 29) it runs instead, on kbroker and Apache Kafka 4.3 in one go
(--brokers), over PLAINTEXT and over SASL_SSL with the attackers unauthenticated
(--listeners), the five attacks of bench/hostile_attacks.py one after the other: for each,
the broker's largest RSS, and a well-behaved producer (--rate records a second, paced) and
consumer: their throughput and the producer's p99 latency, alone and during the attack,
with the load average beside each row. The brokers run side by side and the rows
alternate between them. A broker that does not answer a minute after an
attack is restarted (and said so).

Run: .venv/bin/python bench/hostile_clients.py [--seconds 20]
     .venv/bin/python bench/hostile_clients.py --fairness [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import struct
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.hostile_attacks import ATTACKS, Target, run_attack  # noqa: E402
from bench.throughput import own_broker  # noqa: E402
from compat_tests.broker_process import BrokerProcess  # noqa: E402
from wire.api_keys import ApiKey  # noqa: E402
from wire.frame import encode_request  # noqa: E402
from wire.messages.api_versions_request import ApiVersionsRequest  # noqa: E402
from wire.messages.produce_request import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from wire.messages.request_header import RequestHeader  # noqa: E402
from wire.records.batch import BATCH_HEADER_SIZE, CRC_OFFSET, compute_crc  # noqa: E402
from wire.records.compression import GZIP, ZSTD  # noqa: E402
from wire.records.record import Record, build_batch  # noqa: E402

MAX_FRAME = 104857600
VALUE = b"x" * 100


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# --- the clients that keep working -----------------------------------------------------


# --- the attackers (own process) --------------------------------------------------------


async def _trickler(host: str, port: int, stop_at: float) -> None:
    """Announce a maximal frame, then send a byte pair a second; reconnect when closed."""
    while time.monotonic() < stop_at:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(struct.pack(">i", MAX_FRAME) + b"\x00\x12\x00\x00")
            while time.monotonic() < stop_at and not reader.at_eof():
                await asyncio.sleep(1.0)
                writer.write(os.urandom(2))
                await writer.drain()
            writer.close()
        except (ConnectionError, OSError):
            await asyncio.sleep(0.5)


async def _idler(host: str, port: int, stop_at: float, half_prefix: bool) -> None:
    while time.monotonic() < stop_at:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            if half_prefix:
                writer.write(b"\x00\x10")
            while time.monotonic() < stop_at and not reader.at_eof():
                await asyncio.sleep(1.0)
            writer.close()
        except (ConnectionError, OSError):
            await asyncio.sleep(0.5)


async def _garbage(host: str, port: int, stop_at: float) -> None:
    rng = random.Random(1)
    while time.monotonic() < stop_at:
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.write(rng.randbytes(rng.randint(1, 4096)))
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.close()
        except (ConnectionError, OSError):
            await asyncio.sleep(0.1)


async def _attack(host: str, port: int, seconds: float, trickle: int, idle: int) -> None:
    stop_at = time.monotonic() + seconds
    tasks = [_trickler(host, port, stop_at) for _ in range(trickle)]
    tasks += [_idler(host, port, stop_at, i % 2 == 0) for i in range(idle)]
    tasks += [_garbage(host, port, stop_at) for _ in range(4)]
    await asyncio.gather(*tasks)


def attack(host: str, port: int, seconds: float, trickle: int, idle: int) -> None:
    asyncio.run(_attack(host, port, seconds, trickle, idle))


# --- bombs and connection limits --------------------------------------------------------


def bomb_batch(codec: int, expanded: int) -> bytes:
    """A v2 batch of one record whose compressed records section expands to `expanded`
    zero bytes; compressed in 64 MiB steps so building it costs no memory."""
    import zlib

    import zstandard

    chunk = bytes(64 * 1024 * 1024)
    if codec == GZIP:
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        body = b"".join(gz.compress(chunk) for _ in range(expanded // len(chunk))) + gz.flush()
    else:
        zc = zstandard.ZstdCompressor(level=3).compressobj()
        body = b"".join(zc.compress(chunk) for _ in range(expanded // len(chunk))) + zc.flush()
    template = build_batch([Record(0, 0, b"k", b"v", [])])
    out = bytearray(template[:BATCH_HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)


def produce_raw(host: str, port: int, topic: str, records: bytes, version: int) -> int:
    """One Produce request over a raw socket; returns the partition's error code."""
    from wire.frame import decode_response

    request = ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    header = RequestHeader(
        request_api_key=ApiKey.PRODUCE, request_api_version=version, correlation_id=1
    )
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(encode_request(header, request, version))
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        _, response = decode_response(_recv_exactly(sock, size), ApiKey.PRODUCE, version)
    return int(response.responses[0].partition_responses[0].error_code)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def legacy_gzip_bomb(expanded: int) -> bytes:
    """A magic 1 message set: one gzip wrapper whose value expands to `expanded` bytes."""
    import zlib

    chunk = bytes(64 * 1024 * 1024)
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    value = b"".join(gz.compress(chunk) for _ in range(expanded // len(chunk))) + gz.flush()
    body = struct.pack(">bbq", 1, GZIP, 0) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def bombs(broker: BrokerProcess, gigabytes: float) -> None:
    expanded = int(gigabytes * 1024**3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"bombs-{uuid.uuid4().hex[:8]}"
    # gzip expands at most ~1,000 times: a 4 GB gzip bomb is 4 MB, so the topic allows that.
    config = {"cleanup.policy": "compact", "max.message.bytes": str(16 * 1024 * 1024)}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=30)
    plain = f"legacy-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(plain, 1, 1)])[plain].result(timeout=30)
    assert broker.pid is not None
    cases = [
        ("zstd batch, compacted topic (Produce v9)", topic, bomb_batch(ZSTD, expanded), 9),
        ("gzip batch, compacted topic (Produce v9)", topic, bomb_batch(GZIP, expanded), 9),
        ("gzip message set, up-converted (Produce v2)", plain, legacy_gzip_bomb(expanded), 2),
    ]
    for name, target, records, version in cases:
        before = rss_mb(broker.pid)
        started = time.monotonic()
        code = produce_raw(broker.host, broker.port, target, records, version)
        print(
            f"  {name}: {len(records):,} bytes expanding to {gigabytes:g} GB -> error code "
            f"{code} in {time.monotonic() - started:.2f} s; broker RSS {before:.0f} -> "
            f"{rss_mb(broker.pid):.0f} MB"
        )
    print(f"  still serving: {api_versions_ok(broker.host, broker.port)}")


def api_versions_ok(host: str, port: int, timeout: float = 5.0) -> bool:
    header = RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(encode_request(header, ApiVersionsRequest(), 0))
            size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
            _recv_exactly(sock, size)
        return True
    except OSError:
        return False


def _served(sock: socket.socket, timeout: float = 0.5) -> str:
    """'served', 'closed' (refused by the broker) or 'waiting' (not accepted yet)."""
    header = RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=0)
    sock.settimeout(timeout)
    try:
        sock.sendall(encode_request(header, ApiVersionsRequest(), 0))
        return "served" if sock.recv(4) else "closed"
    except TimeoutError:
        return "waiting"
    except OSError:
        return "closed"


def _burst(broker: BrokerProcess, count: int) -> tuple[list[socket.socket], dict[str, int]]:
    burst = [socket.create_connection((broker.host, broker.port)) for _ in range(count)]
    time.sleep(0.5)
    outcomes: dict[str, int] = {"served": 0, "closed": 0, "waiting": 0}
    for sock in burst:
        outcomes[_served(sock)] += 1
    return burst, outcomes


def connection_limits() -> None:
    for overrides, count in (
        ({"max.connections.per.ip": "50"}, 100),
        ({"max.connections": "50"}, 100),
    ):
        with own_broker(**overrides) as broker:
            existing = socket.create_connection((broker.host, broker.port))
            assert _served(existing) == "served"
            burst, outcomes = _burst(broker, count)
            still = _served(existing)
            for sock in burst[:10]:
                sock.close()
            time.sleep(0.5)
            later = sum(_served(sock) == "served" for sock in burst[10:] if sock.fileno() >= 0)
            print(
                f"  {overrides}: 1 client connected, then a burst of {count}: {outcomes}; the "
                f"first client: {still}; after 10 of the burst close, served: {later} of the "
                f"rest"
            )
            for sock in [existing, *burst]:
                sock.close()
            text = broker.stderr_path.read_text()
            lines = text.count("Rejected connection") + text.count("at its connection limit")
            print(f"  log lines about the refusals: {lines}")


# --- fairness under the five attacks of issue 29 -----------------------------------------

PLAIN_PASSWORD = "alice-secret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{PLAIN_PASSWORD}" user_alice="{PLAIN_PASSWORD}";'
)


def run_clients(
    settings: dict[str, str], seconds: float, rate: int | None = None
) -> dict[str, float]:
    """A producer sending ``rate`` records of 100 bytes a second (None: as fast as it can)
    and a consumer reading them, for ``seconds``: what each achieved and the producer's
    delivery latency."""
    topic = f"fair-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    latencies: list[float] = []
    errors = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
        else:
            latencies.append(msg.latency())

    consumed = 0
    stop = threading.Event()

    def consume() -> None:
        nonlocal consumed
        consumer = Consumer({**settings, "group.id": "fair-bench", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            for message in consumer.consume(10_000, timeout=0.2):
                if message.error() is None:
                    consumed += 1
        consumer.close()

    reader = threading.Thread(target=consume)
    reader.start()
    producer = Producer({**settings, "linger.ms": 5, "queue.buffering.max.messages": 200_000})
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        while rate is None or sent < rate * elapsed:
            try:
                producer.produce(topic, VALUE, on_delivery=delivered)
            except BufferError:
                break
            sent += 1
            if rate is None and sent % 1000 == 0:
                break
        producer.poll(0.001)
    producer.flush(30)
    elapsed = time.monotonic() - started
    # The consumer gets a moment to read what was acknowledged last.
    deadline = time.monotonic() + 5
    while consumed < len(latencies) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join()
    latencies.sort()
    return {
        "produced_per_s": len(latencies) / elapsed,
        "consumed_per_s": consumed / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else float("nan"),
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else float("nan"),
        "errors": errors,
        "unacked": sent - len(latencies),
    }


def fill_topic(settings: dict[str, str], topic: str, megabytes: int) -> None:
    """A topic with data for the pipelined fetches."""
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    producer = Producer({**settings, "linger.ms": 20})
    for _ in range(megabytes * 1024):
        while True:
            try:
                producer.produce(topic, b"f" * 1000)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def answers(settings: dict[str, str], timeout: float) -> bool:
    try:
        AdminClient({**settings, "socket.connection.setup.timeout.ms": "3000"}).list_topics(
            timeout=timeout
        )
    except Exception:  # noqa: BLE001 - any failure means it does not answer
        return False
    return True


def security_overrides(name: str, ports: dict[str, int], pki: Any) -> dict[str, str]:
    """PLAINTEXT and SASL_SSL (PLAIN, one user) listeners for kbroker or Kafka 4.3."""
    from tests.security.certs import P12_PASSWORD

    listeners = {"PLAINTEXT": ports["PLAINTEXT"], "SASL_SSL": ports["SASL_SSL"]}
    common = {
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki.broker_p12),
        "ssl.keystore.password": P12_PASSWORD,
    }
    if name == "kbroker":
        common["ssl.keystore.type"] = "PEM"
        common["ssl.keystore.location"] = str(pki.broker_keystore)
        del common["ssl.keystore.password"]
        return {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
            **common,
        }
    controller = f"127.0.0.1:{ports['CONTROLLER']}"
    return {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items())
        + f",CONTROLLER://{controller}",
        "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
        "listener.security.protocol.map": (
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"
        ),
        "sasl.enabled.mechanisms": "PLAIN",
        **common,
    }


class FairnessBroker:
    """kbroker or Kafka 4.3 with PLAINTEXT and SASL_SSL listeners, restartable."""

    def __init__(self, name: str, work: Path) -> None:
        from compat_tests.broker_process import free_port
        from compat_tests.kafka_process import KRaftKafkaProcess
        from tests.security.certs import write_pki

        self.name = name
        self.pki = write_pki(work / "pki")
        if name == "kbroker":
            self.process: BrokerProcess = BrokerProcess(work / "broker")
        else:
            process = KRaftKafkaProcess(work / "broker")
            process.environment = lambda: {  # type: ignore[method-assign]
                **KRaftKafkaProcess.environment(process),
                "KAFKA_HEAP_OPTS": "-Xmx1g",
            }
            self.process = process
        ports = {"PLAINTEXT": self.process.port, "SASL_SSL": free_port()}
        if name != "kbroker":
            ports["CONTROLLER"] = process.controller_port
        self.ports = ports
        self.process.overrides = security_overrides(name, ports, self.pki)

    def start(self) -> None:
        self.process.start(180.0)

    def stop(self) -> None:
        self.process.stop(30.0)

    def restart(self) -> None:
        self.process.kill()
        self.start()

    def client_settings(self, listener: str) -> dict[str, str]:
        if listener == "plaintext":
            return {"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}"}
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_SSL']}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": PLAIN_PASSWORD,
            "ssl.ca.location": str(self.pki.ca),
        }


def fairness_row(
    broker: FairnessBroker, listener: str, attack: str, args: argparse.Namespace, bait: str
) -> dict[str, Any]:
    settings = broker.client_settings(listener)
    port = broker.ports["PLAINTEXT" if listener == "plaintext" else "SASL_SSL"]
    target = Target("127.0.0.1", port, listener != "plaintext", bait, args.attacker_address)
    results: multiprocessing.Queue[dict[str, int]] = multiprocessing.Queue()
    attacker = multiprocessing.Process(
        target=run_attack, args=(attack, target, args.seconds + 8, results)
    )
    pid = broker.process.pid
    assert pid is not None
    samples: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            try:
                samples.append(rss_mb(pid))
            except OSError:
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    attacker.start()
    time.sleep(4)  # the attackers connect and settle (no assertion follows: a benchmark)
    load = os.getloadavg()[0]
    try:
        clients = run_clients(settings, args.seconds, args.rate)
    except Exception as exc:  # noqa: BLE001 - a broker that stops answering is a result
        clients = {"failed": str(exc)[:80]}
    attacker.join(args.seconds + 60)
    stats = results.get(timeout=30) if not attacker.is_alive() else {}
    if attacker.is_alive():
        attacker.kill()
    stop.set()
    watcher.join()
    left = time.monotonic()
    recovered = answers(settings, 60)
    row = {
        "attack": attack,
        "rss_max_mb": round(max(samples, default=float("nan"))),
        "load1": round(load, 2),
        **clients,
        "attacker": stats,
        "answers_after_s": round(time.monotonic() - left, 1) if recovered else None,
    }
    if not recovered:
        broker.restart()
        row["restarted"] = True
    return row


def fairness(args: argparse.Namespace) -> None:
    """Every broker runs for the whole benchmark and the rows alternate between them (the
    machine is shared: its load moves, and alternating spreads that over both)."""
    import tempfile

    brokers: list[tuple[FairnessBroker, Path, str]] = []
    try:
        for name in args.brokers.split(","):
            work = Path(tempfile.mkdtemp(prefix=f"fairness-{name}-"))
            broker = FairnessBroker(name, work)
            brokers.append((broker, work, f"bait-{uuid.uuid4().hex[:6]}"))
            broker.start()
            fill_topic(broker.client_settings("plaintext"), brokers[-1][2], 8)
        for listener in args.listeners.split(","):
            alone: dict[str, dict[str, float]] = {}
            for broker, _, _ in brokers:
                load = os.getloadavg()[0]
                alone[broker.name] = run_clients(
                    broker.client_settings(listener), args.seconds, args.rate
                )
                print(
                    f"{broker.name} {listener} alone: {alone[broker.name]} load1 {load:.2f}; "
                    f"RSS {rss_mb(broker.process.pid):.0f} MB",  # type: ignore[arg-type]
                    flush=True,
                )
            for attack in args.attacks.split(","):
                for broker, _, bait in brokers:
                    row = fairness_row(broker, listener, attack, args, bait)
                    base = alone[broker.name]
                    kept = {
                        key: f"{100 * row[key] / base[key]:.0f} %"
                        for key in ("produced_per_s", "consumed_per_s")
                        if key in row and base.get(key)
                    }
                    print(f"{broker.name} {listener} {attack}: {row} kept {kept}", flush=True)
    finally:
        for broker, work, _ in brokers:
            broker.stop()
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--trickle", type=int, default=1000)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--bomb-gb", type=float, default=4.0)
    parser.add_argument("--fairness", action="store_true", help="the issue 29 attacks instead")
    parser.add_argument("--brokers", default="kbroker,kafka43")
    parser.add_argument("--listeners", default="plaintext,sasl_ssl")
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument("--rate", type=int, default=5000, help="records/s of the good producer")
    parser.add_argument(
        "--attacker-address", default="127.0.0.2", help="where the attackers connect from"
    )
    args = parser.parse_args(argv)
    if args.fairness:
        fairness(args)
        return
    with own_broker() as broker:
        assert broker.pid is not None
        print(f"broker pid {broker.pid}, RSS {rss_mb(broker.pid):.0f} MB at start")
        quiet = run_clients({"bootstrap.servers": broker.bootstrap}, args.seconds)
        print(f"quiet:   {quiet}")
        attacker = multiprocessing.Process(
            target=attack,
            args=(broker.host, broker.port, args.seconds + 5, args.trickle, args.idle),
        )
        attacker.start()
        samples: list[float] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(1.0):
                samples.append(rss_mb(broker.pid))  # type: ignore[arg-type]
                print(f"  t={len(samples):3d}s broker RSS {samples[-1]:6.0f} MB", flush=True)

        watcher = threading.Thread(target=watch)
        watcher.start()
        time.sleep(3)  # let the attackers connect
        hostile = run_clients({"bootstrap.servers": broker.bootstrap}, args.seconds)
        stop.set()
        watcher.join()
        attacker.join()
        print(f"hostile: {hostile}")
        print(
            f"broker RSS under attack: max {max(samples):.0f} MB, "
            f"median {statistics.median(samples):.0f} MB"
        )
        print("compression bombs:")
        bombs(broker, args.bomb_gb)
    print("connection limits:")
    connection_limits()


if __name__ == "__main__":
    main()
