"""Definitions of the configuration properties kbroker accepts.

Two tables, both keyed by Kafka's own property names:

- ``BROKER_DEFS``: broker properties (what a stock Kafka ``server.properties`` may contain,
  plus ``metrics.port``, ``event.loop.stall.threshold.ms``, the ``request.read.*`` settings and
  the ``sasl.server.authentication.timeout.ms``,
  ``sasl.server.max.connections.in.authentication`` and ``ssl.max.handshakes.per.ip``
  limits, which are ours).
- ``TOPIC_DEFS``: topic-level configs (CreateTopics / AlterConfigs), each naming the broker
  properties that supply its default, in Kafka's priority order (e.g. ``retention.ms`` comes
  from ``log.retention.ms``, then ``log.retention.minutes``, then ``log.retention.hours``).

Defaults are kept as the strings Kafka would report for them (``None`` for "no value"), so
DescribeConfigs can show them unchanged. Types and their wire codes follow KIP-569; config
sources follow KIP-226 (``DescribeConfigsResponse`` ``ConfigSource``).

``NO_EFFECT_YET`` lists the broker properties that are accepted but not acted on yet; the broker
logs the ones that were set at start-up. Remove a name from it when the feature lands.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigType(enum.IntEnum):
    """Config value types with the codes DescribeConfigs v3+ sends (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (KIP-226 codes, DescribeConfigs v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


_BOUNDS: dict[ConfigType, tuple[int, int]] = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), INT32_MAX),
    ConfigType.LONG: (-(2**63), INT64_MAX),
}


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One property: its type, default and valid values.

    ``choices`` restricts a STRING value, or each element of a LIST value (which broker
    properties may change at run time: ``DYNAMIC_BROKER_CONFIGS``).
    """

    name: str
    type: ConfigType
    default: str | None
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> object:
        """Parse and check ``raw``; ValueError's message does not repeat the name."""
        text = raw.strip()
        if self.type is ConfigType.BOOLEAN:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError(f"expected true or false, got {raw!r}")
            return lowered == "true"
        if self.type in _BOUNDS:
            try:
                number = int(text)
            except ValueError:
                raise ValueError(f"expected an integer, got {raw!r}") from None
            low, high = _BOUNDS[self.type]
            if not low <= number <= high:
                raise ValueError(f"{number} does not fit in a {self.type.name.lower()}")
            self._check_range(number)
            return number
        if self.type is ConfigType.DOUBLE:
            try:
                real = float(text)
            except ValueError:
                raise ValueError(f"expected a number, got {raw!r}") from None
            if math.isnan(real):
                raise ValueError("NaN is not a valid value")
            self._check_range(real)
            return real
        if self.type is ConfigType.LIST:
            items = [item.strip() for item in text.split(",") if item.strip()]
            if self.choices is not None:
                for item in items:
                    self._check_choice(item)
            return items
        if self.choices is not None:
            self._check_choice(text)
        return text

    def _check_range(self, value: float) -> None:
        if self.min is not None and value < self.min:
            raise ValueError(f"value {value} must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise ValueError(f"value {value} must be at most {_num(self.max)}")

    def _check_choice(self, value: str) -> None:
        assert self.choices is not None
        if value not in self.choices:
            raise ValueError(f"{value!r} is not one of {', '.join(self.choices)}")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    table: dict[str, ConfigDef] = {}
    for d in defs:
        assert d.name not in table, d.name
        table[d.name] = d
    return table


PASSWORD = ConfigType.PASSWORD
BOOL, STR, INT, SHORT, LONG, DBL, LIST, CLASS = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.CLASS,
)

CLEANUP_POLICIES = ("compact", "delete")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
AUTHORIZER_CLASSES = (
    "",
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The name AclAuthorizer had before Kafka 2.4 (KIP-504).
    "kafka.security.auth.SimpleAclAuthorizer",
)
MAX_LONG = str(INT64_MAX)

