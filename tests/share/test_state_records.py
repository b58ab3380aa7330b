"""``__share_group_state`` records against the bytes Kafka 4.3 wrote (its share coordinator's
segments after a KafkaShareConsumer read, acknowledged, released and rejected records, and after
Initialize/Write/Delete requests sent to its broker listener)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.group.offsets_store import partition_for
from kbroker.share.persister_api import StateBatch
from kbroker.share.state_records import (
    SNAPSHOT,
    UNKNOWN,
    UPDATE,
    ShareSnapshot,
    ShareStateKey,
    ShareUpdate,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    parse_coordinator_key,
)
from wire.errors import DecodeError

TOPIC_ID = uuid.UUID("086d7a92-8676-4a82-b296-5a232c010259")  # CG16koZ2SoKyllojLAECWQ

# (record type, key hex, value hex, decoded key, decoded value) as Kafka 4.3 wrote them; its
# kafka-dump-log.sh --share-group-state-decoder printed the values shown in the comments.
GOLDEN = [
    # Initialize with start offset -1: no delivery complete count tag.
    (
        SNAPSHOT,
        "000000027331086d7a9286764a82b2965a232c01025900000000",
        "0000000000000000000200000000ffffffffffffffff000001a2153b9fe4000001a2153b9fe40100",
        ShareStateKey("s1", TOPIC_ID, 0),
        ShareSnapshot(0, 2, 0, -1, UNKNOWN, 1795652558820, 1795652558820, ()),
    ),
    # An update with three batches and deliveryCompleteCount 6 (tag 0).
    (
        UPDATE,
        "000100027331086d7a9286764a82b2965a232c01025900000000",
        "0000000000000000000000000000000000000400000000000000000000000000000002020001000000"
        "000000000003000000000000000300000100000000000000000400000000000000060200010001000400"
        "000006",
        ShareStateKey("s1", TOPIC_ID, 0),
        ShareUpdate(
            0,
            0,
            0,
            6,
            (StateBatch(0, 2, 2, 1), StateBatch(3, 3, 0, 1), StateBatch(4, 6, 2, 1)),
        ),
    ),
    # The snapshot written after three updates (snapshot epoch 1), with its batches.
    (
        SNAPSHOT,
        "000000027331086d7a9286764a82b2965a232c01025900000000",
        "00000000000100000002000000000000000000000012000001a2153bb22d000001a2153bb22d050000"
        "00000000001200000000000000120000010000000000000000130000000000000016020001000000000"
        "000000017000000000000001700000100000000000000001800000000000000180200010001000400000005",
        ShareStateKey("s1", TOPIC_ID, 0),
        ShareSnapshot(
            1,
            2,
            0,
            18,
            5,
            1795652563501,
            1795652563501,
            (
                StateBatch(18, 18, 0, 1),
                StateBatch(19, 22, 2, 1),
                StateBatch(23, 23, 0, 1),
                StateBatch(24, 24, 2, 1),
            ),
        ),
    ),
    # Initialize with start offset 5: deliveryCompleteCount 0 is written.
    (
        SNAPSHOT,
        "000000026732086d7a9286764a82b2965a232c01025900000000",
        "00000000000000000003000000000000000000000005000001a2153e1f56000001a2153e1f560101000400000000",
        ShareStateKey("g2", TOPIC_ID, 0),
        ShareSnapshot(0, 3, 0, 5, 0, 1795652722518, 1795652722518, ()),
    ),
    # A write that keeps the start offset (-1) and the leader epoch a read stored (4).
    (
        UPDATE,
        "000100026732086d7a9286764a82b2965a232c01025900000000",
        "00000000000000000004ffffffffffffffff0300000000000000050000000000000006020001000000"
        "000000000007000000000000000c0000020001000400000003",
        ShareStateKey("g2", TOPIC_ID, 0),
        ShareUpdate(0, 4, -1, 3, (StateBatch(5, 6, 2, 1), StateBatch(7, 12, 0, 2))),
    ),
]


@pytest.mark.parametrize(("record_type", "key_hex", "value_hex", "key", "value"), GOLDEN)
def test_kafka_records_decode_and_encode_to_the_same_bytes(
    record_type: int, key_hex: str, value_hex: str, key: ShareStateKey, value: object
) -> None:
    assert decode_key(bytes.fromhex(key_hex)) == (record_type, key)
    assert decode_value(record_type, bytes.fromhex(value_hex)) == value
    assert encode_key(key, record_type).hex() == key_hex
    assert encode_value(value).hex() == value_hex  # type: ignore[arg-type]


def test_the_coordinator_key_spells_the_topic_id_as_kafka() -> None:
    assert ShareStateKey("s1", TOPIC_ID, 0).coordinator_key() == "s1:CG16koZ2SoKyllojLAECWQ:0"


@pytest.mark.parametrize(("group", "partition"), [("s1", 2), ("g2", 0), ("g3", 2), ("g4", 1)])
def test_keys_land_on_the_partitions_kafka_put_them_in(group: str, partition: int) -> None:
    """Kafka 4.3 with 3 partitions of __share_group_state wrote these groups' records there."""
    key = ShareStateKey(group, TOPIC_ID, 0).coordinator_key()
    assert partition_for(key, 3) == partition


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("s1:CG16koZ2SoKyllojLAECWQ:0", ShareStateKey("s1", TOPIC_ID, 0)),
        ("a:b:CG16koZ2SoKyllojLAECWQ:-1", ShareStateKey("a:b", TOPIC_ID, -1)),
        ("abc", None),
        ("g:CG16koZ2SoKyllojLAECWQ:x", None),
        (":CG16koZ2SoKyllojLAECWQ:0", None),
        (" :CG16koZ2SoKyllojLAECWQ:0", None),
        ("g:notauuid:0", None),
        ("g:CG16koZ2SoKyllojLAECWQ:99999999999", None),
    ],
)
def test_find_coordinator_share_keys(text: str, key: ShareStateKey | None) -> None:
    assert parse_coordinator_key(text) == key


