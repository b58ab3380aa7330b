"""Every message, every version: encode -> decode -> encode, plus tagged fields and the
encode-time version/nullability checks."""

from __future__ import annotations

import pytest
from wire_helpers import class_versions, populate, top_level_classes

from wire.errors import DecodeError, EncodeError
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.produce_request import ProduceRequest, TopicProduceData
from wire.messages.registry import REQUEST_CLASSES, RESPONSE_CLASSES

CLASS_VERSIONS = class_versions()


def test_every_api_has_request_and_response_in_the_sweep() -> None:
    classes = set(top_level_classes())
    assert set(REQUEST_CLASSES.values()) <= classes
    assert set(RESPONSE_CLASSES.values()) <= classes
    assert len(CLASS_VERSIONS) > 600


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_round_trip_every_message_every_version(nulls: bool) -> None:
    failures = []
    for cls, version in CLASS_VERSIONS:
        obj = populate(cls, version, nulls=nulls)
        data = obj.encode(version)
        back = cls.decode(data, version)
        if back != obj or back.encode(version) != data:
            failures.append(f"{cls.__name__} v{version}")
    assert failures == []


def test_populated_values_actually_reach_the_wire() -> None:
    # Guards the sweep above: a populated message must differ from a default one.
    for cls, version in CLASS_VERSIONS:
        if any(f.versions[0] <= version <= f.versions[1] for f in cls.FIELDS):
            assert populate(cls, version).encode(version) != cls().encode(version), cls


def test_absent_fields_decode_to_defaults() -> None:
    req = ProduceRequest.decode(ProduceRequest(acks=1).encode(2), 2)
    assert req.transactional_id is None
    meta = MetadataRequest.decode(MetadataRequest(topics=[]).encode(3), 3)
    assert meta.allow_auto_topic_creation is True


def test_unknown_tagged_fields_survive_round_trip() -> None:
    body = (
        b"\x08kbroker\x041.0"  # two compact strings
        + b"\x02"  # two tagged fields
        + b"\x05\x03xyz"
        + b"\x09\x00"
    )
    req = ApiVersionsRequest.decode(body, 3)
    assert req.client_software_name == "kbroker"
    assert req.unknown_tagged_fields == [(5, b"xyz"), (9, b"")]
    assert req.encode(3) == body


def test_unknown_tags_merge_with_known_tags_in_tag_order() -> None:
    body = (
        b"\x00\x00"  # error code
        + b"\x02"  # one ApiVersion
        + b"\x00\x03\x00\x00\x00\x0c"
        + b"\x01\x02\x01a"  # nested struct: one unknown tag 2 = "a"
        + b"\x00\x00\x00\x00"  # throttle
        + b"\x03"  # three tags: known 1, unknown 4, unknown 9
        + b"\x01\x08"
        + (7).to_bytes(8, "big")
        + b"\x04\x01\xff"
        + b"\x09\x00"
    )
    resp = ApiVersionsResponse.decode(body, 3)
    assert resp.finalized_features_epoch == 7
    assert resp.unknown_tagged_fields == [(4, b"\xff"), (9, b"")]
    assert resp.api_keys == [
        ApiVersion(api_key=3, min_version=0, max_version=12, unknown_tagged_fields=[(2, b"a")])
    ]
    assert resp.encode(3) == body


def test_known_tagged_field_written_only_when_not_default() -> None:
    plain = ApiVersionsResponse().encode(3)
    assert plain == b"\x00\x00\x01\x00\x00\x00\x00\x00"
    tagged = ApiVersionsResponse(zk_migration_ready=True).encode(3)
    assert tagged == b"\x00\x00\x01\x00\x00\x00\x00\x01\x03\x01\x01"


def test_known_tagged_field_with_overlong_size_is_skipped_to_its_end() -> None:
    # Tag 1 (int64) declared with 9 bytes: the value is read, the spare byte skipped.
    body = b"\x00\x00\x01\x00\x00\x00\x00\x01\x01\x09" + (3).to_bytes(8, "big") + b"\xaa"
    assert ApiVersionsResponse.decode(body, 3).finalized_features_epoch == 3


def test_known_tagged_field_overrunning_its_size_is_rejected() -> None:
    body = b"\x00\x00\x01\x00\x00\x00\x00\x01\x01\x04" + (3).to_bytes(8, "big")
    with pytest.raises(DecodeError):
        ApiVersionsResponse.decode(body, 3)


def test_non_default_field_missing_from_version_raises() -> None:
    with pytest.raises(EncodeError, match="transactional_id"):
        ProduceRequest(transactional_id="tx").encode(2)
    with pytest.raises(EncodeError, match="allow_auto_topic_creation"):
        MetadataRequest(topics=[], allow_auto_topic_creation=False).encode(3)


def test_ignorable_field_missing_from_version_is_dropped() -> None:
    # ThrottleTimeMs is ignorable and absent from ApiVersionsResponse v0.
    assert ApiVersionsResponse(throttle_time_ms=5).encode(0) == ApiVersionsResponse().encode(0)


def test_none_in_non_nullable_version_raises() -> None:
    with pytest.raises(EncodeError, match="topics"):
        MetadataRequest(topics=None).encode(0)
    assert MetadataRequest(topics=None).encode(1) == b"\xff\xff\xff\xff"
    with pytest.raises(EncodeError, match="name"):
        MetadataRequest(topics=[MetadataRequestTopic(name=None)]).encode(9)
    MetadataRequest(topics=[MetadataRequestTopic(name=None)]).encode(10)
    with pytest.raises(EncodeError, match="name"):
        ProduceRequest(topic_data=[TopicProduceData(name=None)]).encode(3)


def test_null_in_non_nullable_version_fails_to_decode() -> None:
    with pytest.raises(DecodeError):
        MetadataRequest.decode(b"\xff\xff\xff\xff", 0)
    assert MetadataRequest.decode(b"\xff\xff\xff\xff", 1).topics is None


def test_encode_outside_valid_versions_raises() -> None:
    with pytest.raises(EncodeError):
        ApiVersionsRequest().encode(ApiVersionsRequest.MAX_VERSION + 1)


def test_decode_rejects_trailing_bytes() -> None:
    with pytest.raises(DecodeError, match="trailing"):
        ApiVersionsRequest.decode(b"\x00", 0)
