"""Group configs: the GROUP config resource (ConfigResource type 32; KIP-848, KIP-932,
KIP-1071), per-group overrides of the broker's ``group.consumer.*``, ``group.share.*`` and
``group.streams.*`` settings, as Kafka 4.3 has them.

Each config has Kafka's type and own lower bound; most take their default from a broker config
and must lie within that config's ``min``/``max`` broker configs (``consumer.session.timeout.ms``
within ``group.consumer.min.session.timeout.ms`` and ``group.consumer.max.session.timeout.ms``);
the share group's ``share.auto.offset.reset``, ``share.isolation.level`` and
``share.renew.acknowledge.enable`` have defaults of their own. A group's overrides are stored by
the metadata (controller/named_configs.py) whether or not the group exists, and outlive its
deletion, as in Kafka. Errors carry Kafka's messages: INVALID_CONFIG for a value or a name,
INVALID_REQUEST for a null value or the empty (default) group name.

kbroker serves no streams groups (KIP-1071); their configs are accepted and described as Kafka
does, without effect. ``consumer.assignment.interval.ms`` (KIP-1263) spaces a consumer group's
target assignments; ``share.assignment.interval.ms`` is accepted without effect: a share group
assigns at once, so a partition whose share state was just initialized is handed out at the
member's next heartbeat rather than after the interval.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kbroker.config import ConfigEntry, ConfigSynonym
from kbroker.config_defs import ConfigSource, ConfigType
from wire.errors import ErrorCode, KafkaError

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    # The broker config giving the default; None for a config with a default of its own.
    broker_config: str | None
    default: str | None = None
    at_least: int | None = None
    # The broker configs bounding an override.
    minimum: str | None = None
    maximum: str | None = None
    choices: tuple[str, ...] | None = None


def _bounded(name: str, broker_config: str, at_least: int) -> GroupConfigDef:
    """A config whose default is ``group.<kind>.<setting>``, bounded by
    ``group.<kind>.min.<setting>`` and ``group.<kind>.max.<setting>``."""
    group, kind, setting = broker_config.split(".", 2)
    return GroupConfigDef(
        name,
        ConfigType.INT,
        broker_config,
        at_least=at_least,
        minimum=f"{group}.{kind}.min.{setting}",
        maximum=f"{group}.{kind}.max.{setting}",
    )


def _timeouts(kind: str) -> list[GroupConfigDef]:
    return [
        _bounded(f"{kind}.session.timeout.ms", f"group.{kind}.session.timeout.ms", 1),
        _bounded(f"{kind}.heartbeat.interval.ms", f"group.{kind}.heartbeat.interval.ms", 1),
        _bounded(f"{kind}.assignment.interval.ms", f"group.{kind}.assignment.interval.ms", 0),
    ]


DEFINITIONS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in [
        *_timeouts("consumer"),
        *_timeouts("share"),
        _bounded("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", 1000),
        _bounded("share.delivery.count.limit", "group.share.delivery.count.limit", 2),
        _bounded("share.partition.max.record.locks", "group.share.partition.max.record.locks", 100),
        GroupConfigDef("share.auto.offset.reset", ConfigType.STRING, None, "latest"),
        GroupConfigDef(
            "share.isolation.level",
            ConfigType.STRING,
            None,
            "read_uncommitted",
            choices=("read_committed", "read_uncommitted"),
        ),
        GroupConfigDef("share.renew.acknowledge.enable", ConfigType.BOOLEAN, None, "true"),
        *_timeouts("streams"),
        GroupConfigDef(
            "streams.initial.rebalance.delay.ms",
            ConfigType.INT,
            "group.streams.initial.rebalance.delay.ms",
            at_least=0,
        ),
        GroupConfigDef(
            "streams.num.standby.replicas",
            ConfigType.INT,
            "group.streams.num.standby.replicas",
            at_least=0,
            maximum="group.streams.max.standby.replicas",
        ),
    ]
}

# An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)
BY_DURATION = "by_duration:"


def duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration (``P1D``, ``PT1H30M``, ``PT0.5S``), None if it is
    not one."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        return None
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    total = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + int(seconds or 0) * 1000
    )
    if fraction:
        millis = int(fraction.ljust(9, "0")) // 1_000_000
        total += -millis if (seconds or "").startswith("-") else millis
    return -total if sign == "-" else total


def _invalid(name: str, value: str, reason: str) -> KafkaError:
    return KafkaError(
        ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {reason}"
    )


def parse(d: GroupConfigDef, raw: str) -> int | bool | str:
    """A value checked with Kafka's validators (the broker bounds are checked apart)."""
    value = raw.strip()
    if d.type is ConfigType.INT:
        try:
            number = int(value)
        except ValueError:
            raise _invalid(d.name, raw, "Not a number of type INT") from None
        if not -(2**31) <= number <= INT32_MAX:
            raise _invalid(d.name, raw, "Not a number of type INT")
        if d.at_least is not None and number < d.at_least:
            raise _invalid(d.name, raw, f"Value must be at least {d.at_least}")
        return number
    if d.type is ConfigType.BOOLEAN:
        if value.lower() not in ("true", "false"):
            raise _invalid(d.name, raw, "Expected value to be either true or false")
        return value.lower() == "true"
    if d.choices is not None and value not in d.choices:
        raise _invalid(d.name, raw, f"String must be one of: {', '.join(d.choices)}")
    if d.name == "share.auto.offset.reset" and not _valid_reset(value):
        raise _invalid(
            d.name,
            raw,
            f"Invalid value `{raw}` for configuration {d.name}. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        )
    return value


def _valid_reset(value: str) -> bool:
    if value in ("earliest", "latest"):
        return True
    if not value.startswith(BY_DURATION):
        return False
    ms = duration_ms(value[len(BY_DURATION) :])
    return ms is not None and ms >= 0


# A broker config's value in force, by name.
BrokerValue = Callable[[str], Any]


def validate(overrides: Mapping[str, str], broker_value: BrokerValue) -> None:
    """A group's whole set of overrides, against Kafka's validators and the broker's bounds."""
    for name, raw in overrides.items():
        d = DEFINITIONS.get(name)
        if d is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        value = parse(d, raw)
        if d.minimum is not None and value < broker_value(d.minimum):
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {d.minimum}"
            )
        if d.maximum is not None and value > broker_value(d.maximum):
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {d.maximum}"
            )


