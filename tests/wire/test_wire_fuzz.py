"""Hypothesis fuzz: whatever bytes arrive, decoding raises only DecodeError (subclasses)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_helpers import class_versions, populate

from wire.errors import DecodeError
from wire.frame import FrameDecoder, decode_request, encode_request
from wire.messages.registry import REQUEST_CLASSES
from wire.messages.request_header import RequestHeader

CLASS_VERSIONS = class_versions()
REQUEST_VERSIONS = [(c, v) for c, v in CLASS_VERSIONS if c in REQUEST_CLASSES.values()]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid_request_payloads() -> list[bytes]:
    out = []
    for cls, version in REQUEST_VERSIONS:
        header = RequestHeader(
            request_api_key=cls.API_KEY,
            request_api_version=version,
            correlation_id=1,
            client_id="c",
        )
        out.append(encode_request(header, populate(cls, version), version)[4:])  # type: ignore[arg-type]
    return out


VALID = valid_request_payloads()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[pos]
    return bytes(data)


def only_decode_errors(fn: object, *args: object) -> None:
    try:
        fn(*args)  # type: ignore[operator]
    except DecodeError:
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_decode_request_random_bytes(data: bytes) -> None:
    only_decode_errors(decode_request, data)


@FUZZ
@given(st.integers(0, 75), st.integers(-2, 20), st.binary(max_size=200))
def test_decode_request_known_keys_random_bodies(key: int, version: int, rest: bytes) -> None:
    data = key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + rest
    only_decode_errors(decode_request, data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_decode_request_mutated_valid_requests(data: bytes) -> None:
    only_decode_errors(decode_request, data)


def test_valid_requests_decode() -> None:
    for data in VALID:
        decode_request(data)


@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=8), st.integers(0, 64))
def test_frame_decoder_random_chunks(chunks: list[bytes], max_size: int) -> None:
    dec = FrameDecoder(max_size)
    try:
        for chunk in chunks:
            for payload in dec.feed(chunk):
                assert len(payload) <= max_size
                only_decode_errors(decode_request, payload)
    except DecodeError:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=120))
def test_every_message_every_version_random_bytes(data: bytes) -> None:
    for cls, version in CLASS_VERSIONS:
        only_decode_errors(cls.decode, data, version)


ENCODED = [(c, v, populate(c, v).encode(v)) for c, v in CLASS_VERSIONS]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_message_mutated_encodings(data: st.DataObject) -> None:
    cls, version, encoded = data.draw(st.sampled_from(ENCODED))
    buf = bytearray(encoded)
    pos = data.draw(st.integers(0, max(len(buf) - 1, 0)))
    kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    if kind == "flip" and buf:
        buf[pos] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "cut":
        del buf[pos:]
    else:
        buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=6))
    only_decode_errors(cls.decode, bytes(buf), version)
