"""A mirror topic's link cut by a network black hole, as chaos/run.py cuts brokers apart.

    python -m chaos.mirror_cut run [--before 10] [--cut 30] [--after 15] [--rate 1000] [--dir DIR]

Needs root (namespaces, iptables). A source kbroker, a destination kbroker and a client host,
each in its own network namespace on one bridge (tests/ops/compose_emulation.Network). The
client (this module's ``client`` role, run in the client's namespace) creates a two-partition
topic on the source and its mirror on the destination (``kbroker mirrors create``), then
produces ``--rate`` records/s with an idempotent producer (values ``<n>``, record n to
partition n % 2) and prints the source's and the mirror's end offsets every second. After
``--before`` seconds every packet between the source and the destination is dropped
(iptables DROP both ways in both namespaces: a black hole, nothing is refused or reset) for
``--cut`` seconds, while the client still reaches both; then the rules are flushed and the
producer goes on for ``--after`` seconds. Then the client waits until the mirror holds what
the source holds and compares every record, offset by offset, and the values: each produced
once, in order per partition. Prints the samples and a JSON verdict; exits 1 when a record
is lost, duplicated or reordered or the link did not catch up.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.ops.compose_emulation import REPO, Network, tool_env

SOURCE, DESTINATION, CLIENT = "source", "destination", "client"
PORT = 9092
TOPIC = "cut"
PARTITIONS = 2
CATCH_UP_SECONDS = 180


# The client role, in the client's namespace ------------------------------------------------


def end_offsets(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cut-probe"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def read_all(bootstrap: str, ends: list[int]) -> dict[int, list[tuple[int, bytes]]]:
    """Every record below ``ends`` per partition, as (offset, value)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "cut-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 120
    while any(len(found[p]) < ends[p] for p in range(PARTITIONS)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {[len(v) for v in found.values()]} of {ends}")
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None and message.offset() < ends[message.partition()]:
                found[message.partition()].append((message.offset(), message.value()))
    consumer.close()
    return found


def wait_for_broker(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + 120
    while True:
        try:
            admin.list_topics(timeout=5)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def client(args: argparse.Namespace) -> int:
    wait_for_broker(args.source)
    wait_for_broker(args.destination)
    admin = AdminClient({"bootstrap.servers": args.source})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=60)
    created = subprocess.run(
        [sys.executable, "-m", "kbroker", "mirrors", "create", "--bootstrap-server"]
        + [args.destination, "--source-bootstrap", args.source, "--topic", TOPIC],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if created.returncode != 0:
        raise RuntimeError(created.stderr)
    producer = Producer(
        {"bootstrap.servers": args.source, "enable.idempotence": True, "linger.ms": 5}
    )
    total = int(args.rate * args.seconds)
    started = time.monotonic()
    next_sample = started
    print(json.dumps({"event": "producing"}), flush=True)
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - started) * args.rate))
        for n in range(sent, due):
            producer.produce(TOPIC, str(n).encode(), partition=n % PARTITIONS)
        sent = due
        producer.poll(0)
        if time.monotonic() >= next_sample:
            source, mirror = end_offsets(args.source), end_offsets(args.destination)
            at = round(time.monotonic() - started, 2)
            print(json.dumps({"t": at, "source": source, "mirror": mirror}), flush=True)
            next_sample += 1.0
        time.sleep(0.005)
    producer.flush(60)
    produced_at = time.monotonic()
    source = end_offsets(args.source)
    while (mirror := end_offsets(args.destination)) != source:
        if time.monotonic() - produced_at > CATCH_UP_SECONDS:
            break
        time.sleep(0.2)
    caught_up = time.monotonic() - produced_at
    from_source, from_mirror = read_all(args.source, source), read_all(args.destination, mirror)
    values = {p: [int(v) for _, v in records] for p, records in from_source.items()}
    verdict = {
        "produced": total,
        "source_ends": source,
        "mirror_ends": mirror,
        "seconds_to_catch_up_after_the_producer": round(caught_up, 2),
        "identical_offset_by_offset": from_source == from_mirror,
        # Each n once, n % 2 partition, ascending: nothing lost, duplicated or reordered.
        "values_exact": all(values[p] == list(range(p, total, PARTITIONS)) for p in values),
    }
    print(json.dumps({"verdict": verdict}), flush=True)
    return 0 if verdict["identical_offset_by_offset"] and verdict["values_exact"] else 1


