"""Broker configuration: Kafka property names, loading, validation, topic-config helpers.

Sources, lowest precedence first (DESIGN rule 8):

1. a Java ``.properties`` file (``server.properties``): ``key=value``, ``key:value`` or
   ``key value`` lines, ``#``/``!`` comments, backslash line continuation and escapes;
2. environment variables ``KBROKER_<NAME>``: the property name upper-cased with dots as
   underscores (``KBROKER_LOG_DIRS`` -> ``log.dirs``); only known names are looked up, so other
   ``KBROKER_*`` variables (test settings, for example) are left alone;
3. ``--override key=value`` flags.

Every property has a definition in ``config_defs``; an unknown name or a bad value raises
ConfigError naming the property.

Listeners are ``NAME://host:port``; NAME's security protocol comes from
``listener.security.protocol.map``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, each configured
by the ``ssl.*`` and ``sasl.*`` properties or their ``listener.name.<listener>.`` overrides
(kbroker/security/listener_security.py). When ``advertised.listeners`` is not
set, the listeners are advertised, with an empty or wildcard host (``0.0.0.0``, ``::``) replaced
by 127.0.0.1 (Kafka uses the machine's canonical host name there; loopback is the safe choice
for a single development broker, set ``advertised.listeners`` for anything else).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from kbroker.config_defs import (
    BROKER_DEFS,
    BROKER_FALLBACKS,
    DYNAMIC_BROKER_CONFIGS,
    LISTENER_ONLY_CONFIGS,
    LISTENER_OVERRIDABLE,
    LISTENER_PREFIX,
    NO_EFFECT_YET,
    PER_BROKER_CONFIGS,
    SECURITY_PROTOCOLS,
    TOPIC_DEFS,
    TOPIC_UNSUPPORTED_VALUES,
    ConfigDef,
    ConfigSource,
    ConfigType,
    TopicConfigDef,
)
from kbroker.mirror.topic_configs import (
    is_mirror_config,
    validate_mirror_config,
    validate_mirror_configs,
)
from kbroker.mirror.topic_configs import is_sensitive as is_mirror_secret
from wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

ENV_PREFIX = "KBROKER_"
ADVERTISED_WILDCARD_HOST = "127.0.0.1"


class ConfigError(Exception):
    """A property is unknown or has a bad value; the message names the property."""


class Listener(NamedTuple):
    name: str
    host: str
    port: int


# --- loading --------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for physical in text.splitlines():
        line = physical.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text; later duplicates win."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file; an unreadable file raises ConfigError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read properties file {path}: {e.strerror}") from e
    return parse_properties(text)


def env_var_name(prop: str) -> str:
    return ENV_PREFIX + prop.upper().replace(".", "_")


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """The known properties set through ``KBROKER_<NAME>`` environment variables."""
    found: dict[str, str] = {}
    for name in BROKER_DEFS:
        value = environ.get(env_var_name(name))
        if value is not None:
            found[name] = value
    return found


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings from ``--override`` flags."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects key=value, got {item!r}")
        props[key.strip()] = value
    return props


def resolve_properties(
    path: str | os.PathLike[str] | None,
    environ: Mapping[str, str],
    overrides: Sequence[str],
) -> dict[str, str]:
    """Merge file < environment < overrides."""
    props = load_properties(path) if path is not None else {}
    props.update(env_properties(environ))
    props.update(parse_overrides(overrides))
    return props


# --- values ---------------------------------------------------------------------------------


def _parse(d: ConfigDef, raw: str) -> Any:
    try:
        return d.parse(raw)
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw!r} for configuration {d.name}: {e}") from None


def _parse_protocol_map(raw: list[str]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for entry in raw:
        name, sep, proto = entry.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError(
                f"Invalid value {entry!r} for configuration listener.security.protocol.map: "
                "expected LISTENER_NAME:SECURITY_PROTOCOL"
            )
        mapping[name.strip().upper()] = proto.strip().upper()
    return mapping


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def parse_listeners(prop: str, raw: list[str], protocols: Mapping[str, str]) -> list[Listener]:
    """Parse ``NAME://host:port`` entries whose NAME maps to a security protocol."""
    listeners: list[Listener] = []
    for entry in raw:
        m = _LISTENER_RE.match(entry)
        if m is None:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {prop}: expected NAME://host:port"
            )
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if host.startswith("["):
            host = host[1:-1]
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {entry!r} for configuration {prop}: bad port")
        proto = protocols.get(name)
        if proto is None:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {prop}: listener name {name} has no "
                "entry in listener.security.protocol.map"
            )
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {prop}: unknown security protocol "
                f"{proto} (one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        if any(existing.name == name for existing in listeners):
            raise ConfigError(f"Invalid value for configuration {prop}: listener {name} repeated")
        if any(existing.port == port and port != 0 for existing in listeners):
            raise ConfigError(f"Invalid value for configuration {prop}: port {port} repeated")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ConfigError(f"Invalid value for configuration {prop}: no listener given")
    return listeners


