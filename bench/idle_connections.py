"""What idle connections cost a broker: RSS and CPU with --connections clients connected,
each having sent one ApiVersions request, then idle.

Starts each broker of --brokers (or measures --pid, a broker already running at
--bootstrap), samples its RSS and its CPU time over --idle seconds, opens the connections,
then samples both again. Prints RSS before and after (MB), per connection (KB), and CPU
while idle in percent of one core, without and with the connections.
"""

from __future__ import annotations

import argparse
import socket
import struct
import time

# brokers, imported before wire, puts the repository root on sys.path.
from brokers import (
    STARTERS,
    BrokerUnderTest,
    broker_names,
    cpu_seconds,
    raise_open_files_limit,
    rss_mb,
)

from wire.api_keys import ApiKey
from wire.frame import encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.request_header import RequestHeader


def api_versions_frame() -> bytes:
    header = RequestHeader(
        request_api_key=ApiKey.API_VERSIONS,
        request_api_version=0,
        correlation_id=1,
        client_id="idle",
    )
    return encode_request(header, ApiVersionsRequest(), 0)


def connect_all(host: str, port: int, count: int) -> list[socket.socket]:
    request = api_versions_frame()
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=30)
        sock.sendall(request)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        sock.recv(size, socket.MSG_WAITALL)
        sockets.append(sock)
    return sockets


def cpu_percent(pid: int, seconds: float) -> float:
    """The process's CPU use over the next `seconds`, in percent of one core."""
    cpu_start, wall_start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - cpu_start) / (time.monotonic() - wall_start) * 100


def measure(broker: BrokerUnderTest, connections: int, idle: float) -> dict[str, float]:
    pid = broker.pid
    if pid is None:
        raise RuntimeError(f"{broker.name}: no process to read")
    # Let start-up work (JIT, background tasks' first rounds) settle before the baseline.
    time.sleep(1.0)
    before = rss_mb(pid)
    cpu_before = cpu_percent(pid, idle)
    sockets = connect_all(broker.host, broker.port, connections)
    try:
        time.sleep(1.0)
        after = rss_mb(pid)
        cpu_after = cpu_percent(pid, idle)
    finally:
        for sock in sockets:
            sock.close()
    return {
        "idle_rss_before_mb": before,
        "idle_rss_after_mb": after,
        "idle_added_rss_mb": after - before,
        "idle_kb_per_connection": (after - before) * 1024 / connections,
        "idle_cpu_before_pct": cpu_before,
        "idle_cpu_after_pct": cpu_after,
        "idle_added_cpu_pct": cpu_after - cpu_before,
    }


def report(broker: BrokerUnderTest, connections: int, f: dict[str, float]) -> None:
    print(
        f"{broker.name}: {connections} idle connections: RSS {f['idle_rss_before_mb']:.1f} -> "
        f"{f['idle_rss_after_mb']:.1f} MB (+{f['idle_added_rss_mb']:.1f} MB, "
        f"{f['idle_kb_per_connection']:.1f} KB each), CPU while idle "
        f"{f['idle_cpu_before_pct']:.2f}% -> {f['idle_cpu_after_pct']:.2f}% of a core",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU sampling")
    parser.add_argument("--brokers", type=broker_names, default="kbroker")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--pid", type=int, help="measure this running broker instead")
    args = parser.parse_args()
    raise_open_files_limit(args.connections + 256)
    if args.pid:
        broker = BrokerUnderTest("running", args.bootstrap, attached_pid=args.pid)
        report(broker, args.connections, measure(broker, args.connections, args.idle))
        return
    for name in args.brokers:
        with STARTERS[name]() as broker:
            report(broker, args.connections, measure(broker, args.connections, args.idle))


if __name__ == "__main__":
    main()
