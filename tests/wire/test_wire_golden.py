"""Hand-built frames checked against the protocol guide's layouts."""

from __future__ import annotations

from wire.frame import decode_request, encode_request
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from wire.messages.request_header import RequestHeader


def header(api_key: int, version: int, correlation_id: int, client_id: str | None) -> RequestHeader:
    return RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )


def check(frame: bytes, hdr: RequestHeader, body: object, version: int) -> None:
    assert encode_request(hdr, body, version) == frame  # type: ignore[arg-type]
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    got_header, got_body = decode_request(memoryview(frame)[4:])
    assert got_header == hdr
    assert got_body == body


def test_api_versions_v0_request() -> None:
    # Header v1: api_key int16, api_version int16, correlation_id int32, client_id string.
    frame = (
        b"\x00\x00\x00\x0c"
        + b"\x00\x12"  # ApiVersions = 18
        + b"\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x02kb"
    )
    check(frame, header(18, 0, 1, "kb"), ApiVersionsRequest(), 0)


def test_api_versions_v3_request() -> None:
    # Header v2 adds a tagged-field buffer; client_id stays a non-compact string.
    # Body v3: compact strings client_software_name/version, then the body's tag buffer.
    frame = (
        b"\x00\x00\x00\x1a"
        + b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x02kb\x00"
        + b"\x08kbroker"
        + b"\x041.0"
        + b"\x00"
    )
    body = ApiVersionsRequest(client_software_name="kbroker", client_software_version="1.0")
    check(frame, header(18, 3, 7, "kb"), body, 3)


def test_metadata_v1_request() -> None:
    # Body v1: topics as an int32-counted array of {name string}; null (-1) means all topics.
    frame = (
        b"\x00\x00\x00\x15"
        + b"\x00\x03\x00\x01\x00\x00\x00\x2a\xff\xff"  # null client id
        + b"\x00\x00\x00\x02"
        + b"\x00\x01a"
        + b"\x00\x02bc"
    )
    body = MetadataRequest(topics=[MetadataRequestTopic(name="a"), MetadataRequestTopic(name="bc")])
    check(frame, header(3, 1, 42, None), body, 1)
    all_topics = b"\x00\x00\x00\x0e" + frame[4:14] + b"\xff\xff\xff\xff"
    check(all_topics, header(3, 1, 42, None), MetadataRequest(topics=None), 1)


def test_produce_v3_request() -> None:
    # Header v1, then transactional_id (nullable string), acks int16, timeout_ms int32,
    # [topic: name string, [partition: index int32, records int32-sized bytes]].
    frame = (
        b"\x00\x00\x00\x2b"
        + b"\x00\x00\x00\x03\x00\x00\x00\x05\x00\x03cli"
        + b"\xff\xff"
        + b"\xff\xff"  # acks = -1
        + b"\x00\x00\x75\x30"  # 30000 ms
        + b"\x00\x00\x00\x01\x00\x01t"
        + b"\x00\x00\x00\x01\x00\x00\x00\x02"
        + b"\x00\x00\x00\x03abc"
    )
    body = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=2, records=b"abc")]
            )
        ],
    )
    check(frame, header(0, 3, 5, "cli"), body, 3)
    _, decoded = decode_request(memoryview(frame)[4:])
    records = decoded.topic_data[0].partition_data[0].records  # type: ignore[attr-defined]
    assert isinstance(records, memoryview)
    assert records.obj is frame  # zero-copy slice of the frame
