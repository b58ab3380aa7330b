"""FrameDecoder, request/response envelopes and header versions."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from kbroker.server.memory_pool import MemoryPool
from wire.api_keys import ApiKey, request_header_version, response_header_version
from wire.errors import DecodeError, EncodeError, UnsupportedVersionError
from wire.frame import (
    FrameDecoder,
    FrameError,
    UnknownApiKeyError,
    UnsupportedRequestVersion,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersionsResponse
from wire.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from wire.messages.metadata_request import MetadataRequest
from wire.messages.metadata_response import MetadataResponse
from wire.messages.request_header import RequestHeader


class Region:
    """Stands for a file region: has nbytes, is not bytes-like."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def test_frame_decoder_splits_whole_frames() -> None:
    data = frame(b"abc") + frame(b"") + frame(b"de")
    frames = FrameDecoder(100).feed(data)
    assert [bytes(f) for f in frames] == [b"abc", b"", b"de"]
    assert all(f.readonly for f in frames)


def test_small_payloads_survive_reuse_of_the_staging_area() -> None:
    dec = FrameDecoder(1 << 20)
    first = dec.feed(frame(b"a" * 100))
    for _ in range(2 * FrameDecoder.STAGING_BYTES // 104):
        dec.feed(frame(b"b" * 100))
    assert bytes(first[0]) == b"a" * 100


def test_decoders_sharing_a_staging_area_keep_their_partial_frames_apart() -> None:
    shared = FrameDecoder.new_staging()
    rng = random.Random(3)
    streams = [
        b"".join(
            frame(bytes([n]) * rng.randrange(0, 3 * FrameDecoder.LARGE_FRAME_BYTES))
            for _ in range(40)
        )
        for n in range(3)
    ]
    decoders = [FrameDecoder(1 << 20, shared_staging=shared) for _ in streams]
    received: list[list[bytes]] = [[] for _ in streams]
    positions = [0] * len(streams)
    # Interleaved reads of random sizes, each ending anywhere in a frame.
    while any(pos < len(data) for pos, data in zip(positions, streams, strict=True)):
        i = rng.randrange(len(streams))
        chunk = streams[i][positions[i] : positions[i] + rng.randrange(1, 9000)]
        positions[i] += len(chunk)
        received[i] += [bytes(f) for f in decoders[i].feed(chunk)]
    for n, frames in enumerate(received):
        assert b"".join(frame(f) for f in frames) == streams[n]
        assert all(set(f) <= {n} for f in frames)


def test_idle_decoders_sharing_a_staging_area_hold_no_buffer() -> None:
    shared = FrameDecoder.new_staging()
    tracemalloc.start()
    try:
        decoders = [FrameDecoder(1 << 20, shared_staging=shared) for _ in range(200)]
        for decoder in decoders:
            assert [bytes(f) for f in decoder.feed(frame(b"request"))] == [b"request"]
        # A partial frame takes a staging area of its own only until it completes.
        decoders[0].feed(frame(b"x" * 100)[:50])
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 200 private staging areas would be 200 x 64 KiB.
    assert held < 4 * FrameDecoder.STAGING_BYTES
    assert [bytes(f) for f in decoders[0].feed(frame(b"x" * 100)[50:])] == [b"x" * 100]


def test_large_payload_is_read_straight_into_its_own_writable_buffers() -> None:
    size = FrameDecoder.LARGE_FRAME_BYTES * 4
    payload = bytes(range(256)) * (size // 256)
    data = frame(payload) + frame(b"next")
    dec = FrameDecoder(1 << 20)
    buf = dec.get_buffer()
    buf[:1000] = data[:1000]
    assert dec.buffer_updated(1000) == []
    # The rest of the payload goes straight into the payload's own buffer, not the staging.
    target = dec.get_buffer()
    assert len(target) == size - 996
    target[:] = data[1000 : 4 + size]
    frames = dec.buffer_updated(len(target))
    assert len(frames) == 1
    assert not frames[0].readonly and bytes(frames[0]) == payload
    assert [bytes(f) for f in dec.feed(data[4 + size :])] == [b"next"]
    assert dec.buffered() == 0


def test_frame_decoder_reassembles_byte_by_byte() -> None:
    data = frame(b"hello") + frame(b"world!")
    dec = FrameDecoder(100)
    out = []
    for i in range(len(data)):
        out += [bytes(f) for f in dec.feed(data[i : i + 1])]
    assert out == [b"hello", b"world!"]
    assert dec.buffered() == 0


def test_frame_decoder_keeps_partial_tail() -> None:
    dec = FrameDecoder(100)
    data = frame(b"one") + frame(b"two")
    assert [bytes(f) for f in dec.feed(data[:-1])] == [b"one"]
    assert dec.buffered() == 6
    assert [bytes(f) for f in dec.feed(data[-1:])] == [b"two"]


@pytest.mark.parametrize("size", [-1, 101])
def test_frame_decoder_rejects_bad_sizes(size: int) -> None:
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(size.to_bytes(4, "big", signed=True))


def test_frame_decoder_rejects_oversized_frame_before_it_arrives() -> None:
    dec = FrameDecoder(100)
    dec.feed(b"\x00\x00")
    with pytest.raises(FrameError):
        dec.feed(b"\x10\x00")


def test_decode_request_unknown_api_key() -> None:
    with pytest.raises(UnknownApiKeyError) as e:
        decode_request(b"\x7f\x00\x00\x00\x00\x00\x00\x01\xff\xff")
    assert e.value.api_key == 0x7F00


def test_decode_request_unsupported_version_carries_header() -> None:
    # ApiVersions v99 (flexible range): header v2, so the broker can still answer it.
    payload = b"\x00\x12\x00\x63\x00\x00\x00\x09\x00\x01c\x00"
    with pytest.raises(UnsupportedRequestVersion) as e:
        decode_request(payload)
    assert e.value.header.correlation_id == 9
    assert e.value.header.client_id == "c"
    assert isinstance(e.value, DecodeError)


def test_decode_request_bad_body_carries_header() -> None:
    payload = b"\x00\x03\x00\x01\x00\x00\x00\x04\xff\xff" + b"\x00\x00\x00\x05"
    with pytest.raises(DecodeError) as e:
        decode_request(payload)
    assert isinstance(e.value.header, RequestHeader)
    assert e.value.header.correlation_id == 4


def test_decode_request_too_short() -> None:
    with pytest.raises(DecodeError):
        decode_request(b"\x00\x03\x00")


def test_header_versions() -> None:
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert request_header_version(ApiKey.DESCRIBE_CLUSTER, 0) == 2
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert response_header_version(ApiKey.METADATA, 8) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1


def test_api_key_names() -> None:
    assert ApiKey.PRODUCE == 0
    assert ApiKey.FETCH == 1
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH == 23
    assert ApiKey.SASL_HANDSHAKE == 17
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    parts = encode_response(7, ApiKey.API_VERSIONS, 3, ApiVersionsResponse())
    data = b"".join(parts)  # type: ignore[arg-type]
    assert data[:8] == b"\x00\x00\x00\x0c\x00\x00\x00\x07"
    assert data[8:] == ApiVersionsResponse().encode(3)


def test_flexible_response_header_has_tag_buffer() -> None:
    data = b"".join(encode_response(7, ApiKey.METADATA, 9, MetadataResponse()))  # type: ignore[arg-type]
    assert data[4:9] == b"\x00\x00\x00\x07\x00"
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    header, body = decode_response(memoryview(data)[4:], ApiKey.METADATA, 9)
    assert header.correlation_id == 7
    assert body == MetadataResponse()


def test_encode_response_keeps_external_region() -> None:
    region = Region(1000)
    resp = FetchResponse(
        responses=[
            FetchableTopicResponse(topic="t", partitions=[PartitionData(records=region)])  # type: ignore[arg-type]
        ]
    )
    parts = encode_response(1, ApiKey.FETCH, 4, resp)
    assert len(parts) == 2 and parts[1] is region
    head = parts[0]
    assert isinstance(head, bytes)
    assert int.from_bytes(head[:4], "big") == len(head) - 4 + 1000
    assert head.endswith((1000).to_bytes(4, "big"))  # the records length prefix


def test_encode_response_rejects_wrong_body() -> None:
    with pytest.raises(EncodeError):
        encode_response(1, ApiKey.FETCH, 4, MetadataResponse())


def test_encode_request_round_trip_and_checks() -> None:
    hdr = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=2, client_id="c")
    data = encode_request(hdr, MetadataRequest(topics=None), 12)
    frames = FrameDecoder(1 << 20).feed(data)
    assert decode_request(frames[0]) == (hdr, MetadataRequest(topics=None))
    with pytest.raises(EncodeError):
        encode_request(hdr, ApiVersionsRequest(), 12)
    with pytest.raises(EncodeError):
        encode_request(hdr, MetadataRequest(), 11)


def test_decode_response_errors() -> None:
    with pytest.raises(UnknownApiKeyError):
        decode_response(b"", 999, 0)
    with pytest.raises(UnsupportedVersionError):
        decode_response(b"", ApiKey.METADATA, 99)


def test_large_frame_buffer_grows_with_the_bytes_that_arrived_not_the_prefix() -> None:
    budget = MemoryPool(1 << 30)
    dec = FrameDecoder(1 << 30, budget)
    assert dec.feed((100 << 20).to_bytes(4, "big") + b"x" * 20_000) == []
    # 100 MB announced, 20 kB arrived: the buffer holds at most one growth step.
    assert len(dec.get_buffer()) + dec.buffered() <= 2 * FrameDecoder.GROW_MIN_BYTES
    assert budget.used <= 2 * FrameDecoder.GROW_MIN_BYTES
    dec.close()
    assert budget.used == 0


def test_every_payload_is_charged_to_the_budget_for_its_length() -> None:
    budget = MemoryPool(1 << 30)
    dec = FrameDecoder(1 << 30, budget)
    payloads = [b"s" * 10, bytes(range(256)) * 4000, b"t" * 100]
    frames = dec.feed(b"".join(frame(p) for p in payloads))
    assert [bytes(f) for f in frames] == payloads
    assert budget.used == sum(len(p) for p in payloads)


def test_starved_frame_waits_for_the_budget_and_resumes() -> None:
    size = 300_000
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    budget = MemoryPool(100_000)
    dec = FrameDecoder(1 << 20, budget)
    data = frame(payload)
    fed = 0
    while not dec.starved:
        buf = dec.get_buffer()
        n = min(len(buf), len(data) - fed)
        buf[:n] = data[fed : fed + n]
        del buf
        fed += n
        assert dec.buffer_updated(n) == []
    assert budget.used <= 100_000
    assert not dec.retry_grow()
    budget.capacity = 1 << 20
    assert dec.retry_grow() and not dec.starved
    frames = dec.feed(data[fed:])
    assert [bytes(f) for f in frames] == [payload]
    assert budget.used == size