# The orchestrator, as root in the host's namespace -------------------------------------------


def _iptables(net: Network, host: str, *args: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", net.hosts[host][0], "iptables", *args],
        check=True,
        capture_output=True,
        timeout=30,
    )


def black_hole(net: Network, on: bool) -> None:
    """Drop (on) or let through (off) every packet between the source and the destination."""
    for host, peer in ((SOURCE, DESTINATION), (DESTINATION, SOURCE)):
        if not on:
            _iptables(net, host, "-F")
            continue
        address = net.hosts[peer][1]
        _iptables(net, host, "-A", "INPUT", "-s", address, "-j", "DROP")
        _iptables(net, host, "-A", "OUTPUT", "-d", address, "-j", "DROP")


def start_broker(net: Network, host: str, work: Path) -> None:
    settings = {
        "listeners": f"PLAINTEXT://{net.hosts[host][1]}:{PORT}",
        "log.dirs": str(work / f"{host}-logs"),
    }
    argv = [sys.executable, "-m", "kbroker", "start"]
    for key, value in settings.items():
        argv += ["--override", f"{key}={value}"]
    net.start(host, argv, {**tool_env(), "PYTHONPATH": str(REPO)})


def orchestrate(args: argparse.Namespace, work: Path) -> int:
    net = Network(work)
    try:
        net.open([SOURCE, DESTINATION, CLIENT])
        for host in (SOURCE, DESTINATION):
            start_broker(net, host, work)
        seconds = args.before + args.cut + args.after
        role = subprocess.Popen(
            [
                *("ip", "netns", "exec", net.hosts[CLIENT][0], sys.executable),
                *("-m", "chaos.mirror_cut", "client"),
                *("--source", f"{net.hosts[SOURCE][1]}:{PORT}"),
                *("--destination", f"{net.hosts[DESTINATION][1]}:{PORT}"),
                *("--rate", str(args.rate), "--seconds", str(seconds)),
            ],
            env={**tool_env(), "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert role.stdout is not None
        started: float | None = None
        phase = "before"
        for line in role.stdout:
            print(line, end="", flush=True)
            event: dict[str, Any] = json.loads(line)
            if event.get("event") == "producing":
                started = time.monotonic()
            if started is None:
                continue
            elapsed = time.monotonic() - started
            if phase == "before" and elapsed >= args.before:
                black_hole(net, True)
                phase = "cut"
                print(json.dumps({"event": "cut", "t": round(elapsed, 2)}), flush=True)
            elif phase == "cut" and elapsed >= args.before + args.cut:
                black_hole(net, False)
                phase = "healed"
                print(json.dumps({"event": "healed", "t": round(elapsed, 2)}), flush=True)
        return role.wait(60)
    finally:
        net.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role", required=True)
    run = sub.add_parser("run")
    run.add_argument("--before", type=float, default=10.0)
    run.add_argument("--cut", type=float, default=30.0)
    run.add_argument("--after", type=float, default=15.0)
    run.add_argument("--rate", type=int, default=1000)
    run.add_argument("--dir", type=Path)
    role = sub.add_parser("client")
    role.add_argument("--source", required=True)
    role.add_argument("--destination", required=True)
    role.add_argument("--rate", type=int, required=True)
    role.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    if args.role == "client":
        sys.exit(client(args))
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        sys.exit(orchestrate(args, args.dir))
    with tempfile.TemporaryDirectory(prefix="mirror-cut-") as work:
        sys.exit(orchestrate(args, Path(work)))


if __name__ == "__main__":
    main()
