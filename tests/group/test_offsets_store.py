"""__consumer_offsets record formats, replay and group placement."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.group.offsets_store import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_key,
    encode_value,
    java_string_hash,
    partition_for,
    replay,
)
from wire.errors import DecodeError


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def compact(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


def test_offset_key_bytes() -> None:
    assert encode_key(OffsetKey("g", "t", 3)) == b"\x00\x01" + s16("g") + s16("t") + b"\0\0\0\3"


def test_group_key_bytes() -> None:
    assert encode_key(GroupKey("grp")) == b"\x00\x02" + s16("grp")


@pytest.mark.parametrize("version", [0, 1])
def test_both_offset_key_versions_decode(version: int) -> None:
    data = struct.pack(">h", version) + s16("g") + s16("t") + struct.pack(">i", 7)
    assert decode_key(data) == OffsetKey("g", "t", 7)


def test_other_protocols_keys_are_skipped() -> None:
    # 9: a share group's metadata (KIP-932); the consumer group protocol's are kept
    # (tests/group/test_consumer_records.py).
    assert decode_key(b"\x00\x09" + s16("g")) is None
    with pytest.raises(DecodeError):
        decode_key(b"\xff\xff")


def test_offset_value_written_as_version_3() -> None:
    value = OffsetValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    expected = b"\x00\x03" + struct.pack(">qi", 42, 5) + s16("m") + struct.pack(">q", 1000)
    assert encode_value(value) == expected


def test_offset_value_with_expiry_written_as_version_1() -> None:
    value = OffsetValue(offset=42, metadata="", commit_timestamp=1000, expire_timestamp=9000)
    expected = b"\x00\x01" + struct.pack(">q", 42) + s16("") + struct.pack(">qq", 1000, 9000)
    assert encode_value(value) == expected
    assert decode_offset_value(expected) == value


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b"\x00\x00" + struct.pack(">q", 1) + s16("a") + struct.pack(">q", 2),
            OffsetValue(1, "a", 2),
        ),
        (
            b"\x00\x02" + struct.pack(">q", 1) + s16("a") + struct.pack(">q", 2),
            OffsetValue(1, "a", 2),
        ),
        (
            b"\x00\x04" + struct.pack(">qi", 1, 9) + compact("a") + struct.pack(">q", 2) + b"\0",
            OffsetValue(1, "a", 2, leader_epoch=9),
        ),
    ],
)
def test_offset_value_versions(data: bytes, expected: OffsetValue) -> None:
    assert decode_offset_value(data) == expected


def _member_v0() -> bytes:
    return (
        s16("m1")
        + s16("client")
        + s16("/10.0.0.1")
        + struct.pack(">i", 10_000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 1)
        + b"A"
    )


def test_group_value_version_0() -> None:
    data = (
        b"\x00\x00"
        + s16("consumer")
        + struct.pack(">i", 4)
        + s16("range")
        + s16("m1")
        + struct.pack(">i", 1)
        + _member_v0()
    )
    value = decode_group_value(data)
    assert value == GroupValue(
        "consumer",
        4,
        "range",
        "m1",
        -1,
        (MemberValue("m1", None, "client", "/10.0.0.1", 10_000, 10_000, b"sub", b"A"),),
    )


def test_group_value_version_4_flexible() -> None:
    member = (
        compact("m1")
        + b"\x00"  # null group instance id
        + compact("client")
        + compact("/h")
        + struct.pack(">ii", 60_000, 10_000)
        + b"\x04sub"
        + b"\x02A"
        + b"\x00"
    )
    data = (
        b"\x00\x04"
        + compact("consumer")
        + struct.pack(">i", 2)
        + compact("range")
        + b"\x00"  # null leader
        + struct.pack(">q", 77)
        + b"\x02"
        + member
        + b"\x00"
    )
    value = decode_group_value(data)
    assert value.protocol == "range" and value.leader is None
    assert value.current_state_timestamp == 77
    assert value.members == (MemberValue("m1", None, "client", "/h", 60_000, 10_000, b"sub", b"A"),)


members = st.builds(
    MemberValue,
    st.text(max_size=20),
    st.none() | st.text(max_size=10),
    st.text(max_size=10),
    st.text(max_size=10),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.binary(max_size=30),
    st.binary(max_size=30),
)


@given(
    st.builds(
        GroupValue,
        st.text(max_size=10),
        st.integers(0, 2**31 - 1),
        st.none() | st.text(max_size=10),
        st.none() | st.text(max_size=10),
        st.integers(-1, 2**62),
        st.lists(members, max_size=4).map(tuple),
    )
)
def test_group_value_round_trip(value: GroupValue) -> None:
    encoded = encode_value(value)
    assert encoded is not None and encoded[:2] == b"\x00\x03"
    assert decode_group_value(encoded) == value


@given(
    st.builds(
        OffsetValue,
        st.integers(-1, 2**62),
        st.text(max_size=50),
        st.integers(-1, 2**62),
        st.integers(-1, 2**31 - 1),
    )
)
def test_offset_value_round_trip(value: OffsetValue) -> None:
    encoded = encode_value(value)
    assert encoded is not None
    assert decode_offset_value(encoded) == value


def test_replay_applies_records_in_order_and_tombstones_delete() -> None:
    g = GroupValue("consumer", 1, "range", "m", 5, ())
    records = [
        (encode_key(OffsetKey("a", "t", 0)), encode_value(OffsetValue(1, "", 10))),
        (encode_key(OffsetKey("a", "t", 0)), encode_value(OffsetValue(2, "x", 11))),
        (encode_key(OffsetKey("a", "t", 1)), encode_value(OffsetValue(3, "", 12))),
        (encode_key(OffsetKey("b", "t", 0)), encode_value(OffsetValue(4, "", 13))),
        (encode_key(OffsetKey("b", "t", 0)), None),
        (encode_key(GroupKey("a")), encode_value(g)),
        (encode_key(GroupKey("c")), encode_value(g)),
        (encode_key(GroupKey("c")), None),
        (b"\x00\x09" + s16("share-group-record"), b"\x00\x00"),
        (None, b"ignored"),
    ]
    state = replay(records)
    assert state.offsets == {
        "a": {("t", 0): OffsetValue(2, "x", 11), ("t", 1): OffsetValue(3, "", 12)}
    }
    assert state.groups == {"a": g}


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("", 0),
        ("abc", 96354),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 1772899),
    ],
)
def test_java_string_hash(text: str, java_hash: int) -> None:
    assert java_string_hash(text) == java_hash


def test_partition_for_matches_kafka() -> None:
    assert partition_for("abc", 50) == 96354 % 50
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka.
    assert partition_for("polygenelubricants", 50) == 0
    negative = "my-group"
    assert java_string_hash(negative) < 0
    assert partition_for(negative, 50) == -java_string_hash(negative) % 50
