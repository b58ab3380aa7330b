"""A mirror topic's link, kept as topic configs named ``kbroker.mirror.*``.

No Kafka API creates or drives a cluster link, so the link of a mirror topic is part of the
topic's own configs: CreateTopics makes the mirror topic and its link in one step, the
metadata backend persists them where it persists every topic config (ZooKeeper
``/config/topics/<topic>`` or the embedded metadata), they go with the topic when it is
deleted, and IncrementalAlterConfigs pauses, resumes and promotes it. Any admin client can
read them with DescribeConfigs; ``kbroker mirrors`` (kbroker/cli/mirrors.py) is the friendly
face.

- ``kbroker.mirror.link``: the link's name (several topics may share one).
- ``kbroker.mirror.source.bootstrap``: ``host:port[,host:port...]`` of the source cluster;
  a topic with this config is a mirror topic.
- ``kbroker.mirror.source.topic``: the source topic (default: the same name).
- ``kbroker.mirror.state``: ``active`` (following), ``paused`` (not following, still
  read-only) or ``promoted`` (no longer following, writable: the failover step; final).
- ``kbroker.mirror.group.filter``: a regular expression (RE2, matching whole group ids, as
  Kafka matches its regexes): the committed offsets of the source's groups it matches, for
  this topic, are copied to the same groups here (kbroker/mirror/group_offsets.py).
- ``kbroker.mirror.group.sync.ms``: how often they are copied (default 5000).
- ``kbroker.mirror.source.config.<name>``: a Kafka client property for the connection to the
  source (``security.protocol``, ``sasl.jaas.config``, ``ssl.ca.location``, ... as the client
  core reads them, kbroker/client_core/security.py); passwords are sensitive (DescribeConfigs
  answers null for them, as Kafka does for its password configs), and stored encrypted
  (kbroker/mirror/secrets.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.client_core.security import SecurityConfig, SecurityConfigError, security_config
from kbroker.mirror.secrets import SOURCE_CONFIG, is_sensitive
from kbroker.mirror.secrets import parse as parse_encoded
from kbroker.regex import InvalidRegex, Regex
from wire.errors import ErrorCode, KafkaError

PREFIX = "kbroker.mirror."
LINK = PREFIX + "link"
SOURCE_BOOTSTRAP = PREFIX + "source.bootstrap"
SOURCE_TOPIC = PREFIX + "source.topic"
STATE = PREFIX + "state"
GROUP_FILTER = PREFIX + "group.filter"
GROUP_SYNC_MS = PREFIX + "group.sync.ms"
DEFAULT_GROUP_SYNC_MS = 5000
ACTIVE, PAUSED, PROMOTED = "active", "paused", "promoted"
STATES = (ACTIVE, PAUSED, PROMOTED)
DEFAULT_LINK = "default"
NAMES = (LINK, SOURCE_BOOTSTRAP, SOURCE_TOPIC, STATE, GROUP_FILTER, GROUP_SYNC_MS)


# The source topic configs a mirror topic takes over, at creation and whenever the link
# refreshes the source's metadata: those that decide which records stay and how large they
# may be. Storage layout (segment.*, index settings) stays the destination's choice.
COPIED_CONFIGS = (
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
)


def synced_configs(
    current: Mapping[str, str], source_overrides: Mapping[str, str]
) -> dict[str, str] | None:
    """The mirror topic's configs with the copied ones as the source has them set (an
    override the source dropped is dropped here too); None when nothing changes."""
    wanted = {k: v for k, v in current.items() if k not in COPIED_CONFIGS}
    wanted.update({k: v for k, v in source_overrides.items() if k in COPIED_CONFIGS})
    return None if wanted == dict(current) else wanted


@dataclass(frozen=True, slots=True)
class MirrorSpec:
    """Where a mirror topic's records come from."""

    link: str
    bootstrap: str
    source_topic: str
    state: str
    client_props: Mapping[str, str] = field(default_factory=dict)
    group_filter: str | None = None
    group_sync_ms: int = DEFAULT_GROUP_SYNC_MS

    @property
    def following(self) -> bool:
        """Read-only to producers: active or paused, not yet promoted."""
        return self.state != PROMOTED

    def security(self) -> SecurityConfig:
        return security_config(self.client_props)

    def runner_key(self) -> tuple[object, ...]:
        """What the topic's fetchers depend on: a change restarts them (not the state:
        pausing and resuming keep them)."""
        return (
            self.bootstrap,
            self.source_topic,
            tuple(sorted(self.client_props.items())),
            self.group_filter,
            self.group_sync_ms,
        )


