"""Records of the consumer group protocol (KIP-848) in __consumer_offsets: Kafka's key and
value layouts, and replaying them."""

from __future__ import annotations

import struct
import uuid

import pytest

from kbroker.group.consumer_group import ClassicMembership
from kbroker.group.consumer_heartbeat import loaded_assignment_epochs
from kbroker.group.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    RegexKey,
    RegexValue,
    TargetEpochValue,
    TargetMemberValue,
)
from kbroker.group.offsets_store import (
    GroupKey,
    LoadedState,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)

RECORDS = [
    (ConsumerGroupKey(GROUP_METADATA, "g"), GroupEpochValue(7, metadata_hash=42)),
    (ConsumerGroupKey(GROUP_METADATA, "g"), GroupEpochValue(8, creation_time_ms=1000)),
    (
        ConsumerMemberKey(MEMBER_METADATA, "g", "m1"),
        MemberMetadataValue("i1", "rack-a", "c1", "/10.0.0.1", ("a", "b"), None, 30_000, "uniform"),
    ),
    (
        ConsumerMemberKey(MEMBER_METADATA, "g", "m2"),
        MemberMetadataValue(
            None,
            None,
            "c2",
            "/h",
            (),
            "orders-.*",
            45_000,
            None,
            ClassicMembership(10_000, (("range", b"\x00\x01"),)),
        ),
    ),
    (ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, "g"), TargetEpochValue(8, 123)),
    (ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, "g", "m1"), TargetMemberValue({T1: (0, 2)})),
    (
        ConsumerMemberKey(CURRENT_ASSIGNMENT, "g", "m1"),
        CurrentAssignmentValue(8, 7, 1, {T1: (0,), T2: (3, 4)}, {T1: (1,)}),
    ),
    (
        ConsumerMemberKey(CURRENT_ASSIGNMENT, "g", "m2"),
        CurrentAssignmentValue(
            8, 7, 1, {T1: (0,), T2: (3, 4)}, {T1: (1,)}, {T2: (5, 8)}, {T1: (2,)}
        ),
    ),
    (RegexKey("g", "orders-.*"), RegexValue(("orders-1", "orders-2"), 5, 999)),
]


@pytest.mark.parametrize(("key", "value"), RECORDS)
def test_round_trip(key: object, value: object) -> None:
    decoded_key = decode_key(encode_key(key))  # type: ignore[arg-type]
    assert decoded_key == key
    assert decode_value(decoded_key, encode_value(value)) == value  # type: ignore[arg-type]


def test_member_metadata_bytes() -> None:
    key = ConsumerMemberKey(MEMBER_METADATA, "g", "m")
    assert encode_key(key) == struct.pack(">h", 5) + b"\x00\x01g" + b"\x00\x01m"
    value = MemberMetadataValue(None, "r", "c", "h", ("t",), None, 30_000, None)
    assert encode_value(value) == (
        struct.pack(">h", 0)
        + b"\x00"  # instance id: null (compact: 0)
        + b"\x02r"  # rack id (compact: length + 1)
        + b"\x02c"
        + b"\x02h"
        + b"\x02\x02t"  # one subscribed topic
        + b"\x00"  # no regex
        + struct.pack(">i", 30_000)
        + b"\x00"  # no server assignor
        + b"\x00"  # no tagged fields
    )


def test_classic_member_metadata_bytes() -> None:
    """Kafka's ClassicMemberMetadata (tag 0): the session timeout, then the protocols."""
    classic = ClassicMembership(10_000, (("range", b"\x07"),))
    value = MemberMetadataValue(None, None, "c", "h", (), None, 30_000, None, classic)
    tagged = (
        struct.pack(">i", 10_000)
        + b"\x02"  # one protocol
        + b"\x06range"
        + b"\x02\x07"  # its metadata
        + b"\x00"  # the protocol's tagged fields
        + b"\x00"  # the struct's tagged fields
    )
    assert encode_value(value).endswith(b"\x01\x00" + bytes([len(tagged)]) + tagged)


def test_current_assignment_bytes() -> None:
    value = CurrentAssignmentValue(3, 2, 0, {T1: (1, 0)}, {})
    assert encode_value(value) == (
        struct.pack(">hiib", 0, 3, 2, 0)
        + b"\x02"  # one topic
        + T1.bytes
        + b"\x03"  # two partitions, sorted
        + struct.pack(">ii", 0, 1)
        + b"\x00"  # the topic's tagged fields
        + b"\x01"  # no partitions pending revocation
        + b"\x00"
    )