BROKER_DEFS: dict[str, ConfigDef] = _defs(
    # Server basics.
    ConfigDef("broker.id", INT, "-1", min=-1),
    ConfigDef("broker.id.generation.enable", BOOL, "true"),
    ConfigDef("reserved.broker.max.id", INT, "1000", min=0),
    ConfigDef("broker.rack", STR, None),
    ConfigDef("metrics.port", INT, None, min=0, max=65535),
    ConfigDef("background.threads", INT, "10", min=1),
    ConfigDef("num.network.threads", INT, "3", min=1),
    ConfigDef("num.io.threads", INT, "8", min=1),
    ConfigDef("queued.max.requests", INT, "500", min=1),
    # Kafka's default is -1 (unbounded); kbroker bounds request memory by default (100 MiB,
    # the default socket.request.max.bytes, so the largest request still fits).
    ConfigDef("queued.max.request.bytes", LONG, "104857600"),
    ConfigDef("request.timeout.ms", INT, "30000", min=0),
    ConfigDef("inter.broker.protocol.version", STR, None),
    ConfigDef("create.topic.policy.class.name", CLASS, None),
    ConfigDef("alter.config.policy.class.name", CLASS, None),
    # Kafka's ACL authorizers, all served by kbroker/security/acls.py; empty: none (every
    # request allowed, the ACL APIs answer SECURITY_DISABLED).
    ConfigDef("authorizer.class.name", STR, "", choices=AUTHORIZER_CLASSES),
    ConfigDef("super.users", STR, None),
    ConfigDef("allow.everyone.if.no.acl.found", BOOL, "false"),
    ConfigDef("metric.reporters", LIST, ""),
    ConfigDef("metrics.num.samples", INT, "2", min=1),
    ConfigDef("metrics.sample.window.ms", LONG, "30000", min=1),
    ConfigDef("metrics.recording.level", STR, "INFO", choices=("INFO", "DEBUG", "TRACE")),
    ConfigDef("kafka.metrics.reporters", LIST, ""),
    # Client telemetry (KIP-714): the most bytes a PushTelemetry's metrics may take,
    # compressed or not (kbroker/telemetry/).
    ConfigDef("telemetry.max.bytes", INT, "1048576", min=1),
    # The schema registry (kbroker/schema_registry/): off unless given listeners, as
    # http://host:port or https://host:port (Confluent's ``listeners``), comma-separated.
    ConfigDef("schema.registry.listeners", LIST, ""),
    # The URL other brokers forward writes to (default: the first listener, its host made
    # routable as advertised.listeners does).
    ConfigDef("schema.registry.advertised.listener", STR, None),
    ConfigDef("schema.registry.authentication.method", STR, "NONE", choices=("NONE", "BASIC")),
    # Confluent's kafkastore.topic.replication.factor (capped at the brokers alive for a
    # single broker).
    ConfigDef("schema.registry.topic.replication.factor", SHORT, "3", min=1),
    # TLS of https:// registry listeners (and of forwarding between registries).
    ConfigDef("schema.registry.ssl.keystore.type", STR, "PEM"),
    ConfigDef("schema.registry.ssl.keystore.location", STR, None),
    ConfigDef("schema.registry.ssl.keystore.password", PASSWORD, None),
    ConfigDef("schema.registry.ssl.key.password", PASSWORD, None),
    ConfigDef("schema.registry.ssl.truststore.type", STR, "PEM"),
    ConfigDef("schema.registry.ssl.truststore.location", STR, None),
    ConfigDef("schema.registry.ssl.truststore.password", PASSWORD, None),
    ConfigDef(
        "schema.registry.ssl.client.auth", STR, "none", choices=("none", "requested", "required")
    ),
    # ZooKeeper.
    ConfigDef("zookeeper.connect", STR, None),
    ConfigDef("zookeeper.connection.timeout.ms", INT, None, min=1),
    ConfigDef("zookeeper.session.timeout.ms", INT, "18000", min=1),
    ConfigDef("zookeeper.max.in.flight.requests", INT, "10", min=1),
    ConfigDef("zookeeper.set.acl", BOOL, "false"),
    # Network.
    ConfigDef("listeners", LIST, "PLAINTEXT://:9092"),
    ConfigDef("advertised.listeners", LIST, None),
    ConfigDef(
        "listener.security.protocol.map",
        LIST,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    ConfigDef("inter.broker.listener.name", STR, None),
    ConfigDef("security.inter.broker.protocol", STR, "PLAINTEXT", choices=SECURITY_PROTOCOLS),
    ConfigDef("socket.send.buffer.bytes", INT, "102400"),
    ConfigDef("socket.receive.buffer.bytes", INT, "102400"),
    ConfigDef("socket.request.max.bytes", INT, "104857600", min=1),
    ConfigDef("socket.listen.backlog.size", INT, "50", min=1),
    ConfigDef("max.connections", INT, str(INT32_MAX), min=0),
    ConfigDef("max.connections.per.ip", INT, str(INT32_MAX), min=0),
    ConfigDef("max.connections.per.ip.overrides", STR, ""),
    ConfigDef("max.connection.creation.rate", INT, str(INT32_MAX), min=0),
    # Client quotas: Kafka's sample windows.
    ConfigDef("quota.window.num", INT, "11", min=1),
    ConfigDef("quota.window.size.seconds", INT, "1", min=1),
    ConfigDef("connections.max.idle.ms", LONG, "600000"),
    # TLS (a listener may override each as listener.name.<listener>.ssl.*). Keystores and
    # truststores are PEM files or inline PEM (KIP-651), or PKCS12 files.
    ConfigDef("ssl.keystore.type", STR, "JKS"),
    ConfigDef("ssl.keystore.location", STR, None),
    ConfigDef("ssl.keystore.password", PASSWORD, None),
    ConfigDef("ssl.keystore.key", PASSWORD, None),
    ConfigDef("ssl.keystore.certificate.chain", PASSWORD, None),
    ConfigDef("ssl.key.password", PASSWORD, None),
    ConfigDef("ssl.truststore.type", STR, "JKS"),
    ConfigDef("ssl.truststore.location", STR, None),
    ConfigDef("ssl.truststore.password", PASSWORD, None),
    ConfigDef("ssl.truststore.certificates", PASSWORD, None),
    ConfigDef("ssl.client.auth", STR, "none", choices=("none", "requested", "required")),
    ConfigDef("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3"),
    ConfigDef("ssl.protocol", STR, "TLSv1.3"),
    ConfigDef("ssl.cipher.suites", LIST, ""),
    ConfigDef("ssl.endpoint.identification.algorithm", STR, "https"),
    ConfigDef("ssl.principal.mapping.rules", STR, "DEFAULT"),
    # Ours (issue 29): how many TLS handshakes of one client address a listener runs at once;
    # the address's other accepted connections wait their turn (server/handshake_turns.py).
    ConfigDef("ssl.max.handshakes.per.ip", INT, "4", min=1),
    # SASL (KIP-43, KIP-84, KIP-152, KIP-368).
    ConfigDef("sasl.enabled.mechanisms", LIST, "GSSAPI"),
    ConfigDef("sasl.mechanism.inter.broker.protocol", STR, "GSSAPI"),
    ConfigDef("sasl.jaas.config", PASSWORD, None),
    ConfigDef("sasl.server.max.receive.size", INT, "524288", min=1),
    # Ours (issue 29): how long a SASL listener's client may take to authenticate, counted
    # from the accepted connection (Kafka leaves it to connections.max.idle.ms, 10 minutes),
    # and how many of a listener's connections may be authenticating at once (TLS handshake
    # included); at the limit the listener stops accepting until one authenticates or goes.
    ConfigDef("sasl.server.authentication.timeout.ms", LONG, "10000", min=1),
    ConfigDef("sasl.server.max.connections.in.authentication", INT, "1000", min=1),
    ConfigDef("connections.max.reauth.ms", LONG, "0", min=0),
    ConfigDef("connection.failed.authentication.delay.ms", INT, "100", min=0),
    # Encrypting secrets before they are stored (Kafka's PasswordEncoderConfigs, bounds
    # included); kbroker encrypts the mirror links' secrets with them
    # (kbroker/mirror/secrets.py). Every broker of a cluster needs the same secret.
    ConfigDef("password.encoder.secret", PASSWORD, None),
    ConfigDef("password.encoder.iterations", INT, "4096", min=1024),
    ConfigDef("password.encoder.key.length", INT, "128", min=8),
    # Accepted (Kafka lets them change at run time), without effect: kbroker has no
    # Kerberos, no SASL login refresh and no pluggable principal builders or TLS engines.
    ConfigDef(
        "principal.builder.class",
        CLASS,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    ),
    ConfigDef("sasl.kerberos.service.name", STR, None),
    ConfigDef("sasl.kerberos.kinit.cmd", STR, "/usr/bin/kinit"),
    ConfigDef("sasl.kerberos.min.time.before.relogin", LONG, "60000"),
    ConfigDef("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT"),
    ConfigDef("sasl.kerberos.ticket.renew.jitter", DBL, "0.05"),
    ConfigDef("sasl.kerberos.ticket.renew.window.factor", DBL, "0.8"),
    ConfigDef("sasl.login.refresh.buffer.seconds", SHORT, "300", min=0, max=3600),
    ConfigDef("sasl.login.refresh.min.period.seconds", SHORT, "60", min=0, max=900),
    ConfigDef("sasl.login.refresh.window.factor", DBL, "0.8", min=0.5, max=1.0),
    ConfigDef("sasl.login.refresh.window.jitter", DBL, "0.05", min=0, max=0.25),
    ConfigDef("ssl.engine.factory.class", CLASS, None),
    ConfigDef("ssl.keymanager.algorithm", STR, "SunX509"),
    ConfigDef("ssl.trustmanager.algorithm", STR, "PKIX"),
    ConfigDef("ssl.provider", STR, None),
    ConfigDef("ssl.secure.random.implementation", STR, None),
    # Ours: how long a request may take to arrive once its first byte has (30 s, the clients'
    # default request.timeout.ms: a client waiting longer has given up on it anyway); -1: none.
    ConfigDef("request.read.timeout.ms", LONG, "30000", min=-1),
    # Ours: a partial request gaining fewer bytes a second than this over the last
    # request.read.min.rate.window.ms of being read is dropped (server/request_progress.py);
    # 0 or -1: no minimum. The window is long enough for a few TCP retransmission timeouts
    # (1 s, 2 s, 4 s) of a client on a lossy link.
    ConfigDef("request.read.min.bytes.per.second", LONG, "1024", min=-1),
    ConfigDef("request.read.min.rate.window.ms", LONG, "10000", min=1),
    # Ours: an event-loop callback that holds every request up longer than this is logged
    # with the code it ran and counted (kbroker/loop_stalls.py); -1: not watched.
    ConfigDef("event.loop.stall.threshold.ms", INT, "100", min=-1),
    # Log basics.
    ConfigDef("log.dirs", LIST, None),
    ConfigDef("log.dir", LIST, "/tmp/kafka-logs"),
    # KIP-1066: directories that take no new partitions ("*": all of them).
    ConfigDef("cordoned.log.dirs", LIST, ""),
    ConfigDef("num.partitions", INT, "1", min=1),
    # KIP-966: the most partitions one DescribeTopicPartitions answer holds.
    ConfigDef("max.request.partition.size.limit", INT, "2000", min=1),
    ConfigDef("default.replication.factor", INT, "1", min=1),
    ConfigDef("num.recovery.threads.per.data.dir", INT, "1", min=1),
    ConfigDef("auto.create.topics.enable", BOOL, "true"),
    ConfigDef("delete.topic.enable", BOOL, "true"),
    ConfigDef("log.segment.bytes", INT, "1073741824", min=14),
    ConfigDef("log.roll.ms", LONG, None, min=1),
    ConfigDef("log.roll.hours", INT, "168", min=1),
    ConfigDef("log.roll.jitter.ms", LONG, None, min=0),
    ConfigDef("log.roll.jitter.hours", INT, "0", min=0),
    ConfigDef("log.retention.ms", LONG, None, min=-1),
    ConfigDef("log.retention.minutes", INT, None, min=-1),
    ConfigDef("log.retention.hours", INT, "168", min=-1),
    ConfigDef("log.retention.bytes", LONG, "-1"),
    ConfigDef("log.retention.check.interval.ms", LONG, "300000", min=1),
    ConfigDef("log.cleanup.policy", LIST, "delete", choices=CLEANUP_POLICIES),
    ConfigDef("log.index.interval.bytes", INT, "4096", min=0),
    ConfigDef("log.index.size.max.bytes", INT, "10485760", min=4),
    ConfigDef("log.flush.interval.messages", LONG, MAX_LONG, min=1),
    ConfigDef("log.flush.interval.ms", LONG, None, min=0),
    ConfigDef("log.flush.scheduler.interval.ms", LONG, MAX_LONG, min=0),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", INT, "60000", min=0),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", INT, "60000", min=0),
    ConfigDef("log.segment.delete.delay.ms", LONG, "60000", min=0),
    ConfigDef("log.preallocate", BOOL, "false"),
    ConfigDef("log.message.format.version", STR, "3.0-IV1"),
    ConfigDef("log.message.timestamp.type", STR, "CreateTime", choices=TIMESTAMP_TYPES),
    ConfigDef("log.message.timestamp.difference.max.ms", LONG, MAX_LONG, min=0),
    ConfigDef("log.message.timestamp.before.max.ms", LONG, MAX_LONG, min=0),
    ConfigDef("log.message.timestamp.after.max.ms", LONG, MAX_LONG, min=0),
    ConfigDef("log.message.downconversion.enable", BOOL, "true"),
    ConfigDef("message.max.bytes", INT, "1048588", min=0),
    ConfigDef("compression.type", STR, "producer", choices=COMPRESSION_TYPES),
    ConfigDef("compression.gzip.level", INT, "-1", min=-1, max=9),
    ConfigDef("compression.lz4.level", INT, "9", min=1, max=17),
    ConfigDef("compression.zstd.level", INT, "3", min=-131072, max=22),
    ConfigDef("min.insync.replicas", INT, "1", min=1),
    ConfigDef("unclean.leader.election.enable", BOOL, "false"),
    # kbroker's end-to-end audit (kbroker/audit/): per-window record counts in __audit. Off
    # by default: a cluster that is not audited shows clients no topic Kafka would not have.
    ConfigDef("audit.enable", BOOL, "false"),
    ConfigDef("audit.window.ms", LONG, "600000", min=1),
    ConfigDef("audit.publish.interval.ms", LONG, "10000", min=1),
    # Log cleaner.
    ConfigDef("log.cleaner.enable", BOOL, "true"),
    ConfigDef("log.cleaner.threads", INT, "1", min=0),
    ConfigDef("log.cleaner.io.max.bytes.per.second", DBL, "1.7976931348623157E308"),
    ConfigDef("log.cleaner.dedupe.buffer.size", LONG, "134217728"),
    ConfigDef("log.cleaner.io.buffer.size", INT, "524288", min=0),
    ConfigDef("log.cleaner.io.buffer.load.factor", DBL, "0.9"),
    ConfigDef("log.cleaner.backoff.ms", LONG, "15000", min=0),
    ConfigDef("log.cleaner.min.cleanable.ratio", DBL, "0.5", min=0, max=1),
    ConfigDef("log.cleaner.delete.retention.ms", LONG, "86400000", min=0),
    ConfigDef("log.cleaner.min.compaction.lag.ms", LONG, "0", min=0),
    ConfigDef("log.cleaner.max.compaction.lag.ms", LONG, MAX_LONG, min=1),
    # Leadership and shutdown.
    ConfigDef("auto.leader.rebalance.enable", BOOL, "true"),
    ConfigDef("leader.imbalance.per.broker.percentage", INT, "10"),
    ConfigDef("leader.imbalance.check.interval.seconds", LONG, "300", min=1),
    ConfigDef("controlled.shutdown.enable", BOOL, "true"),
    ConfigDef("controlled.shutdown.max.retries", INT, "3"),
    ConfigDef("controlled.shutdown.retry.backoff.ms", LONG, "5000"),
    ConfigDef("controller.socket.timeout.ms", INT, "30000"),
    # Replication.
    ConfigDef("replica.lag.time.max.ms", LONG, "30000", min=1),
    ConfigDef("replica.socket.timeout.ms", INT, "30000"),
    ConfigDef("replica.socket.receive.buffer.bytes", INT, "65536"),
    ConfigDef("replica.fetch.max.bytes", INT, "1048576", min=0),
    ConfigDef("replica.fetch.wait.max.ms", INT, "500", min=0),
    ConfigDef("replica.fetch.min.bytes", INT, "1", min=1),
    ConfigDef("replica.fetch.response.max.bytes", INT, "10485760", min=0),
    ConfigDef("replica.fetch.backoff.ms", INT, "1000", min=0),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", LONG, "5000", min=1),
    ConfigDef("replica.selector.class", STR, None),
    ConfigDef("num.replica.fetchers", INT, "1", min=1),
    ConfigDef("num.replica.alter.log.dirs.threads", INT, None),
    ConfigDef("fetch.max.bytes", INT, "57671680", min=1024),
    ConfigDef("fetch.purgatory.purge.interval.requests", INT, "1000"),
    ConfigDef("producer.purgatory.purge.interval.requests", INT, "1000"),
    ConfigDef("delete.records.purgatory.purge.interval.requests", INT, "1"),
    ConfigDef("max.incremental.fetch.session.cache.slots", INT, "1000", min=0),
    ConfigDef("min.incremental.fetch.session.eviction.ms", INT, "120000", min=0),
    # Group coordinator.
    ConfigDef("group.initial.rebalance.delay.ms", INT, "3000", min=0),
    ConfigDef("group.min.session.timeout.ms", INT, "6000", min=0),
    ConfigDef("group.max.session.timeout.ms", INT, "1800000", min=0),
    ConfigDef("group.max.size", INT, str(INT32_MAX), min=1),
    # The group protocols served: classic, and the consumer group protocol (KIP-848).
    # Kafka's "streams" (KIP-1071) is accepted and not served.
    ConfigDef(
        "group.coordinator.rebalance.protocols",
        LIST,
        "classic,consumer",
        choices=("classic", "consumer", "streams"),
    ),
    ConfigDef("group.consumer.session.timeout.ms", INT, "45000", min=1),
    ConfigDef("group.consumer.min.session.timeout.ms", INT, "45000", min=1),
    ConfigDef("group.consumer.max.session.timeout.ms", INT, "60000", min=1),
    ConfigDef("group.consumer.heartbeat.interval.ms", INT, "5000", min=1),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", INT, "5000", min=1),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", INT, "15000", min=1),
    ConfigDef("group.consumer.max.size", INT, str(INT32_MAX), min=1),
    # KIP-1263: a group computes a new target assignment at most once per interval.
    ConfigDef("group.consumer.assignment.interval.ms", INT, "1000", min=0),
    ConfigDef("group.consumer.min.assignment.interval.ms", INT, "0", min=0),
    ConfigDef("group.consumer.max.assignment.interval.ms", INT, "15000", min=0),
    # Share groups (KIP-932): their defaults and the bounds of the GROUP resource's overrides.
    ConfigDef("group.share.session.timeout.ms", INT, "45000", min=1),
    ConfigDef("group.share.min.session.timeout.ms", INT, "45000", min=1),
    ConfigDef("group.share.max.session.timeout.ms", INT, "60000", min=1),
    ConfigDef("group.share.heartbeat.interval.ms", INT, "5000", min=1),
    ConfigDef("group.share.min.heartbeat.interval.ms", INT, "5000", min=1),
    ConfigDef("group.share.max.heartbeat.interval.ms", INT, "15000", min=1),
    ConfigDef("group.share.assignment.interval.ms", INT, "1000", min=0),
    ConfigDef("group.share.min.assignment.interval.ms", INT, "0", min=0),
    ConfigDef("group.share.max.assignment.interval.ms", INT, "15000", min=0),
    ConfigDef("group.share.record.lock.duration.ms", INT, "30000", min=1000),
    ConfigDef("group.share.min.record.lock.duration.ms", INT, "15000", min=1000),
    ConfigDef("group.share.max.record.lock.duration.ms", INT, "60000", min=1000),
    ConfigDef("group.share.delivery.count.limit", INT, "5", min=2),
    ConfigDef("group.share.min.delivery.count.limit", INT, "2", min=2),
    ConfigDef("group.share.max.delivery.count.limit", INT, "10", min=2),
    ConfigDef("group.share.partition.max.record.locks", INT, "2000", min=100),
    ConfigDef("group.share.min.partition.max.record.locks", INT, "100", min=100),
    ConfigDef("group.share.max.partition.max.record.locks", INT, "4000", min=100),
    ConfigDef("group.share.max.size", INT, "200", min=1),
    ConfigDef("group.share.max.share.sessions", INT, "2000", min=1),
    # Streams groups (KIP-1071) are not served; their settings bound the GROUP resource.
    ConfigDef("group.streams.session.timeout.ms", INT, "45000", min=1),
    ConfigDef("group.streams.min.session.timeout.ms", INT, "45000", min=1),
    ConfigDef("group.streams.max.session.timeout.ms", INT, "60000", min=1),
    ConfigDef("group.streams.heartbeat.interval.ms", INT, "5000", min=1),
    ConfigDef("group.streams.min.heartbeat.interval.ms", INT, "5000", min=1),
    ConfigDef("group.streams.max.heartbeat.interval.ms", INT, "15000", min=1),
    ConfigDef("group.streams.assignment.interval.ms", INT, "1000", min=0),
    ConfigDef("group.streams.min.assignment.interval.ms", INT, "0", min=0),
    ConfigDef("group.streams.max.assignment.interval.ms", INT, "15000", min=0),
    ConfigDef("group.streams.initial.rebalance.delay.ms", INT, "3000", min=0),
    ConfigDef("group.streams.num.standby.replicas", INT, "0", min=0),
    ConfigDef("group.streams.max.standby.replicas", INT, "2", min=0),
    # Server-side assignors, by name or by Kafka's class name; the first is the default.
    ConfigDef("group.consumer.assignors", LIST, "uniform,range"),
    # Which conversions a group with members may go through between the classic and the
    # consumer protocols (kbroker/group/migration.py).
    ConfigDef(
        "group.consumer.migration.policy",
        STR,
        "bidirectional",
        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
    ),
    # Offsets topic.
    ConfigDef("offsets.topic.replication.factor", SHORT, "3", min=1),
    ConfigDef("offsets.topic.num.partitions", INT, "50", min=1),
    ConfigDef("offsets.topic.segment.bytes", INT, "104857600", min=1),
    ConfigDef("offsets.topic.compression.codec", INT, "0", min=0, max=4),
    ConfigDef("offsets.load.buffer.size", INT, "5242880", min=1),
    ConfigDef("offsets.retention.minutes", INT, "10080", min=1),
    ConfigDef("offsets.retention.check.interval.ms", LONG, "600000", min=1),
    ConfigDef("offsets.commit.timeout.ms", INT, "5000", min=1),
    ConfigDef("offsets.commit.required.acks", SHORT, "-1"),
    ConfigDef("offset.metadata.max.bytes", INT, "4096"),
    # The share coordinator (KIP-932): share-partition state in __share_group_state.
    ConfigDef("share.coordinator.state.topic.num.partitions", INT, "50", min=1),
    ConfigDef("share.coordinator.state.topic.replication.factor", SHORT, "3", min=1),
    ConfigDef("share.coordinator.state.topic.min.isr", SHORT, "2", min=1),
    ConfigDef("share.coordinator.state.topic.segment.bytes", INT, "104857600", min=1),
    ConfigDef("share.coordinator.state.topic.compression.codec", INT, "0", min=0, max=4),
    ConfigDef("share.coordinator.state.topic.prune.interval.ms", INT, "300000", min=1),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", INT, "500", min=0, max=500),
    ConfigDef("share.coordinator.cold.partition.snapshot.interval.ms", INT, "300000", min=1),
    ConfigDef("share.coordinator.write.timeout.ms", INT, "5000", min=1),
    ConfigDef("share.coordinator.load.buffer.size", INT, "5242880", min=1),
    ConfigDef("share.coordinator.threads", INT, "1", min=1),
    ConfigDef("share.coordinator.append.linger.ms", INT, "-1", min=-1),
    ConfigDef("share.coordinator.cached.buffer.max.bytes", INT, "1048588", min=524288),
    # Transactions and producer ids.
    ConfigDef("transaction.state.log.replication.factor", SHORT, "3", min=1),
    ConfigDef("transaction.state.log.min.isr", INT, "2", min=1),
    ConfigDef("transaction.state.log.num.partitions", INT, "50", min=1),
    ConfigDef("transaction.state.log.segment.bytes", INT, "104857600", min=1),
    ConfigDef("transaction.state.log.load.buffer.size", INT, "5242880", min=1),
    ConfigDef("transactional.id.expiration.ms", INT, "604800000", min=1),
    ConfigDef("transaction.max.timeout.ms", INT, "900000", min=1),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000", min=1),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000", min=1),
    # KIP-890: partition leaders verify a transaction's first batch with its coordinator.
    ConfigDef("transaction.partition.verification.enable", BOOL, "true"),
    ConfigDef("producer.id.expiration.ms", INT, "86400000", min=1),
    ConfigDef("producer.id.expiration.check.interval.ms", INT, "600000", min=1),
    # Tiered storage (KIP-405): accepted, not supported (-2: use the retention settings).
    ConfigDef("log.local.retention.ms", LONG, "-2", min=-2),
    ConfigDef("log.local.retention.bytes", LONG, "-2", min=-2),
    ConfigDef("remote.fetch.max.wait.ms", INT, "500", min=1),
    ConfigDef("remote.log.index.file.cache.total.size.bytes", LONG, "1073741824", min=1),
    ConfigDef("remote.log.manager.copy.max.bytes.per.second", LONG, MAX_LONG, min=1),
    ConfigDef("remote.log.manager.fetch.max.bytes.per.second", LONG, MAX_LONG, min=1),
)