def _advertise(listener: Listener) -> Listener:
    if listener.host in ("", "0.0.0.0", "::"):
        return listener._replace(host=ADVERTISED_WILDCARD_HOST)
    return listener


# --- the broker configuration ---------------------------------------------------------------


JAAS_CONFIG = "sasl.jaas.config"


def _cordoned_log_dirs(cordoned: list[str], dirs: list[str]) -> list[Path]:
    """KIP-1066: the log directories named by ``cordoned.log.dirs`` ("*" for all), each of
    which must be one of ``log.dirs``."""
    if cordoned == ["*"]:
        return [Path(d) for d in dirs]
    unknown = [d for d in cordoned if d not in dirs]
    if unknown:
        raise ConfigError(
            f"Invalid value {','.join(cordoned)} for configuration cordoned.log.dirs: "
            f"{', '.join(unknown)} not in log.dirs"
        )
    return [Path(d) for d in cordoned]


def _listener_override(name: str) -> tuple[str, str] | None:
    """(listener, property) of a listener.name.<listener>.<property> name Kafka lets a
    listener override, or None."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, prop = name[len(LISTENER_PREFIX) :].partition(".")
    if not listener:
        return None
    if prop in LISTENER_OVERRIDABLE:
        return listener, prop
    mechanism, _, rest = prop.partition(".")
    if mechanism and rest == JAAS_CONFIG:
        return listener, JAAS_CONFIG
    return None


def parse_per_ip_overrides(raw: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: ``host:count`` entries separated by commas."""
    out: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(
                f"Invalid value {raw!r} for configuration max.connections.per.ip.overrides: "
                f"expected host:count entries, got {entry!r}"
            )
        out[host.strip()] = int(count)
    return out