def test_current_assignment_epochs_bytes() -> None:
    """Kafka 4.3's tagged AssignmentEpochs (tag 0 of each topic), in the partitions' order."""
    value = CurrentAssignmentValue(3, 2, 0, {T1: (1, 0)}, {}, {T1: (3, 2)})
    tagged = b"\x03" + struct.pack(">ii", 2, 3)  # two epochs, partition 0's first
    assert encode_value(value) == (
        struct.pack(">hiib", 0, 3, 2, 0)
        + b"\x02"
        + T1.bytes
        + b"\x03"
        + struct.pack(">ii", 0, 1)
        + b"\x01\x00"  # one tagged field, tag 0
        + bytes([len(tagged)])
        + tagged
        + b"\x01"
        + b"\x00"
    )


@pytest.mark.parametrize(
    ("tagged", "expected"),
    [
        (None, {}),  # a record written before Kafka 4.3
        (b"\x00", {}),  # null
        (b"\x02" + struct.pack(">i", 4), {}),  # one epoch for two partitions
        (b"\x03" + struct.pack(">ii", 4, 5), {T1: (4, 5)}),
    ],
)
def test_current_assignment_epochs_read(tagged: bytes | None, expected: object) -> None:
    """Epochs that are missing or do not match the partitions are left out: the member epoch
    stands for them when the group is loaded."""
    tags = b"\x00" if tagged is None else b"\x01\x00" + bytes([len(tagged)]) + tagged
    data = (
        struct.pack(">hiib", 0, 3, 2, 0)
        + b"\x02"
        + T1.bytes
        + b"\x03"
        + struct.pack(">ii", 0, 1)
        + tags
        + b"\x01"
        + b"\x00"
    )
    value = decode_value(ConsumerMemberKey(CURRENT_ASSIGNMENT, "g", "m"), data)
    assert isinstance(value, CurrentAssignmentValue)
    assert value.assigned == {T1: (0, 1)} and value.assigned_epochs == expected


def test_loaded_epochs_fall_back_to_the_member_epoch() -> None:
    """As Kafka 4.3 loads a record without epochs: the member epoch, at least 0."""
    value = CurrentAssignmentValue(7, 6, 1, {T1: (0, 1), T2: (2,)}, {T2: (5,)}, {T1: (3, 7)})
    assert loaded_assignment_epochs(value) == {
        (T1, 0): 3,
        (T1, 1): 7,
        (T2, 2): 7,
        (T2, 5): 7,
    }
    joining = CurrentAssignmentValue(-1, -1, 0, {T1: (0,)}, {})
    assert loaded_assignment_epochs(joining) == {(T1, 0): 0}


def _loaded(records: list[tuple[object, object | None]]) -> LoadedState:
    state = LoadedState()
    for key, value in records:
        state.apply(encode_key(key), encode_value(value))  # type: ignore[arg-type]
    return state


def test_replay_builds_each_group_and_tombstones_remove() -> None:
    state = _loaded(list(RECORDS) + [(OffsetKey("g", "a", 0), OffsetValue(5))])
    group = state.consumer_groups["g"]
    assert group.epoch == GroupEpochValue(8, creation_time_ms=1000)
    assert set(group.members) == {"m1", "m2"}
    assert group.targets["m1"].partitions == {T1: (0, 2)}
    assert group.current["m1"].pending_revocation == {T1: (1,)}
    assert group.regexes["orders-.*"].topics == ("orders-1", "orders-2")
    assert state.offsets["g"][("a", 0)].offset == 5
    # Deleting the group tombstones every key: nothing is left of it.
    tombstones: list[tuple[object, object | None]] = [(key, None) for key, _ in RECORDS]
    state = _loaded(list(RECORDS) + tombstones)
    assert state.consumer_groups == {}


def test_records_of_other_protocols_are_skipped() -> None:
    # Type 4 (subscription metadata, retired in Kafka 4.1) and the streams groups' types.
    for record_type in (4, 9, 17, 20):
        key = struct.pack(">h", record_type) + b"\x00\x01g"
        assert decode_key(key) is None
    assert decode_key(encode_key(GroupKey("g"))) == GroupKey("g")