def is_mirror_config(name: str) -> bool:
    return name.startswith(PREFIX)


def mirror_spec(topic: str, configs: Mapping[str, str]) -> MirrorSpec | None:
    """The mirror link of a topic with these configs; None for an ordinary topic."""
    bootstrap = configs.get(SOURCE_BOOTSTRAP)
    if not bootstrap:
        return None
    return MirrorSpec(
        link=configs.get(LINK, DEFAULT_LINK),
        bootstrap=bootstrap,
        source_topic=configs.get(SOURCE_TOPIC, topic),
        state=configs.get(STATE, ACTIVE),
        client_props={
            name[len(SOURCE_CONFIG) :]: value
            for name, value in configs.items()
            if name.startswith(SOURCE_CONFIG)
        },
        group_filter=configs.get(GROUP_FILTER) or None,
        group_sync_ms=int(configs.get(GROUP_SYNC_MS, DEFAULT_GROUP_SYNC_MS)),
    )


def read_only_error(topic: str, configs: Mapping[str, str]) -> KafkaError | None:
    """Produce's answer for a mirror topic not yet promoted, else None."""
    spec = mirror_spec(topic, configs)
    if spec is None or not spec.following:
        return None
    return KafkaError(
        ErrorCode.INVALID_REQUEST,
        f"topic {topic} is a read-only mirror of {spec.source_topic} at {spec.bootstrap} "
        f"(link {spec.link}); promote it to write to it",
    )


def validate_mirror_config(name: str, value: str) -> None:
    """Raise KafkaError(INVALID_CONFIG) for an unknown ``kbroker.mirror.*`` name or a bad
    value."""
    if name == STATE and value not in STATES:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {value!r} for {name}: one of {STATES}"
        )
    if name == SOURCE_BOOTSTRAP and not all(_is_address(a) for a in value.split(",")):
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {value!r} for {name}: host:port[,...]"
        )
    if name == GROUP_FILTER:
        try:
            Regex(value)
        except InvalidRegex as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: {exc}") from None
    if name == GROUP_SYNC_MS and not (value.isdigit() and int(value) > 0):
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {value!r} for {name}: a positive integer"
        )
    if name in (LINK, SOURCE_TOPIC) and not value.strip():
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Empty value for {name}")
    client_prop = name.startswith(SOURCE_CONFIG) and len(name) > len(SOURCE_CONFIG)
    if name not in NAMES and not client_prop:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")


def validate_mirror_configs(configs: Mapping[str, str]) -> None:
    """The whole set of a topic's mirror configs: the client properties must make a security
    setting the client core can use. They are checked in clear, before their secrets are
    encrypted (kbroker/mirror/secrets.py); with a secret already encrypted they are not
    checked again."""
    if any(is_sensitive(n) and parse_encoded(v) is not None for n, v in configs.items()):
        return
    props = {
        name[len(SOURCE_CONFIG) :]: value
        for name, value in configs.items()
        if name.startswith(SOURCE_CONFIG)
    }
    try:
        security_config(props)
    except SecurityConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{SOURCE_CONFIG}*: {exc}") from None


def check_mirror_change(
    topic: str, current: Mapping[str, str], updated: Mapping[str, str | None]
) -> None:
    """Refuse config changes that would end a mirror other than by promoting it, or follow
    again after a promotion: either would mix local writes with the source's records at
    the same offsets."""
    before = mirror_spec(topic, current)
    if before is None:
        return
    after = mirror_spec(topic, {n: v for n, v in updated.items() if v is not None})
    if before.following and (after is None or after.bootstrap != before.bootstrap):
        if after is None or after.following:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"{topic} is a mirror topic: promote it ({STATE}={PROMOTED}) before "
                f"removing or changing {SOURCE_BOOTSTRAP}",
            )
    if not before.following and after is not None and after.following:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"{topic} was promoted: it cannot follow a source again"
        )


def _is_address(text: str) -> bool:
    host, _, port = text.strip().rpartition(":")
    return bool(host) and port.isdigit()