@dataclass(frozen=True)
class BrokerConfig:
    """Typed broker configuration. ``props`` holds the properties given explicitly (as strings);
    ``get(name)`` returns any property's parsed value, default included."""

    props: Mapping[str, str]
    values: Mapping[str, Any] = field(repr=False)
    broker_id: int
    broker_rack: str | None
    listeners: list[Listener]
    advertised_listeners: list[Listener]
    inter_broker_listener_name: str
    log_dirs: list[Path]
    cordoned_log_dirs: list[Path]
    num_partitions: int
    default_replication_factor: int
    min_insync_replicas: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    message_max_bytes: int
    zookeeper_connect: str | None
    zookeeper_connection_timeout_ms: int
    zookeeper_session_timeout_ms: int
    socket_request_max_bytes: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    queued_max_requests: int
    log_retention_check_interval_ms: int
    log_flush_scheduler_interval_ms: int
    metrics_port: int | None
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    unclean_leader_election_enable: bool

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate and type ``props`` (unknown name or bad value -> ConfigError)."""
        unknown = sorted(
            name for name in props if name not in BROKER_DEFS and _listener_override(name) is None
        )
        if unknown:
            raise ConfigError(f"Unknown configuration property {unknown[0]!r}")
        values: dict[str, Any] = {}
        for name, d in BROKER_DEFS.items():
            raw = props.get(name, d.default)
            values[name] = None if raw is None else _parse(d, raw)
        for name, raw in props.items():
            override = _listener_override(name)
            if override is not None:
                values[name] = _parse(BROKER_DEFS[override[1]], raw)
        parse_per_ip_overrides(values["max.connections.per.ip.overrides"])

        protocols = _parse_protocol_map(values["listener.security.protocol.map"])
        listeners = parse_listeners("listeners", values["listeners"], protocols)
        if values["advertised.listeners"] is None:
            advertised = [_advertise(lst) for lst in listeners]
        else:
            advertised = parse_listeners(
                "advertised.listeners", values["advertised.listeners"], protocols
            )
            for lst in advertised:
                if lst.host in ("0.0.0.0", "::"):
                    raise ConfigError(
                        "Invalid value for configuration advertised.listeners: cannot advertise "
                        f"the non-routable address {lst.host!r}"
                    )
            advertised = [_advertise(lst) for lst in advertised]
        inter = values["inter.broker.listener.name"]
        if inter is not None:
            inter = inter.upper()
            if all(lst.name != inter for lst in advertised):
                raise ConfigError(
                    f"Invalid value {inter!r} for configuration inter.broker.listener.name: "
                    "not a listener name in advertised.listeners"
                )
        else:
            # Kafka derives it from security.inter.broker.protocol; we fall back to the first
            # listener when there is no listener of that name, to keep single-broker setups easy.
            wanted = values["security.inter.broker.protocol"]
            names = [lst.name for lst in advertised]
            inter = wanted if wanted in names else names[0]

        dirs = values["log.dirs"] if values["log.dirs"] is not None else values["log.dir"]
        if not dirs:
            raise ConfigError("Invalid value for configuration log.dirs: no directory given")
        cordoned = _cordoned_log_dirs(values["cordoned.log.dirs"], dirs)

        broker_id = values["broker.id"]
        if broker_id == -1:
            if values["zookeeper.connect"] is not None:
                raise ConfigError(
                    "Invalid value -1 for configuration broker.id: broker id generation through "
                    "ZooKeeper is not supported yet, set broker.id"
                )
            broker_id = 0

        if values["default.replication.factor"] > 32767:
            raise ConfigError(
                "Invalid value for configuration default.replication.factor: at most 32767"
            )
        queued_bytes = values["queued.max.request.bytes"]
        if 0 < queued_bytes < values["socket.request.max.bytes"]:
            raise ConfigError(
                f"Invalid value {queued_bytes} for configuration queued.max.request.bytes: must "
                "be at least socket.request.max.bytes (or -1 for no bound), or the largest "
                "request could never be read"
            )
        session_timeout = values["zookeeper.session.timeout.ms"]
        connection_timeout = values["zookeeper.connection.timeout.ms"]
        return cls(
            props={name: value.strip() for name, value in props.items()},
            values=values,
            broker_id=broker_id,
            broker_rack=values["broker.rack"],
            listeners=listeners,
            advertised_listeners=advertised,
            inter_broker_listener_name=inter,
            log_dirs=[Path(d) for d in dirs],
            cordoned_log_dirs=cordoned,
            num_partitions=values["num.partitions"],
            default_replication_factor=values["default.replication.factor"],
            min_insync_replicas=values["min.insync.replicas"],
            auto_create_topics_enable=values["auto.create.topics.enable"],
            delete_topic_enable=values["delete.topic.enable"],
            message_max_bytes=values["message.max.bytes"],
            zookeeper_connect=values["zookeeper.connect"],
            # Kafka: the connection timeout defaults to the session timeout.
            zookeeper_connection_timeout_ms=(
                session_timeout if connection_timeout is None else connection_timeout
            ),
            zookeeper_session_timeout_ms=session_timeout,
            socket_request_max_bytes=values["socket.request.max.bytes"],
            socket_send_buffer_bytes=values["socket.send.buffer.bytes"],
            socket_receive_buffer_bytes=values["socket.receive.buffer.bytes"],
            queued_max_requests=values["queued.max.requests"],
            log_retention_check_interval_ms=values["log.retention.check.interval.ms"],
            log_flush_scheduler_interval_ms=values["log.flush.scheduler.interval.ms"],
            metrics_port=values["metrics.port"],
            offsets_topic_num_partitions=values["offsets.topic.num.partitions"],
            offsets_topic_replication_factor=values["offsets.topic.replication.factor"],
            transaction_state_log_num_partitions=values["transaction.state.log.num.partitions"],
            transaction_state_log_replication_factor=values[
                "transaction.state.log.replication.factor"
            ],
            group_initial_rebalance_delay_ms=values["group.initial.rebalance.delay.ms"],
            group_min_session_timeout_ms=values["group.min.session.timeout.ms"],
            group_max_session_timeout_ms=values["group.max.session.timeout.ms"],
            unclean_leader_election_enable=values["unclean.leader.election.enable"],
        )

    def get(self, name: str) -> Any:
        """The parsed value of any broker property (default included); KeyError if unknown."""
        return self.values[name]

    def with_dynamic(self, dynamic: DynamicConfigs) -> BrokerConfig:
        """This configuration with the dynamic configs in force on top (ConfigError when the
        result is not a valid configuration). ``props`` stay the static properties, which
        DescribeConfigs tells apart from the dynamic ones; names kbroker does not know are
        kept in the store but have no value here."""
        merged = dict(self.props)
        for layer in (dynamic.cluster_default, dynamic.per_broker):
            merged.update(
                (name, value)
                for name, value in layer.items()
                if name in BROKER_DEFS or _listener_override(name) is not None
            )
        return replace(BrokerConfig.from_properties(merged), props=self.props)

    def listener_value(self, listener: str, name: str) -> Any:
        """``name`` for one listener: listener.name.<listener>.<name> if set, else ``name``."""
        return self.values.get(f"{LISTENER_PREFIX}{listener.lower()}.{name}", self.values[name])

    def security_protocol(self, listener: str) -> str:
        """The security protocol of a listener (listener.security.protocol.map)."""
        return _parse_protocol_map(self.values["listener.security.protocol.map"])[listener]

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """A SASL mechanism's JAAS configuration on a listener: the
        listener.name.<listener>.<mechanism>.sasl.jaas.config property, else
        sasl.jaas.config."""
        key = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.{JAAS_CONFIG}"
        value = self.values.get(key, self.values[JAAS_CONFIG])
        return None if value is None else str(value)

    def no_effect_properties(self) -> list[str]:
        """Explicitly set properties that are accepted but not acted on yet."""
        return sorted(name for name in self.props if name in NO_EFFECT_YET)

    def log_no_effect(self, logger: logging.Logger = log) -> None:
        names = self.no_effect_properties()
        if names:
            logger.info("properties accepted, no effect yet: %s", ", ".join(names))

    def topic_defaults(self, dynamic: DynamicConfigs | None = None) -> dict[str, str]:
        """Topic-level config names -> the broker's default for them (``dynamic``: dynamic broker
        configs, which win over static properties)."""
        return {
            name: _topic_default(t, self, dynamic or NO_DYNAMIC_CONFIGS)[0]
            for name, t in TOPIC_DEFS.items()
        }


# --- dynamic broker configs -----------------------------------------------------------------


@dataclass(frozen=True)
class DynamicConfigs:
    """The dynamic broker configs (KIP-226) in force on one broker: its own, which win, and
    the cluster-wide defaults (the BROKER resource with the empty name)."""

    per_broker: Mapping[str, str] = field(default_factory=dict)
    cluster_default: Mapping[str, str] = field(default_factory=dict)

    def layers(self) -> tuple[tuple[Mapping[str, str], ConfigSource], ...]:
        """Highest precedence first."""
        return (
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        )


NO_DYNAMIC_CONFIGS = DynamicConfigs()


def listener_base_config(name: str) -> str | None:
    """The config a listener.name.<listener>.<config> name overrides, or None."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, base = name[len(LISTENER_PREFIX) :].partition(".")
    return base if listener and base else None


