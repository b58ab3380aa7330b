"""read_committed vs read_uncommitted Fetch on a log of transactions: per-request cost,
throughput, and whether the data still goes out with sendfile.

Starts a kbroker process on a temporary log directory, writes transactions of
--txn-records records of --record-size bytes (one in --abort-every aborted) through Produce
and WriteTxnMarkers, then reads the partition from the beginning to its end the way a
consumer does (Fetch v12, partition_max_bytes 1 MiB, one request after the other on one
connection), alternating the two isolation levels for --repeat passes each, and prints the
median pass of each: requests, microseconds per request, MB/s. With --strace (needs strace
and ptrace rights) it then counts the broker's sendfile and pread64 calls during one more
pass of each level.
"""

from __future__ import annotations

import argparse
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from compat_tests.broker_process import BrokerProcess  # noqa: E402
from wire.api_keys import ApiKey  # noqa: E402
from wire.frame import decode_response, encode_request  # noqa: E402
from wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest  # noqa: E402
from wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic  # noqa: E402
from wire.messages.produce_request import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from wire.messages.request_header import RequestHeader  # noqa: E402
from wire.messages.write_txn_markers_request import (  # noqa: E402
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from wire.records.batch import iter_batches  # noqa: E402
from wire.records.record import Record, build_batch  # noqa: E402

TOPIC = "txn-bench"
RECORDS_PER_BATCH = 150  # what a 16 KiB batch.size holds of 100-byte records


class RawConnection:
    """A blocking Kafka protocol connection (requests one at a time)."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def call(self, api_key: int, version: int, body: object) -> object:
        self.correlation += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self.correlation,
            client_id="read-committed-bench",
        )
        self.sock.sendall(encode_request(header, body, version))
        (size,) = struct.unpack(">i", self._recv(4))
        _, response = decode_response(self._recv(size), api_key, version)
        return response

    def _recv(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            chunk = self.sock.recv_into(view[got:])
            if chunk == 0:
                raise ConnectionError("broker closed the connection")
            got += chunk
        return buf


def write_transactions(conn: RawConnection, args: argparse.Namespace) -> int:
    conn.call(
        ApiKey.CREATE_TOPICS,
        4,
        CreateTopicsRequest(
            topics=[CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
            timeout_ms=10_000,
        ),
    )
    value = b"x" * args.record_size
    pid, sequence = 1000, 0
    for txn in range(args.transactions):
        left = args.txn_records
        while left:
            count = min(left, RECORDS_PER_BATCH)
            now = int(time.time() * 1000)
            batch = build_batch(
                [Record(i, now, None, value) for i in range(count)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequence,
                transactional=True,
            )
            sequence += count
            left -= count
            conn.call(
                ApiKey.PRODUCE,
                9,
                ProduceRequest(
                    transactional_id="bench",
                    acks=1,
                    timeout_ms=10_000,
                    topic_data=[
                        TopicProduceData(
                            name=TOPIC,
                            partition_data=[PartitionProduceData(index=0, records=batch)],
                        )
                    ],
                ),
            )
        commit = (txn + 1) % args.abort_every != 0
        conn.call(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            WriteTxnMarkersRequest(
                markers=[
                    WritableTxnMarker(
                        producer_id=pid,
                        producer_epoch=0,
                        transaction_result=commit,
                        coordinator_epoch=0,
                        topics=[WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
                    )
                ]
            ),
        )
    return args.transactions * args.txn_records


def topic_id(conn: RawConnection) -> object:
    response = conn.call(
        ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])
    )
    return response.topics[0].topic_id  # type: ignore[attr-defined]


def read_pass(conn: RawConnection, tid: object, isolation: int) -> tuple[int, int, float, int]:
    """(requests, bytes, seconds, aborted transactions listed) of one read to the end."""
    offset, requests, nbytes, aborted = 0, 0, 0, 0
    started = time.perf_counter()
    while True:
        request = FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=50 << 20,
            isolation_level=isolation,
            topics=[
                FetchTopic(
                    topic=TOPIC,
                    topic_id=tid,
                    partitions=[
                        FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        data = conn.call(ApiKey.FETCH, 12, request).responses[0].partitions[0]  # type: ignore[attr-defined]
        requests += 1
        records = data.records or b""
        batches = list(iter_batches(records))
        if not batches:
            break
        nbytes += len(records)
        aborted += len(data.aborted_transactions or ())
        offset = batches[-1][1].next_offset
    return requests, nbytes, time.perf_counter() - started, aborted


def count_syscalls(pid: int, action) -> dict[str, int]:
    """sendfile/pread64 calls the broker makes while `action()` runs (strace -c)."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        tracer = subprocess.Popen(
            ["strace", "-f", "-c", "-e", "trace=sendfile,pread64", "-o", out.name, "-p", str(pid)],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        action()
        tracer.terminate()
        tracer.wait()
        counts = {}
        for line in Path(out.name).read_text().splitlines():
            parts = line.split()
            if parts and parts[-1] in ("sendfile", "pread64"):
                counts[parts[-1]] = int(parts[3] if len(parts) >= 6 else parts[2])
        return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--txn-records", type=int, default=1000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--abort-every", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--strace", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        broker = BrokerProcess(Path(work))
        broker.start()
        try:
            conn = RawConnection(broker.host, broker.port)
            records = write_transactions(conn, args)
            tid = topic_id(conn)
            read_pass(conn, tid, 0)  # warm the page cache and the broker
            passes: dict[int, list[tuple[int, int, float, int]]] = {0: [], 1: []}
            for _ in range(args.repeat):
                for isolation in (0, 1):
                    passes[isolation].append(read_pass(conn, tid, isolation))
            print(
                f"{records} records of {args.record_size} B in {args.transactions} "
                f"transactions, one in {args.abort_every} aborted; median of {args.repeat}"
            )
            for isolation, name in ((0, "read_uncommitted"), (1, "read_committed")):
                requests, nbytes, seconds, aborted = sorted(passes[isolation], key=lambda p: p[2])[
                    len(passes[isolation]) // 2
                ]
                print(
                    f"{name:17} {requests:5d} requests  {seconds * 1e6 / requests:8.1f} us/request"
                    f"  {nbytes / seconds / 1e6:8.1f} MB/s  aborted transactions listed {aborted}"
                )
            if args.strace:
                assert broker.pid is not None
                for isolation, name in ((0, "read_uncommitted"), (1, "read_committed")):
                    counts = count_syscalls(broker.pid, lambda i=isolation: read_pass(conn, tid, i))
                    print(f"{name:17} broker syscalls during one pass: {counts}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
