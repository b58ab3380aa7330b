"""What idle connections cost a broker: RSS and CPU with --connections clients connected,
each having sent one ApiVersions request, then idle.

Starts a kbroker process (or measures --pid, a broker already running at --bootstrap),
reads its RSS, opens the connections, reads RSS again, then samples the broker's CPU time
over --idle seconds. Prints RSS before and after (MB), per connection (KB), and CPU while
idle in percent of one core.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from wire.api_keys import ApiKey  # noqa: E402
from wire.frame import encode_request  # noqa: E402
from wire.messages.api_versions_request import ApiVersionsRequest  # noqa: E402
from wire.messages.request_header import RequestHeader  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


@contextlib.contextmanager
def broker_under_test(args: argparse.Namespace) -> Iterator[tuple[str, int, int]]:
    if args.pid:
        host, _, port = args.bootstrap.rpartition(":")
        yield host, int(port), args.pid
        return
    with tempfile.TemporaryDirectory() as work:
        overrides = {"max.connections.per.ip": str(args.connections + 100)}
        with BrokerProcess(Path(work) / "broker", overrides=overrides) as broker:
            assert broker.pid is not None
            yield broker.host, broker.port, broker.pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU sampling")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--pid", type=int, help="measure this running broker instead")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.connections + 256)), hard))
    with broker_under_test(args) as (host, port, pid):
        time.sleep(1.0)
        before = rss_mb(pid)
        sockets = connect_all(host, port, args.connections)
        time.sleep(1.0)
        after = rss_mb(pid)
        cpu_start, wall_start = cpu_seconds(pid), time.monotonic()
        time.sleep(args.idle)
        cpu = (cpu_seconds(pid) - cpu_start) / (time.monotonic() - wall_start)
        for sock in sockets:
            sock.close()
    print(
        f"{args.connections} idle connections: RSS {before:.1f} -> {after:.1f} MB "
        f"(+{after - before:.1f} MB, {(after - before) * 1024 / args.connections:.1f} KB each), "
        f"CPU while idle {cpu * 100:.2f}% of a core"
    )


if __name__ == "__main__":
    main()
