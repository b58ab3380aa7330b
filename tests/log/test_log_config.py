"""LogConfig: Kafka's topic-config names and defaults."""

from __future__ import annotations

import pytest

from kbroker.log.log_config import LONG_MAX, LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig.from_topic_config({})
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.flush_messages == LONG_MAX and config.flush_ms == LONG_MAX
    assert config.message_timestamp_type == "CreateTime"
    assert config.max_message_bytes == 1048588
    assert config.retention_ms == 604800000 and config.retention_bytes == -1
    assert config.cleanup_policy == ("delete",)


def test_topic_names_are_parsed() -> None:
    config = LogConfig.from_topic_config(
        {
            "segment.bytes": "1000",
            "segment.ms": "60000",
            "flush.messages": "1",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.25",
            "unclean.leader.election.enable": "true",
            "some.unknown.name": "x",
        }
    )
    assert config.segment_bytes == 1000 and config.segment_ms == 60000
    assert config.flush_messages == 1
    assert config.log_append_time
    assert config.cleanup_policy == ("compact", "delete")
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.unclean_leader_election_enable is True


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "big"},
        {"message.timestamp.type": "Whenever"},
        {"preallocate": "maybe"},
    ],
)
def test_bad_values_name_the_property(props: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=next(iter(props)).replace(".", r"\.")):
        LogConfig.from_topic_config(props)