# The broker properties AlterConfigs and IncrementalAlterConfigs may change on a BROKER
# resource (KIP-226): Kafka 3.9's set, the ones DescribeConfigs reports as not read-only.
# Which of them kbroker applies at once is said where they are applied
# (kbroker/dynamic_config.py); the others are kept and apply at the next start.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    {
        # Listeners and their security (most of these per listener, below).
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "ssl.cipher.suites",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keymanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
        # Connection limits.
        "max.connections",
        "max.connection.creation.rate",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        # Thread pools.
        "background.threads",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        # The log cleaner.
        "log.cleaner.threads",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        # The defaults of topic configs.
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.local.retention.bytes",
        "log.local.retention.ms",
        "log.message.downconversion.enable",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.jitter.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        "message.max.bytes",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        # The rest.
        "metric.reporters",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "remote.fetch.max.wait.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
    }
)

# Security configs that change at run time only for one listener, as
# listener.name.<listener>.<config> (Kafka's SslConfigs.RECONFIGURABLE_CONFIGS).
LISTENER_ONLY_CONFIGS: frozenset[str] = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)

# Dynamic configs that belong to one broker and cannot be cluster-wide defaults: its
# listeners and their security, except the connection limits and network threads (as Kafka:
# DynamicBrokerConfig's per-broker configs). Listener-prefixed configs other than SASL ones
# are per broker too.
PER_BROKER_CONFIGS: frozenset[str] = frozenset(
    name
    for name in DYNAMIC_BROKER_CONFIGS
    if name.startswith(("ssl.", "sasl."))
    or name
    in {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
    }
)