_PASSWORD_CONFIGS = tuple(n for n, d in BROKER_DEFS.items() if d.sensitive)


def is_password_config(name: str) -> bool:
    """A password-typed broker config, listener override or not (by the name's end, as a
    SASL mechanism's listener.name.<listener>.<mechanism>.sasl.jaas.config)."""
    return name.endswith(_PASSWORD_CONFIGS)


def _invalid_names(names: Iterable[str], reason: str) -> None:
    found = sorted(names)
    if found:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{reason}: {', '.join(found)}")


def validate_dynamic_broker_configs(
    configs: Mapping[str, str | None], *, per_broker: bool = True
) -> None:
    """Raise KafkaError(INVALID_REQUEST), as Kafka answers for broker resources, unless every
    config may change at run time at this level (one broker, or the cluster-wide default
    when ``per_broker`` is false) and every known config's value is valid. Names kbroker
    does not know are accepted and kept, as Kafka keeps them."""
    _invalid_names(
        (n for n in configs if n in BROKER_DEFS and n not in DYNAMIC_BROKER_CONFIGS),
        "Cannot update these configs dynamically",
    )
    _invalid_names(
        (n for n in configs if n in LISTENER_ONLY_CONFIGS),
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix",
    )
    for name, value in configs.items():
        if value is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for broker config {name}"
            )
        d = BROKER_DEFS.get(listener_base_config(name) or name)
        if d is None:
            continue
        try:
            d.parse(value)
        except ValueError as e:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Invalid value {value} for configuration {name}: {e}"
            ) from None
    if not per_broker:
        # Listener overrides belong to one broker, except the SASL ones (Kafka's rule).
        _invalid_names(
            (
                n
                for n in configs
                if n in PER_BROKER_CONFIGS
                or not (listener_base_config(n) or "sasl.").startswith("sasl.")
            ),
            "Cannot update these configs at default cluster level, broker id must be specified",
        )