def test_unknown_record_types_are_skipped_and_bad_values_refused() -> None:
    assert (
        decode_key(bytes.fromhex("0002") + encode_key(ShareStateKey("g", TOPIC_ID, 0), 0)[2:])
        is None
    )
    with pytest.raises(DecodeError):
        decode_value(SNAPSHOT, bytes.fromhex("0001") + b"\x00" * 40)
    with pytest.raises(DecodeError):
        decode_value(UPDATE, bytes.fromhex("0000000000"))


batches = st.lists(
    st.builds(
        StateBatch,
        st.integers(0, 2**62),
        st.integers(0, 2**62),
        st.sampled_from([0, 2, 4]),
        st.integers(0, 2**15 - 1),
    ),
    max_size=5,
).map(tuple)
epochs = st.integers(-1, 2**31 - 1)


@given(
    st.text(max_size=20),
    st.uuids(),
    st.integers(0, 2**31 - 1),
    epochs,
    epochs,
    epochs,
    st.integers(-1, 2**62),
    epochs,
    batches,
)
def test_round_trips(
    group: str,
    topic_id: uuid.UUID,
    partition: int,
    snapshot_epoch: int,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    delivery_complete_count: int,
    state_batches: tuple[StateBatch, ...],
) -> None:
    key = ShareStateKey(group, topic_id, partition)
    for record_type in (SNAPSHOT, UPDATE):
        assert decode_key(encode_key(key, record_type)) == (record_type, key)
    snapshot = ShareSnapshot(
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start_offset,
        delivery_complete_count,
        start_offset,
        start_offset + 1,
        state_batches,
    )
    update = ShareUpdate(
        snapshot_epoch, leader_epoch, start_offset, delivery_complete_count, state_batches
    )
    assert decode_value(SNAPSHOT, encode_value(snapshot)) == snapshot
    assert decode_value(UPDATE, encode_value(update)) == update