def check_name(group_id: str, *, altering: bool) -> None:
    if group_id:
        return
    message = (
        "Default group resources are not allowed." if altering else "Group name must not be empty"
    )
    raise KafkaError(ErrorCode.INVALID_REQUEST, message)


def effective(name: str, overrides: Mapping[str, str], broker_value: BrokerValue) -> object:
    """A config's value for a group: its override, else the broker's (or its own) default."""
    d = DEFINITIONS[name]
    if name in overrides:
        return parse(d, overrides[name])
    if d.broker_config is not None:
        return broker_value(d.broker_config)
    assert d.default is not None
    return parse(d, d.default)


def describe(
    overrides: Mapping[str, str],
    broker_value: BrokerValue,
    broker_synonyms: Callable[[str], list[ConfigSynonym]],
) -> list[ConfigEntry]:
    """Every group config with its value, source (GROUP_CONFIG when overridden) and synonyms:
    the override, then the broker config that gives the default, as Kafka describes them."""
    entries = []
    for name, d in DEFINITIONS.items():
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, overrides[name], ConfigSource.GROUP_CONFIG))
        if d.broker_config is not None:
            synonyms.extend(broker_synonyms(d.broker_config))
        else:
            synonyms.append(ConfigSynonym(name, d.default, ConfigSource.DEFAULT_CONFIG))
        if name in overrides:
            value: str | None = overrides[name]
            source = ConfigSource.GROUP_CONFIG
        elif d.broker_config is not None:
            value = _text(broker_value(d.broker_config))
            source = ConfigSource.DEFAULT_CONFIG
        else:
            value, source = d.default, ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, False, d.type, tuple(synonyms)))
    return entries


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
