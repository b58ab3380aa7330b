"""Client-metrics subscriptions: the CLIENT_METRICS config resource (ConfigResource type 16).

A subscription is a named set of three configs (KIP-714, Kafka's ClientMetricsConfigs):

- ``metrics``: comma-separated metric name prefixes the matching clients push (``*`` or an
  empty prefix: every metric; empty: none);
- ``interval.ms``: how often they push, 100 to 3600000 (default 300000);
- ``match``: comma-separated ``selector=regex`` pairs, every one of which must match the
  whole of the client's attribute (``client_instance_id``, ``client_id``,
  ``client_software_name``, ``client_software_version``, ``client_source_address``,
  ``client_source_port``); none: every client.

Validation answers with Kafka's error codes and messages (checked against Kafka 4.3):
an unknown config or an interval out of range is INVALID_REQUEST, a value of the wrong type
or a bad match pattern INVALID_CONFIG. Values are kept normalized as Kafka describes them:
list items trimmed and joined by ``,``, the interval as a plain integer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kbroker.config import ConfigEntry, ConfigSynonym
from kbroker.config_defs import ConfigSource, ConfigType
from kbroker.regex import InvalidRegex, Regex
from wire.errors import ErrorCode, KafkaError

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
# In the order DescribeConfigs lists them.
NAMES = (INTERVAL_MS, MATCH, METRICS)
LIST_CONFIGS = frozenset({METRICS, MATCH})
DEFAULTS: dict[str, str] = {INTERVAL_MS: "300000", MATCH: "", METRICS: ""}
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
ALL_METRICS = "*"

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
SELECTORS = (
    CLIENT_ID,
    CLIENT_INSTANCE_ID,
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    CLIENT_SOURCE_ADDRESS,
    CLIENT_SOURCE_PORT,
)

_INT = re.compile(r"[+-]?[0-9]+")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscription, parsed: which clients (``patterns``, all must match), which metrics,
    how often."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    patterns: tuple[tuple[str, Regex], ...]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        for selector, pattern in self.patterns:
            value = attributes.get(selector)
            if value is None or not pattern.matches(value):
                return False
        return True


def check_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")


def normalize(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs validated, with their values as Kafka keeps them; KafkaError otherwise."""
    for name in configs:
        if name not in DEFAULTS:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {name}"
            )
    out: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        if name == INTERVAL_MS:
            out[name] = str(_interval(value))
        else:
            out[name] = ",".join(_items(name, value))
    if MATCH in out:
        parse_patterns(_items(MATCH, out[MATCH]))
    return out


def _interval(value: str) -> int:
    text = value.strip()
    number = int(text) if _INT.fullmatch(text) else None
    if number is None or not INT32_MIN <= number <= INT32_MAX:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {value} for configuration {INTERVAL_MS}: Not a number of type INT",
        )
    if not MIN_INTERVAL_MS <= number <= MAX_INTERVAL_MS:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid value {number} for {INTERVAL_MS}, interval must be between "
            f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
        )
    return number


def _items(name: str, value: str) -> list[str]:
    """A LIST config's items, as Kafka's ConfigDef parses them: none for a blank value,
    and no blank item."""
    if not value.strip():
        return []
    items = [item.strip() for item in value.strip().split(",")]
    if any(not item for item in items):
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Configuration '{name}' values must not be empty."
        )
    return items


def parse_patterns(items: list[str]) -> tuple[tuple[str, Regex], ...]:
    """``selector=regex`` items as (selector, compiled regex); a later item for the same
    selector replaces an earlier one, as in Kafka. The patterns are matched against what
    clients send, so they run on RE2 (kbroker/regex.py: linear time), as newer Kafka does;
    its syntax is Java's for the patterns one writes for client ids and versions."""
    patterns: dict[str, Regex] = {}
    for item in items:
        parts = item.split("=")
        # Java's String.split drops trailing empty strings: "client_id=" is one part.
        while parts and not parts[-1]:
            parts.pop()
        selector = parts[0].strip() if parts else ""
        if len(parts) != 2 or selector not in SELECTORS:
            raise _illegal_pattern(item)
        try:
            patterns[selector] = Regex(parts[1].strip())
        except InvalidRegex as exc:
            raise _illegal_pattern(item) from exc
    return tuple(patterns.items())


def _illegal_pattern(item: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}")


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A stored subscription (already normalized), its absent configs at their defaults."""
    values = {**DEFAULTS, **normalize(configs)}
    return Subscription(
        name=name,
        metrics=tuple(_items(METRICS, values[METRICS])),
        interval_ms=int(values[INTERVAL_MS]),
        patterns=parse_patterns(_items(MATCH, values[MATCH])),
    )


def describe(configs: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs of a subscription (any name: one never set shows its defaults, as in
    Kafka): each config set, with itself as its synonym, or its default."""
    entries = []
    for name in NAMES:
        kind = ConfigType.INT if name == INTERVAL_MS else ConfigType.LIST
        value = configs.get(name)
        if value is None:
            entries.append(
                ConfigEntry(
                    name, DEFAULTS[name], ConfigSource.DEFAULT_CONFIG, False, False, kind, ()
                )
            )
            continue
        source = ConfigSource.CLIENT_METRICS_CONFIG
        synonym = ConfigSynonym(name, value, source)
        entries.append(ConfigEntry(name, value, source, False, False, kind, (synonym,)))
    return entries