# --- topic configs --------------------------------------------------------------------------


def _broker_value(
    name: str, broker: BrokerConfig, dynamic: DynamicConfigs
) -> tuple[str | None, ConfigSource]:
    for layer, source in dynamic.layers():
        if name in layer:
            return layer[name], source
    if name in broker.props:
        return broker.props[name], ConfigSource.STATIC_BROKER_CONFIG
    return BROKER_DEFS[name].default, ConfigSource.DEFAULT_CONFIG


def _topic_default(
    t: TopicConfigDef, broker: BrokerConfig, dynamic: DynamicConfigs
) -> tuple[str, ConfigSource]:
    """The first synonym (by priority) with a value wins, converted to the topic's unit."""
    for syn in t.synonyms:
        raw, source = _broker_value(syn.name, broker, dynamic)
        if raw is None:
            continue
        if syn.factor != 1:
            number = int(raw)
            raw = str(-1 if number < 0 else number * syn.factor)
        return raw, source
    assert t.definition.default is not None, t.name
    return t.definition.default, ConfigSource.DEFAULT_CONFIG


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise KafkaError(INVALID_CONFIG) naming the first unknown name or bad value."""
    for name, value in configs.items():
        if is_mirror_config(name) and value is not None:
            validate_mirror_config(name, value)
            continue
        t = TOPIC_DEFS.get(name)
        if t is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic config {name}"
            )
        try:
            t.definition.parse(value)
        except ValueError as e:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {value!r} for topic config {name}: {e}"
            ) from None
        unsupported = TOPIC_UNSUPPORTED_VALUES.get((name, value.strip().lower()))
        if unsupported is not None:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value!r} for topic config {name}: {unsupported}",
            )
    validate_mirror_configs({n: v for n, v in configs.items() if v is not None})


def effective_topic_config(
    overrides: Mapping[str, str],
    broker: BrokerConfig,
    dynamic: DynamicConfigs | None = None,
) -> dict[str, str]:
    """Every topic config: the topic's override, else the (dynamic, static) broker default."""
    merged = broker.topic_defaults(dynamic)
    merged.update(overrides)
    return merged


# --- DescribeConfigs views ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs / CreateTopics v5+ report it."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    synonyms: tuple[ConfigSynonym, ...]


def broker_synonyms(
    name: str, broker: BrokerConfig, dynamic: DynamicConfigs
) -> list[ConfigSynonym]:
    """Where a broker config's value may come from, highest precedence first."""
    out: list[ConfigSynonym] = []
    for layer, source in dynamic.layers():
        if name in layer:
            out.append(ConfigSynonym(name, layer[name], source))
    if name in broker.props:
        out.append(ConfigSynonym(name, broker.props[name], ConfigSource.STATIC_BROKER_CONFIG))
    default = BROKER_DEFS[name].default
    if default is not None:
        out.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic_configs(
    overrides: Mapping[str, str],
    broker: BrokerConfig,
    dynamic: DynamicConfigs | None = None,
) -> list[ConfigEntry]:
    """Every topic config with its value, source and synonyms (topic override first, then the
    broker properties that supply the default, in priority order)."""
    dyn = dynamic or NO_DYNAMIC_CONFIGS
    entries: list[ConfigEntry] = []
    for name, t in sorted(TOPIC_DEFS.items()):
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, overrides[name], ConfigSource.TOPIC_CONFIG))
        for syn in t.synonyms:
            synonyms.extend(broker_synonyms(syn.name, broker, dyn))
        if name in overrides:
            value, source = overrides[name], ConfigSource.TOPIC_CONFIG
        else:
            value, source = _topic_default(t, broker, dyn)
        d = t.definition
        entries.append(
            ConfigEntry(
                name=name,
                value=None if d.sensitive else value,
                source=source,
                read_only=False,
                sensitive=d.sensitive,
                type=d.type,
                synonyms=tuple(synonyms),
            )
        )
    # A mirror topic's link (kbroker/mirror/topic_configs.py): listed only where set.
    for name in sorted(n for n in overrides if is_mirror_config(n)):
        sensitive = is_mirror_secret(name)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else overrides[name],
                source=ConfigSource.TOPIC_CONFIG,
                read_only=False,
                sensitive=sensitive,
                type=ConfigType.PASSWORD if sensitive else ConfigType.STRING,
                synonyms=(
                    ConfigSynonym(
                        name, None if sensitive else overrides[name], ConfigSource.TOPIC_CONFIG
                    ),
                ),
            )
        )
    return entries