# Broker properties a listener may override as listener.name.<listener>.<property>
# (KIP-402, KIP-612; KIP-103 for ssl.* and sasl.*), the listener name in lower case. A
# mechanism's JAAS configuration is listener.name.<listener>.<mechanism>.sasl.jaas.config.
LISTENER_OVERRIDABLE: frozenset[str] = frozenset(
    {"max.connections", "max.connection.creation.rate", "connections.max.reauth.ms"}
    | {name for name in BROKER_DEFS if name.startswith(("ssl.", "sasl."))}
)
LISTENER_PREFIX = "listener.name."

# Accepted so that a stock server.properties loads, but nothing reads them yet.
NO_EFFECT_YET: frozenset[str] = frozenset(
    {
        "broker.id.generation.enable",
        "reserved.broker.max.id",
        "background.threads",
        "num.network.threads",
        "num.io.threads",
        "num.recovery.threads.per.data.dir",
        "inter.broker.protocol.version",
        "create.topic.policy.class.name",
        "alter.config.policy.class.name",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.sample.window.ms",
        "metrics.recording.level",
        "kafka.metrics.reporters",
        "zookeeper.max.in.flight.requests",
        "zookeeper.set.acl",
        "socket.listen.backlog.size",
        "log.flush.offset.checkpoint.interval.ms",
        "log.flush.start.offset.checkpoint.interval.ms",
        "log.preallocate",
        "log.message.format.version",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.cleaner.io.buffer.size",
        "controller.socket.timeout.ms",
        "replica.socket.receive.buffer.bytes",
        "replica.selector.class",
        "num.replica.alter.log.dirs.threads",
        "fetch.purgatory.purge.interval.requests",
        "producer.purgatory.purge.interval.requests",
        "delete.records.purgatory.purge.interval.requests",
        "offsets.topic.compression.codec",
        "offsets.load.buffer.size",
        "offsets.commit.required.acks",
        "transaction.state.log.load.buffer.size",
        "share.coordinator.state.topic.compression.codec",
        "share.coordinator.load.buffer.size",
        "share.coordinator.threads",
        "share.coordinator.append.linger.ms",
        "share.coordinator.cached.buffer.max.bytes",
        "log.local.retention.ms",
        "log.local.retention.bytes",
        "principal.builder.class",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "ssl.engine.factory.class",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "remote.fetch.max.wait.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
    }
)


