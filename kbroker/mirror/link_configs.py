"""A mirror link's own record: what the link's topics share, kept beside the topics.

A mirror topic carries its link in its own ``kbroker.mirror.*`` topic configs
(kbroker/mirror/topic_configs.py); the link itself is a named config record in the metadata
store (controller/named_configs.py: ZooKeeper ``/config/kbroker-mirror-links/<link>`` or the
embedded metadata), read and written with DescribeConfigs and IncrementalAlterConfigs on
kbroker's own ConfigResource type ``MIRROR_LINK_RESOURCE`` (Kafka's types are 0 to 32:
no Kafka API knows cluster links). ``kbroker mirrors create`` writes it; deleting all its
configs removes it (the mirror topics stay, and keep following their source).

- ``kbroker.mirror.source.bootstrap`` and ``kbroker.mirror.source.config.<name>``: the
  source cluster and the client properties to reach it, as on the link's topics.
- ``kbroker.mirror.topic.regex``: the source topics the link follows (RE2, whole names, as
  Kafka matches its regexes): the controller creates a mirror topic for every source topic
  it matches that the cluster does not have yet, each ``metadata.max.age.ms`` of the
  source client properties (kbroker/mirror/link_follower.py). Without it the link has only
  the topics named at creation.
- ``kbroker.mirror.replication.factor``: the replication factor of the topics the link
  creates later (default -1, the broker's default).
- ``kbroker.mirror.fetch.max.bytes.per.second``: the link's fetch rate cap, per broker, as
  Kafka's replication throttles (kbroker/mirror/throttle.py); dynamic. Unset: no cap.
- ``kbroker.mirror.group.filter`` and ``kbroker.mirror.group.sync.ms``: given to the
  topics the link creates later.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from controller.interface import INTERNAL_TOPICS
from kbroker.config import ConfigEntry, ConfigSynonym
from kbroker.config_defs import ConfigSource, ConfigType
from kbroker.mirror import topic_configs
from kbroker.mirror.topic_configs import (
    ACTIVE,
    GROUP_FILTER,
    GROUP_SYNC_MS,
    LINK,
    PREFIX,
    SOURCE_BOOTSTRAP,
    SOURCE_CONFIG,
    SOURCE_TOPIC,
    STATE,
    is_sensitive,
)
from kbroker.regex import InvalidRegex, Regex
from wire.errors import ErrorCode, KafkaError

# kbroker's own ConfigResource type for a mirror link (DescribeConfigs,
# IncrementalAlterConfigs): far from Kafka's (powers of two, GROUP = 32 the highest).
MIRROR_LINK_RESOURCE = 100
TOPIC_REGEX = PREFIX + "topic.regex"
REPLICATION_FACTOR = PREFIX + "replication.factor"
FETCH_RATE = PREFIX + "fetch.max.bytes.per.second"
NAMES = (
    SOURCE_BOOTSTRAP,
    TOPIC_REGEX,
    REPLICATION_FACTOR,
    FETCH_RATE,
    GROUP_FILTER,
    GROUP_SYNC_MS,
)
# The link configs every topic the link creates carries too.
_TOPIC_SHARED = (SOURCE_BOOTSTRAP, GROUP_FILTER, GROUP_SYNC_MS)
_LINK_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_link_name(name: str) -> None:
    if not _LINK_NAME.fullmatch(name):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid mirror link name {name!r}: 1 to 249 of letters, digits, '.', '_', '-'",
        )


def validate_link_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs to store for a link (none: the link is removed); INVALID_CONFIG for an
    unknown name, a bad value, or a link without its source."""
    stored: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for {name}")
        client_prop = name.startswith(SOURCE_CONFIG) and len(name) > len(SOURCE_CONFIG)
        if name not in NAMES and not client_prop:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown mirror link config: {name}")
        if name == TOPIC_REGEX:
            _check_regex(name, value)
        elif name == REPLICATION_FACTOR:
            if not (value.lstrip("-").isdigit() and (int(value) == -1 or int(value) > 0)):
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {value!r} for {name}: -1 or a positive integer",
                )
        elif name == FETCH_RATE:
            if not (value.isdigit() and int(value) > 0):
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {value!r} for {name}: a positive integer (bytes/s)",
                )
        else:
            topic_configs.validate_mirror_config(name, value)
        stored[name] = value
    if stored and SOURCE_BOOTSTRAP not in stored:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"A mirror link needs {SOURCE_BOOTSTRAP}")
    topic_configs.validate_mirror_configs(stored)
    return stored


def _check_regex(name: str, value: str) -> None:
    try:
        Regex(value)
    except InvalidRegex as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: {exc}") from None


def describe(configs: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of a link: each config set, secrets masked as for the topics."""
    entries = []
    for name in sorted(configs):
        sensitive = is_sensitive(name)
        value = None if sensitive else configs[name]
        entries.append(
            ConfigEntry(
                name,
                value,
                ConfigSource.UNKNOWN,
                False,
                sensitive,
                ConfigType.PASSWORD if sensitive else ConfigType.STRING,
                (ConfigSynonym(name, value, ConfigSource.UNKNOWN),),
            )
        )
    return entries


def mirror_topic_configs(
    link: str, configs: Mapping[str, str], source_topic: str
) -> dict[str, str]:
    """The ``kbroker.mirror.*`` configs of a topic the link creates for ``source_topic``."""
    out = {k: v for k, v in configs.items() if k in _TOPIC_SHARED or k.startswith(SOURCE_CONFIG)}
    out.update({LINK: link, SOURCE_TOPIC: source_topic, STATE: ACTIVE})
    return out


def fetch_rate(configs: Mapping[str, str]) -> int | None:
    """The link's fetch rate cap in bytes/s; None: no cap."""
    value = configs.get(FETCH_RATE)
    return None if value is None else int(value)


def replication_factor(configs: Mapping[str, str]) -> int:
    return int(configs.get(REPLICATION_FACTOR, "-1"))


def topics_to_create(
    configs: Mapping[str, str], source_topics: Mapping[str, int], local_topics: Collection[str]
) -> dict[str, int]:
    """The source topics (name -> partition count) the link's regex matches and the cluster
    has no topic of that name for. A local topic of the same name, mirror or not, promoted or
    not, is left alone; so are the source's internal topics (offsets, transactions)."""
    pattern = configs.get(TOPIC_REGEX)
    if pattern is None:
        return {}
    regex = Regex(pattern)
    return {
        name: count
        for name, count in sorted(source_topics.items())
        if count > 0
        and name not in INTERNAL_TOPICS
        and name not in local_topics
        and regex.matches(name)
    }
