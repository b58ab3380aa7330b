"""The options of the ``kbroker`` data source, parsed and checked once on the driver.

They are the options of Spark's Kafka source and sink, with the same names and meanings:

- ``kafka.bootstrap.servers`` (required): ``host:port[,host:port...]``.
- ``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
  ``kafka.ssl.truststore.location``, ... : Kafka's client security properties with the
  ``kafka.`` prefix, as Spark's Kafka source takes them (kbroker.client_core.security).
- Exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular
  expression that must match the whole topic name) and ``assign`` (JSON
  ``{"topic": [0, 1]}``) for reads; ``topic`` (or a ``topic`` column) for writes.
- ``startingOffsets``: ``earliest``, ``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}``
  where -2 means earliest and -1 latest; default ``earliest`` for batch queries and ``latest``
  for streaming ones. ``startingTimestamp`` (ms since the epoch, for every partition) and
  ``startingOffsetsByTimestamp`` (JSON ``{"topic": {"0": ms}}``) take precedence, in that
  order; ``startingOffsetsByTimestampStrategy`` says what to do when no record is that recent:
  ``error`` (default) or ``latest``.
- ``endingOffsets`` (batch only): ``latest`` (default) or JSON, -1 meaning latest.
- ``maxOffsetsPerTrigger`` (streaming only): at most this many records per micro-batch,
  shared out over the partitions in proportion to what each has waiting.
- ``includeHeaders``: add the ``headers`` column.
- ``failOnDataLoss`` (default true): fail when records a query should read are gone
  (deleted by retention or DeleteRecords) instead of skipping them.
- ``kafkaConsumer.pollTimeoutMs`` (default 120000): how long a task waits for a partition to
  deliver the records it was planned to read.
- ``kafka.isolation.level``: ``read_uncommitted`` (default) or ``read_committed``, as for a
  Kafka consumer: then reads end at the last stable offset and leave out the records of
  aborted transactions (and of those still open).

Ours, not Spark's (kbroker's end-to-end audit, kbroker/audit/):

- ``auditTopic``: after a task read its whole offset range, it writes how many records it
  read per topic, partition and window of record timestamps to this topic (its partition 0,
  in ``__audit``'s format with the range in the key, kbroker/audit/records.py), so
  ``kbroker audit --tier NAME=bootstrap,topic=<auditTopic>`` compares what Spark read with
  what the brokers hold. With ``read_committed`` the counts leave out aborted records, as the
  brokers' do.
- ``auditWindowMs`` (default 600000): the window length; the brokers' ``audit.window.ms`` or
  a divisor of the ``--window`` the comparison uses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kbroker.audit.counter import DEFAULT_WINDOW_MS
from kbroker.client_core.security import (
    PLAINTEXT,
    SecurityConfig,
    SecurityConfigError,
    security_config,
)
from kbroker.data_client import EARLIEST, LATEST

TopicPartition = tuple[str, int]


class OptionError(ValueError):
    """An option is missing, unknown in this combination, or malformed."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: ``kind`` is "earliest", "latest", "offsets" (``offsets``
    holds the JSON's partitions) or "timestamps" (``timestamp`` for all partitions, or
    per-partition values in ``offsets``)."""

    kind: str
    offsets: Mapping[TopicPartition, int] | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class RegistrySettings:
    """``schema.registry.url`` and ``schema.registry.basic.auth.user.info``."""

    url: str
    user_info: str | None = None


def registry_of(o: Mapping[str, str]) -> RegistrySettings:
    url = (o.get("schema.registry.url") or "").strip()
    if not url:
        raise OptionError("valueFormat=avro needs the schema.registry.url option")
    return RegistrySettings(url, o.get("schema.registry.basic.auth.user.info") or None)


def value_format_of(o: Mapping[str, str]) -> str:
    value_format = o.get("valueformat", "binary").strip().lower()
    if value_format not in ("binary", "avro"):
        raise OptionError("valueFormat must be binary or avro")
    return value_format


@dataclass(frozen=True)
class SourceOptions:
    """The read options of one query, checked (see the module docstring)."""

    bootstrap: str
    subscribe: tuple[str, ...] | None
    pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy_latest: bool
    max_offsets_per_trigger: int | None
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    read_committed: bool = False
    security: SecurityConfig = PLAINTEXT
    # valueFormat=avro (spark_conn/avro_columns.py): the registry, the value subject, and the
    # id of the reader schema the driver chose (its latest version when the query was planned).
    value_format: str = "binary"
    registry: RegistrySettings | None = None
    value_subject: str | None = None
    reader_schema_id: int | None = None
    audit_topic: str | None = None
    audit_window_ms: int = DEFAULT_WINDOW_MS

    def matches(self, topic: str) -> bool:
        """Whether a topic (of a Metadata answer) is one this read is about."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        assert self.assign is not None
        return any(t == topic for t, _ in self.assign)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands options over case-insensitively; keep that whatever mapping we get.
    return {k.lower(): v for k, v in options.items() if v is not None}


def _bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"{name} must be true or false, not {value!r}")
    return lowered == "true"