def _masked(value: str | None, sensitive: bool) -> str | None:
    return None if sensitive else value


def _synonyms(synonyms: Iterable[ConfigSynonym], sensitive: bool) -> tuple[ConfigSynonym, ...]:
    return tuple(ConfigSynonym(s.name, _masked(s.value, sensitive), s.source) for s in synonyms)


def _other_entry(name: str, synonyms: list[ConfigSynonym]) -> ConfigEntry:
    """A name outside kbroker's definitions, set in a layer: a listener override (typed as
    the config it overrides, followed by that config's own synonyms) or a name kbroker does
    not know (no type, its value hidden as Kafka hides it). Read-only, as Kafka shows them."""
    base = BROKER_DEFS.get(listener_base_config(name) or name)
    if base is None:
        return ConfigEntry(
            name,
            None,
            synonyms[0].source,
            True,
            True,
            ConfigType.UNKNOWN,
            _synonyms(synonyms, True),
        )
    return ConfigEntry(
        name,
        _masked(synonyms[0].value, base.sensitive),
        synonyms[0].source,
        True,
        base.sensitive,
        base.type,
        _synonyms(synonyms, base.sensitive),
    )


def describe_broker_configs(
    broker: BrokerConfig, dynamic: DynamicConfigs | None = None
) -> list[ConfigEntry]:
    """Every broker property, then the listener overrides and unknown names set statically
    or dynamically; only the dynamic properties are not read-only. Each comes with its
    synonyms, highest precedence first: this broker's dynamic value, the cluster-wide
    dynamic default, the static property, the default (and, for the properties with
    several names, those of the other names)."""
    dyn = dynamic or NO_DYNAMIC_CONFIGS
    entries: list[ConfigEntry] = []
    for name, d in sorted(BROKER_DEFS.items()):
        value, source = _broker_value(name, broker, dyn)
        synonyms: list[ConfigSynonym] = []
        for syn_name in BROKER_FALLBACKS.get(name, (name,)):
            synonyms.extend(broker_synonyms(syn_name, broker, dyn))
        entries.append(
            ConfigEntry(
                name=name,
                value=_masked(value, d.sensitive),
                source=source,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                sensitive=d.sensitive,
                type=d.type,
                synonyms=_synonyms(synonyms, d.sensitive),
            )
        )
    layers = (*dyn.layers(), (broker.props, ConfigSource.STATIC_BROKER_CONFIG))
    others = sorted({n for layer, _ in layers for n in layer if n not in BROKER_DEFS})
    for name in others:
        synonyms = [ConfigSynonym(name, layer[name], src) for layer, src in layers if name in layer]
        base = listener_base_config(name)
        if base in BROKER_DEFS:
            synonyms.extend(broker_synonyms(base, broker, dyn))
        entries.append(_other_entry(name, synonyms))
    return entries


def describe_default_broker_configs(dynamic: DynamicConfigs) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (the BROKER resource with the empty name): only the
    configs set there, as Kafka describes that resource."""
    entries: list[ConfigEntry] = []
    for name, value in sorted(dynamic.cluster_default.items()):
        synonyms = [ConfigSynonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
        d = BROKER_DEFS.get(name)
        if d is None:
            entries.append(_other_entry(name, synonyms))
            continue
        entries.append(
            ConfigEntry(
                name,
                _masked(value, d.sensitive),
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                name not in DYNAMIC_BROKER_CONFIGS,
                d.sensitive,
                d.type,
                _synonyms(synonyms, d.sensitive),
            )
        )
    return entries
