"""The broker's CPU per Fetch for a consumer of many idle partitions, with and without an
incremental fetch session (KIP-227, issue 17).

A consumer assigned every partition of a broker with little traffic: full fetches name
all of them each time and get all of them back; in a session, after the first full fetch,
a request names nothing and the answer holds only partitions with new data. Fetch v12
requests are sent over one socket with max_wait_ms 0 (so no long poll hides the cost); the
broker's CPU time (utime + stime from /proc) is divided by the request count.

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--requests 2000]
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from wire.api_keys import ApiKey  # noqa: E402
from wire.frame import decode_response, encode_request  # noqa: E402
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from wire.messages.request_header import RequestHeader  # noqa: E402

VERSION = 12


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def call(sock: socket.socket, request: FetchRequest, correlation_id: int) -> object:
    header = RequestHeader(
        request_api_key=ApiKey.FETCH, request_api_version=VERSION, correlation_id=correlation_id
    )
    sock.sendall(encode_request(header, request, VERSION))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return decode_response(recv_exact(sock, size), ApiKey.FETCH, VERSION)[1]


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def fetch(topics: dict[str, int], session_id: int, epoch: int, full: bool) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic=name,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                    for p in range(count)
                ],
            )
            for name, count in topics.items()
        ]
        if full
        else [],
    )


def per_request(pid: int, sock: socket.socket, requests: list[FetchRequest]) -> float:
    before = cpu_seconds(pid)
    for i, request in enumerate(requests):
        call(sock, request, i)
    return (cpu_seconds(pid) - before) / len(requests) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args(argv)
    per_topic = 100
    topics = {f"idle{i}": per_topic for i in range(max(1, args.partitions // per_topic))}
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-sessions-") as tmp:
        broker = BrokerProcess(Path(tmp))
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
                f.result(120)
            time.sleep(1)
            pid = broker.pid or 0
            with socket.create_connection((broker.host, broker.port)) as sock:
                full = [fetch(topics, 0, -1, True) for _ in range(args.requests)]
                full_us = per_request(pid, sock, full)
                first = call(sock, fetch(topics, 0, 0, True), 0)
                session_id = first.session_id  # type: ignore[attr-defined]
                incremental = [
                    fetch(topics, session_id, i + 1, False) for i in range(args.requests)
                ]
                session_us = per_request(pid, sock, incremental)
        finally:
            broker.stop()
    total = sum(topics.values())
    print(f"{total} idle partitions, {args.requests} Fetch v{VERSION} requests each way:")
    print(f"  full fetches:        {full_us:8.0f} µs of broker CPU per request")
    print(f"  fetch session:       {session_us:8.0f} µs of broker CPU per request")
    print(f"  ratio:               {full_us / session_us:8.1f}x")


if __name__ == "__main__":
    main()
