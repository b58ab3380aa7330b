"""Per-partition log settings with Kafka's topic-config names and defaults.

`LogConfig.from_topic_config` reads the topic-level property names ("segment.bytes",
"flush.ms", ...); a missing name takes Kafka's default. Names this module does not know are
ignored here: validating names and ranges is the job of kbroker/config.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

# Kafka uses Long.MAX_VALUE as "never" for flush.messages, flush.ms and the timestamp bounds.
LONG_MAX = 2**63 - 1


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"not a boolean: {value!r}")
    return lowered == "true"


def _policy(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


@dataclass(frozen=True)
class LogConfig:
    """Typed topic configuration for one partition log (defaults are Kafka's)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    preallocate: bool = False
    message_downconversion_enable: bool = True
    # Broker-side schema validation (Confluent Server's names; kbroker/schema_validation.py).
    confluent_key_schema_validation: bool = False
    confluent_value_schema_validation: bool = False

    @classmethod
    def from_topic_config(cls, props: Mapping[str, str]) -> LogConfig:
        """Build from topic-level property names; raises ValueError naming a bad value."""
        values: dict[str, Any] = {}
        known = {f.name for f in fields(cls)}
        for name, value in props.items():
            attr = name.replace(".", "_")
            if attr not in known or value is None:
                continue
            parse = _PARSERS.get(attr, int)
            try:
                values[attr] = parse(value)
            except ValueError as exc:
                raise ValueError(f"invalid value {value!r} for {name}: {exc}") from exc
        config = cls(**values)
        if config.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(
                f"invalid value {config.message_timestamp_type!r} for message.timestamp.type"
            )
        return config

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with its own clock (LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"


_PARSERS: dict[str, Callable[[str], Any]] = {
    "message_timestamp_type": str.strip,
    "compression_type": str.strip,
    "cleanup_policy": _policy,
    "min_cleanable_dirty_ratio": float,
    "unclean_leader_election_enable": _bool,
    "preallocate": _bool,
    "message_downconversion_enable": _bool,
    "confluent_key_schema_validation": _bool,
    "confluent_value_schema_validation": _bool,
}