@dataclass(frozen=True, slots=True)
class BrokerSynonym:
    """A broker property supplying a topic config's default; its value is multiplied by
    ``factor`` (e.g. hours -> milliseconds)."""

    name: str
    factor: int = 1


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """A topic-level config and the broker properties that supply its default, by priority."""

    definition: ConfigDef
    synonyms: tuple[BrokerSynonym, ...]

    @property
    def name(self) -> str:
        return self.definition.name


HOUR_MS = 3_600_000
MINUTE_MS = 60_000


def _topic(d: ConfigDef, *synonyms: BrokerSynonym | str) -> TopicConfigDef:
    syns = tuple(BrokerSynonym(s) if isinstance(s, str) else s for s in synonyms)
    for s in syns:
        assert s.name in BROKER_DEFS, s.name
    return TopicConfigDef(d, syns)


def _topic_defs(*defs: TopicConfigDef) -> dict[str, TopicConfigDef]:
    return {d.name: d for d in defs}


TOPIC_DEFS: dict[str, TopicConfigDef] = _topic_defs(
    _topic(
        ConfigDef("cleanup.policy", LIST, "delete", choices=CLEANUP_POLICIES), "log.cleanup.policy"
    ),
    _topic(
        ConfigDef("compression.type", STR, "producer", choices=COMPRESSION_TYPES),
        "compression.type",
    ),
    _topic(
        ConfigDef("delete.retention.ms", LONG, "86400000", min=0), "log.cleaner.delete.retention.ms"
    ),
    _topic(ConfigDef("file.delete.delay.ms", LONG, "60000", min=0), "log.segment.delete.delay.ms"),
    _topic(ConfigDef("flush.messages", LONG, MAX_LONG, min=1), "log.flush.interval.messages"),
    _topic(
        ConfigDef("flush.ms", LONG, MAX_LONG, min=0),
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    ),
    _topic(ConfigDef("index.interval.bytes", INT, "4096", min=0), "log.index.interval.bytes"),
    _topic(
        ConfigDef("max.compaction.lag.ms", LONG, MAX_LONG, min=1),
        "log.cleaner.max.compaction.lag.ms",
    ),
    _topic(ConfigDef("max.message.bytes", INT, "1048588", min=0), "message.max.bytes"),
    _topic(
        ConfigDef("message.downconversion.enable", BOOL, "true"),
        "log.message.downconversion.enable",
    ),
    _topic(
        ConfigDef("message.timestamp.type", STR, "CreateTime", choices=TIMESTAMP_TYPES),
        "log.message.timestamp.type",
    ),
    _topic(
        ConfigDef("message.timestamp.difference.max.ms", LONG, MAX_LONG, min=0),
        "log.message.timestamp.difference.max.ms",
    ),
    # KIP-937: separate bounds for timestamps in the past and in the future.
    _topic(
        ConfigDef("message.timestamp.before.max.ms", LONG, MAX_LONG, min=0),
        "log.message.timestamp.before.max.ms",
    ),
    _topic(
        ConfigDef("message.timestamp.after.max.ms", LONG, MAX_LONG, min=0),
        "log.message.timestamp.after.max.ms",
    ),
    _topic(
        ConfigDef("min.cleanable.dirty.ratio", DBL, "0.5", min=0, max=1),
        "log.cleaner.min.cleanable.ratio",
    ),
    _topic(
        ConfigDef("min.compaction.lag.ms", LONG, "0", min=0), "log.cleaner.min.compaction.lag.ms"
    ),
    _topic(ConfigDef("min.insync.replicas", INT, "1", min=1), "min.insync.replicas"),
    _topic(ConfigDef("preallocate", BOOL, "false"), "log.preallocate"),
    _topic(ConfigDef("retention.bytes", LONG, "-1"), "log.retention.bytes"),
    _topic(
        ConfigDef("retention.ms", LONG, "604800000", min=-1),
        "log.retention.ms",
        BrokerSynonym("log.retention.minutes", MINUTE_MS),
        BrokerSynonym("log.retention.hours", HOUR_MS),
    ),
    _topic(ConfigDef("segment.bytes", INT, "1073741824", min=14), "log.segment.bytes"),
    _topic(ConfigDef("segment.index.bytes", INT, "10485760", min=4), "log.index.size.max.bytes"),
    _topic(
        ConfigDef("segment.jitter.ms", LONG, "0", min=0),
        "log.roll.jitter.ms",
        BrokerSynonym("log.roll.jitter.hours", HOUR_MS),
    ),
    _topic(
        ConfigDef("segment.ms", LONG, "604800000", min=1),
        "log.roll.ms",
        BrokerSynonym("log.roll.hours", HOUR_MS),
    ),
    _topic(
        ConfigDef("unclean.leader.election.enable", BOOL, "false"), "unclean.leader.election.enable"
    ),
    # Accepted as Kafka 3.9 accepts them (tools and clients set them), without effect here;
    # message.format.version is deprecated, and Kafka 3 ignores it for the v2 format too.
    _topic(ConfigDef("message.format.version", STR, "3.0-IV1"), "log.message.format.version"),
    _topic(ConfigDef("compression.gzip.level", INT, "-1", min=-1, max=9), "compression.gzip.level"),
    _topic(ConfigDef("compression.lz4.level", INT, "9", min=1, max=17), "compression.lz4.level"),
    _topic(
        ConfigDef("compression.zstd.level", INT, "3", min=-131072, max=22),
        "compression.zstd.level",
    ),
    _topic(ConfigDef("leader.replication.throttled.replicas", LIST, "")),
    _topic(ConfigDef("follower.replication.throttled.replicas", LIST, "")),
    _topic(ConfigDef("local.retention.ms", LONG, "-2", min=-2), "log.local.retention.ms"),
    _topic(ConfigDef("local.retention.bytes", LONG, "-2", min=-2), "log.local.retention.bytes"),
    # Confluent Server's broker-side schema validation: each record's key or value must carry
    # the id of a schema registered under the topic's subject (kbroker/schema_validation.py).
    _topic(ConfigDef("confluent.key.schema.validation", BOOL, "false")),
    _topic(ConfigDef("confluent.value.schema.validation", BOOL, "false")),
    _topic(ConfigDef("remote.storage.enable", BOOL, "false")),
    _topic(ConfigDef("remote.log.copy.disable", BOOL, "false")),
    _topic(ConfigDef("remote.log.delete.on.disable", BOOL, "false")),
)

# Values refused although well-formed: what they ask for is not there (Kafka refuses
# remote.storage.enable=true too when the broker has no tiered storage).
TOPIC_UNSUPPORTED_VALUES: dict[tuple[str, str], str] = {
    ("remote.storage.enable", "true"): "tiered storage is not supported"
}

# Broker properties that fall back to another one when unset (Kafka's synonyms on the broker
# side, highest priority first), used for DescribeConfigs synonyms of BROKER resources.
BROKER_FALLBACKS: dict[str, tuple[str, ...]] = {
    "log.dirs": ("log.dirs", "log.dir"),
    "log.dir": ("log.dirs", "log.dir"),
}
for _t in TOPIC_DEFS.values():
    if len(_t.synonyms) > 1:
        for _s in _t.synonyms:
            BROKER_FALLBACKS[_s.name] = tuple(s.name for s in _t.synonyms)