def _partition_json(text: str, name: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(text)
        return {
            (str(topic), int(partition)): int(value)
            for topic, partitions in parsed.items()
            for partition, value in partitions.items()
        }
    except (ValueError, AttributeError, TypeError) as exc:
        raise OptionError(f'{name} must be JSON like {{"topic": {{"0": 12}}}}: {text!r}') from exc


def _offset_spec(text: str, name: str) -> OffsetSpec:
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return OffsetSpec(lowered)
    return OffsetSpec("offsets", offsets=_partition_json(text, name))


def _assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        parsed = json.loads(text)
        found = tuple(
            sorted((str(topic), int(p)) for topic, parts in parsed.items() for p in parts)
        )
    except (ValueError, AttributeError, TypeError) as exc:
        raise OptionError(f'assign must be JSON like {{"topic": [0, 1]}}: {text!r}') from exc
    if not found:
        raise OptionError("assign names no partition")
    return found


def bootstrap_of(options: Mapping[str, str]) -> str:
    """The ``kafka.bootstrap.servers`` option (OptionError when missing)."""
    lowered = _lower(options)
    servers = lowered.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise OptionError("option kafka.bootstrap.servers is required")
    return servers


def security_of(options: Mapping[str, str]) -> SecurityConfig:
    """The ``kafka.``-prefixed client security properties (OptionError when bad)."""
    props = {k[len("kafka.") :]: v for k, v in _lower(options).items() if k.startswith("kafka.")}
    try:
        config = security_config(props)
        config.mechanism()
    except SecurityConfigError as exc:
        raise OptionError(f"kafka.{exc}") from exc
    return config


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check the read options of one query; raises OptionError naming the option."""
    o = _lower(options)
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if o.get(k, "").strip()]
    if len(chosen) != 1:
        raise OptionError("exactly one of subscribe, subscribePattern and assign must be given")
    subscribe = pattern = assign = None
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in o["subscribe"].split(",") if t.strip())
    elif chosen[0] == "subscribepattern":
        pattern = o["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"subscribePattern is not a valid expression: {exc}") from exc
    else:
        assign = _assign(o["assign"])

    if "startingtimestamp" in o:
        try:
            starting = OffsetSpec("timestamps", timestamp=int(o["startingtimestamp"]))
        except ValueError as exc:
            raise OptionError("startingTimestamp must be milliseconds since the epoch") from exc
    elif "startingoffsetsbytimestamp" in o:
        starting = OffsetSpec(
            "timestamps",
            offsets=_partition_json(o["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp"),
        )
    else:
        starting = _offset_spec(
            o.get("startingoffsets", "latest" if streaming else "earliest"), "startingOffsets"
        )
    if streaming:
        if "endingoffsets" in o:
            raise OptionError("endingOffsets is for batch queries only")
        ending = OffsetSpec("latest")
    else:
        ending = _offset_spec(o.get("endingoffsets", "latest"), "endingOffsets")
        # A batch query has fixed bounds: it cannot start at "whatever is latest then", nor end
        # at the earliest offset (Spark's Kafka source refuses both too).
        if starting.kind == "latest" or (
            starting.kind == "offsets" and LATEST in (starting.offsets or {}).values()
        ):
            raise OptionError("startingOffsets latest (-1) is not allowed in a batch query")
        if ending.kind == "earliest" or (
            ending.kind == "offsets" and EARLIEST in (ending.offsets or {}).values()
        ):
            raise OptionError("endingOffsets earliest (-2) is not allowed in a batch query")

    strategy = o.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")

    max_per_trigger = None
    if "maxoffsetspertrigger" in o:
        if not streaming:
            raise OptionError("maxOffsetsPerTrigger is for streaming queries only")
        try:
            max_per_trigger = int(o["maxoffsetspertrigger"])
        except ValueError as exc:
            raise OptionError("maxOffsetsPerTrigger must be a positive integer") from exc
        if max_per_trigger <= 0:
            raise OptionError("maxOffsetsPerTrigger must be a positive integer")

    isolation = o.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError("kafka.isolation.level must be read_uncommitted or read_committed")

    try:
        poll_timeout_ms = int(o.get("kafkaconsumer.polltimeoutms", "120000"))
    except ValueError as exc:
        raise OptionError("kafkaConsumer.pollTimeoutMs must be milliseconds") from exc

    try:
        audit_window_ms = int(o.get("auditwindowms", str(DEFAULT_WINDOW_MS)))
    except ValueError as exc:
        raise OptionError("auditWindowMs must be milliseconds") from exc
    if audit_window_ms <= 0:
        raise OptionError("auditWindowMs must be positive")

    value_format = value_format_of(o)
    registry = value_subject = None
    if value_format == "avro":
        registry = registry_of(o)
        value_subject = o.get("valuesubject") or None
        if value_subject is None:
            if subscribe is None or len(subscribe) != 1:
                raise OptionError("valueFormat=avro over several topics needs valueSubject")
            value_subject = f"{subscribe[0]}-value"

    return SourceOptions(
        value_format=value_format,
        registry=registry,
        value_subject=value_subject,
        bootstrap=bootstrap_of(o),
        security=security_of(o),
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy_latest=strategy == "latest",
        max_offsets_per_trigger=max_per_trigger,
        include_headers=_bool(o.get("includeheaders", "false"), "includeHeaders"),
        fail_on_data_loss=_bool(o.get("failondataloss", "true"), "failOnDataLoss"),
        poll_timeout_ms=poll_timeout_ms,
        read_committed=isolation == "read_committed",
        audit_topic=o.get("audittopic", "").strip() or None,
        audit_window_ms=audit_window_ms,
    )
