"""kbroker.metrics without a broker: the text format, request accounting, ISR change counting
and the HTTP endpoint."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from controller.interface import PartitionInfo, TopicInfo
from kbroker.log.file_region import FileRegion
from kbroker.metrics import Exposition, Histogram, IsrChanges, MetricsServer, RequestMetrics
from wire.api_keys import ApiKey
from wire.messages.fetch_request import FetchRequest
from wire.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData


def test_histogram_buckets_are_cumulative() -> None:
    h = Histogram(buckets=(0.1, 1.0))
    for value in (0.05, 0.5, 0.7, 3.0):
        h.observe(value)
    out = Exposition()
    h.expose(out, "x", (("api", "A"),))
    assert out.render().splitlines() == [
        'x_bucket{api="A",le="0.1"} 1',
        'x_bucket{api="A",le="1"} 3',
        'x_bucket{api="A",le="+Inf"} 4',
        'x_sum{api="A"} 4.25',
        'x_count{api="A"} 4',
    ]


def test_label_values_are_escaped() -> None:
    out = Exposition()
    out.sample("m", (("topic", 'a"b\\c\nd'),), 1)
    assert out.render() == 'm{topic="a\\"b\\\\c\\nd"} 1\n'


def test_bytes_in_and_out_per_topic(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    metrics = RequestMetrics(lambda tid: "by-id" if tid == topic_id else None)
    produce = ProduceRequest(
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=0, records=b"x" * 70)]
            )
        ]
    )
    metrics.observe(ApiKey.PRODUCE, produce, None, 0.001, failed=False)
    path = tmp_path / "f"
    path.write_bytes(b"y" * 100)
    with open(path, "rb") as f:
        fetch = FetchResponse(
            responses=[
                FetchableTopicResponse(
                    topic="t", partitions=[PartitionData(records=FileRegion(f, 0, 40))]
                ),
                FetchableTopicResponse(
                    topic_id=topic_id, partitions=[PartitionData(records=memoryview(b"z" * 9))]
                ),
            ]
        )
        metrics.observe(ApiKey.FETCH, FetchRequest(), fetch, 0.002, failed=False)
        metrics.observe(ApiKey.FETCH, FetchRequest(replica_id=2), fetch, 0.002, failed=False)
    metrics.observe(ApiKey.METADATA, object(), None, 0.5, failed=True)
    assert metrics.bytes_in == {"t": 70}
    assert metrics.bytes_out == {"t": 40, "by-id": 9}
    assert metrics.replication_bytes_out == {"t": 40, "by-id": 9}
    out = Exposition()
    metrics.expose(out)
    text = out.render()
    assert 'kbroker_requests_total{api="FETCH"} 2' in text
    assert 'kbroker_requests_failed_total{api="METADATA"} 1' in text
    assert 'kbroker_request_latency_seconds_count{api="PRODUCE"} 1' in text


def _topic(isr: tuple[int, ...], leader: int = 1) -> TopicInfo:
    return TopicInfo("t", uuid.UUID(int=1), (PartitionInfo(0, leader, 0, (1, 2, 3), isr),))


def test_isr_changes_of_led_partitions_are_counted() -> None:
    changes = IsrChanges(1, [_topic((1, 2, 3))])
    changes.on_topic_change(_topic((1, 2)), "t")
    changes.on_topic_change(_topic((1,)), "t")
    changes.on_topic_change(_topic((1, 3)), "t")
    changes.on_topic_change(_topic((2, 3), leader=2), "t")
    assert (changes.shrinks, changes.expands) == (2, 1)
    changes.on_topic_change(None, "t")
    changes.on_topic_change(_topic((1,)), "t")
    assert (changes.shrinks, changes.expands) == (2, 1)


async def _get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


async def test_endpoint_serves_metrics_only_on_get() -> None:
    server = MetricsServer(lambda: "m 1\n")
    port = await server.start("127.0.0.1", 0)
    try:
        ok = await _get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.0 200 OK\r\n")
        assert b"text/plain; version=0.0.4" in ok
        assert ok.endswith(b"\r\n\r\nm 1\n")
        assert (await _get(port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.0 404")
        assert (await _get(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.0 405")
        assert (await _get(port, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.0 400")
    finally:
        await server.close()
