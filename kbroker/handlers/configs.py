"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for TOPIC, BROKER, CLIENT_METRICS
and GROUP resources, and kbroker's mirror links (kbroker/mirror/link_configs.py).

Resource types (ConfigResource.Type): TOPIC = 2, BROKER = 4, CLIENT_METRICS = 16 (KIP-714
telemetry subscriptions, kbroker/telemetry/subscriptions.py), GROUP = 32 (a group's own
settings, kbroker/group/group_configs.py); others are refused with INVALID_REQUEST. A BROKER
resource is named by this broker's id (its own dynamic configs) or by the empty name (the
cluster-wide dynamic defaults, KIP-226); which configs may change and how a change is checked
and applied: kbroker/dynamic_config.py.

AlterConfigs replaces a resource's whole override set (KIP-133); IncrementalAlterConfigs
applies SET / DELETE / APPEND / SUBTRACT per config (KIP-339), APPEND and SUBTRACT only to
list-typed configs. Topic config errors are INVALID_CONFIG; broker config errors are
INVALID_REQUEST, as Kafka answers them. ``validate_only`` checks without changing anything.

Authorization (kbroker/authorization.py), as Kafka's: describing needs DESCRIBE_CONFIGS and
altering ALTER_CONFIGS, on the topic (else TOPIC_AUTHORIZATION_FAILED), on the group (else
GROUP_AUTHORIZATION_FAILED) or, for a broker, on the cluster (else
CLUSTER_AUTHORIZATION_FAILED), as for client metrics. A change of a topic's mirror configs
and of a mirror link also needs ALTER on the cluster (kbroker/mirror/access.py).

Client-metrics subscriptions answer as Kafka 4.3 does: any non-empty name describes (with
the defaults when it has no config), deleting all its configs (or an AlterConfigs with
none) removes the subscription, and IncrementalAlterConfigs refuses APPEND and SUBTRACT on
their configs ("its type is not LIST", INVALID_CONFIG), lists though two of them are. Group
configs answer the same way, and refuse a SET without a value (INVALID_REQUEST).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from controller.validation import validate_topic_name
from kbroker.authorization import authorize
from kbroker.config import (
    ConfigEntry,
    DynamicConfigs,
    broker_synonyms,
    describe_broker_configs,
    describe_default_broker_configs,
    describe_topic_configs,
    effective_topic_config,
    listener_base_config,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from kbroker.config_defs import BROKER_DEFS, TOPIC_DEFS, ConfigSource, ConfigType
from kbroker.dynamic_config import configuration_with, stored_dynamic_configs
from kbroker.group import group_configs
from kbroker.mirror import link_configs
from kbroker.mirror.access import changes_link, check_link_access
from kbroker.mirror.link_configs import MIRROR_LINK_RESOURCE
from kbroker.mirror.secrets import encode_secrets, encoder_from
from kbroker.mirror.topic_configs import check_mirror_change, is_mirror_config
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.telemetry import subscriptions
from wire.errors import ErrorCode, KafkaError
from wire.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from wire.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from wire.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    IncrementalAlterConfigsRequest,
)
from wire.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from wire.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from wire.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

TOPIC = 2
BROKER = 4
CLIENT_METRICS = 16
GROUP = 32

# The two alter APIs' resource and per-resource response types.
Resource = TypeVar("Resource", AlterConfigsResource, IncrementalResource)
ResourceResponse = TypeVar(
    "ResourceResponse", AlterConfigsResourceResponse, IncrementalResourceResponse
)

OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3


def _unsupported_type(resource_type: int) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _existing_topic(broker: Broker, name: str) -> dict[str, str]:
    """The topic's current overrides."""
    validate_topic_name(name)
    info = broker.metadata.topic(name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist")
    return dict(info.configs)


def _check_broker_name(broker: Broker, name: str) -> None:
    """Only this broker's own id (or the empty name) names a resource this broker can act
    on."""
    if name not in ("", str(broker.config.broker_id)):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.config.broker_id} or empty string, but "
            f"received {name!r}",
        )


# --- DescribeConfigs ------------------------------------------------------------------------


def _check_access(broker: Broker, operation: AclOperation, resource_type: int, name: str) -> None:
    if resource_type == TOPIC:
        if not authorize(broker, operation, ResourceType.TOPIC, name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    elif resource_type == GROUP:
        if not authorize(broker, operation, ResourceType.GROUP, name):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
    elif resource_type in (BROKER, CLIENT_METRICS):
        if not authorize(broker, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
    elif resource_type == MIRROR_LINK_RESOURCE:
        # Changing a link takes ALTER on the cluster (kbroker/mirror/access.py), describing
        # one DESCRIBE_CONFIGS there.
        if operation is AclOperation.ALTER_CONFIGS:
            check_link_access(broker, f"mirror link {name}")
        elif not authorize(broker, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")


def _describe_entries(broker: Broker, resource: DescribeConfigsResource) -> list[ConfigEntry]:
    _check_access(
        broker, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
    )
    if resource.resource_type == TOPIC:
        overrides = _existing_topic(broker, resource.resource_name)
        return describe_topic_configs(
            overrides, broker.config, stored_dynamic_configs(broker.metadata)
        )
    if resource.resource_type == BROKER:
        _check_broker_name(broker, resource.resource_name)
        if resource.resource_name == "":
            return describe_default_broker_configs(stored_dynamic_configs(broker.metadata))
        return describe_broker_configs(broker.config, stored_dynamic_configs(broker.metadata))
    if resource.resource_type == CLIENT_METRICS:
        if not resource.resource_name:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty"
            )
        stored = broker.metadata.client_metrics().get(resource.resource_name, {})
        return subscriptions.describe(stored)
    if resource.resource_type == GROUP:
        group_configs.check_name(resource.resource_name, altering=False)
        dynamic = stored_dynamic_configs(broker.metadata)
        return group_configs.describe(
            broker.metadata.group_configs().get(resource.resource_name, {}),
            broker.config.get,
            lambda name: broker_synonyms(name, broker.config, dynamic),
        )
    if resource.resource_type == MIRROR_LINK_RESOURCE:
        link_configs.check_link_name(resource.resource_name)
        return link_configs.describe(broker.metadata.mirror_links().get(resource.resource_name, {}))
    raise _unsupported_type(resource.resource_type)


def _config_result(
    entry: ConfigEntry, version: int, include_synonyms: bool
) -> DescribeConfigsResourceResult:
    result = DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_sensitive=entry.sensitive,
        config_type=entry.type,
        documentation=None,
    )
    if version == 0:
        result.is_default = entry.source == ConfigSource.DEFAULT_CONFIG
    else:
        result.config_source = entry.source
        if include_synonyms:
            result.synonyms = [
                DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
                for s in entry.synonyms
            ]
    return result


async def handle_describe_configs(
    broker: Broker, header: RequestHeader, request: DescribeConfigsRequest, version: int
) -> DescribeConfigsResponse:
    include_synonyms = version >= 1 and request.include_synonyms
    results: list[DescribeConfigsResult] = []
    for resource in request.resources:
        result = DescribeConfigsResult(
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            error_message=None,
        )
        try:
            entries = _describe_entries(broker, resource)
        except KafkaError as e:
            result.error_code = e.code
            result.error_message = e.message
            results.append(result)
            continue
        # A null or empty key list means every config (Kafka's reading); a list filters.
        keys = resource.configuration_keys
        wanted = set(keys) if keys else None
        result.configs = [
            _config_result(e, version, include_synonyms)
            for e in entries
            if wanted is None or e.name in wanted
        ]
        results.append(result)
    return DescribeConfigsResponse(results=results)


# --- AlterConfigs ---------------------------------------------------------------------------


async def _replace_configs(
    broker: Broker,
    resource_type: int,
    name: str,
    configs: Mapping[str, str | None],
    validate_only: bool,
) -> None:
    if resource_type == TOPIC:
        current = _existing_topic(broker, name)
        validate_topic_configs(configs)
        check_mirror_change(name, current, configs)
        if changes_link(current, configs):
            check_link_access(broker, f"topic {name}")
        stored = encode_secrets(_non_null(configs), current, encoder_from(broker.config.get))
        if not validate_only:
            await broker.metadata.set_topic_configs(name, stored)
        return
    if resource_type == BROKER:
        _check_broker_name(broker, name)
        await _set_broker_configs(broker, name == "", configs, validate_only)
        return
    if resource_type == CLIENT_METRICS:
        subscriptions.check_name(name)
        normalized = subscriptions.normalize(configs)
        if not validate_only:
            await broker.metadata.set_client_metrics(name, normalized)
        return
    if resource_type == GROUP:
        await _set_group_configs(broker, name, configs, validate_only)
        return
    if resource_type == MIRROR_LINK_RESOURCE:
        await _set_mirror_link(broker, name, configs, validate_only)
        return
    raise _unsupported_type(resource_type)


async def _set_mirror_link(
    broker: Broker, name: str, configs: Mapping[str, str | None], validate_only: bool
) -> None:
    link_configs.check_link_name(name)
    stored = encode_secrets(
        link_configs.validate_link_configs(configs),
        broker.metadata.mirror_links().get(name, {}),
        encoder_from(broker.config.get),
    )
    if not validate_only:
        await broker.metadata.set_mirror_link(name, stored)
        broker.mirrors.apply_link_records()


async def _set_group_configs(
    broker: Broker, group_id: str, configs: Mapping[str, str | None], validate_only: bool
) -> None:
    group_configs.check_name(group_id, altering=True)
    for name, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    stored = _non_null(configs)
    group_configs.validate(stored, broker.config.get)
    if not validate_only:
        await broker.metadata.set_group_configs(group_id, stored)


async def _set_broker_configs(
    broker: Broker, default: bool, configs: Mapping[str, str | None], validate_only: bool
) -> None:
    """Replace this broker's dynamic configs (or the cluster-wide defaults) once they are
    checked as Kafka checks them and this broker could run with them."""
    validate_dynamic_broker_configs(configs, per_broker=not default)
    stored = _non_null(configs)
    current = stored_dynamic_configs(broker.metadata)
    candidate = (
        DynamicConfigs(current.per_broker, stored)
        if default
        else DynamicConfigs(stored, current.cluster_default)
    )
    configuration_with(broker.static_config, candidate, broker.scram_credential)
    if validate_only:
        return
    if default:
        await broker.metadata.set_default_broker_configs(stored)
    else:
        await broker.metadata.set_broker_configs(stored)


def _non_null(configs: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in configs.items() if v is not None}


def _check_unique(
    resource: AlterConfigsResource | IncrementalResource, duplicates: set[tuple[int, str]]
) -> None:
    """Kafka refuses a resource named twice in a request, or a config twice in a resource."""
    if (resource.resource_type, resource.resource_name) in duplicates:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Resource is named more than once")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "A config is given more than once")


async def _alter_each(
    resources: Sequence[Resource],
    response_type: type[ResourceResponse],
    alter: Callable[[Resource], Awaitable[None]],
) -> list[ResourceResponse]:
    """AlterConfigs and IncrementalAlterConfigs: each resource succeeds or fails alone."""
    named = Counter((r.resource_type, r.resource_name) for r in resources)
    duplicates = {key for key, count in named.items() if count > 1}
    responses: list[ResourceResponse] = []
    for resource in resources:
        response = response_type(
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            error_message=None,
        )
        try:
            _check_unique(resource, duplicates)
            await alter(resource)
        except KafkaError as e:
            response.error_code = e.code
            response.error_message = e.message
        responses.append(response)
    return responses


async def handle_alter_configs(
    broker: Broker, header: RequestHeader, request: AlterConfigsRequest, version: int
) -> AlterConfigsResponse:
    async def replace(resource: AlterConfigsResource) -> None:
        _check_access(
            broker, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name
        )
        configs = {c.name: c.value for c in resource.configs}
        await _replace_configs(
            broker,
            resource.resource_type,
            resource.resource_name,
            configs,
            request.validate_only,
        )

    responses = await _alter_each(request.resources, AlterConfigsResourceResponse, replace)
    return AlterConfigsResponse(responses=responses)


# --- IncrementalAlterConfigs ----------------------------------------------------------------


def _apply_ops(
    current: dict[str, str],
    ops: list[AlterableConfig],
    type_of: Callable[[str], ConfigType | None],
    base_value: Callable[[str], str | None],
    unknown_code: ErrorCode,
) -> dict[str, str]:
    """Apply the operations to a copy of ``current`` (the resource's overrides).

    ``type_of`` gives a config's type, None for a name the resource does not take.
    APPEND and SUBTRACT start from the current value, the override or else the value
    in effect (``base_value``)."""
    result = dict(current)
    for op in ops:
        config_type = type_of(op.name)
        if config_type is None:
            raise KafkaError(unknown_code, f"Unknown config name: {op.name}")
        if op.config_operation == OP_SET:
            if op.value is None:
                raise KafkaError(unknown_code, f"Null value not supported for {op.name}")
            result[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (OP_APPEND, OP_SUBTRACT):
            if config_type is not ConfigType.LIST:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value append or subtract is not allowed for config {op.name}: "
                    "it is not a list",
                )
            base = result[op.name] if op.name in result else base_value(op.name)
            items = _split(base)
            change = _split(op.value)
            if op.config_operation == OP_APPEND:
                items += [item for item in change if item not in items]
            else:
                items = [item for item in items if item not in change]
            result[op.name] = ",".join(items)
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.config_operation}"
            )
    return result


def _split(value: str | None) -> list[str]:
    if value is None:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def _topic_config_type(config: str) -> ConfigType | None:
    if is_mirror_config(config):
        return ConfigType.STRING
    t = TOPIC_DEFS.get(config)
    return None if t is None else t.definition.type


async def _alter_incrementally(
    broker: Broker,
    resource_type: int,
    name: str,
    ops: list[AlterableConfig],
    validate_only: bool,
) -> None:
    if resource_type == TOPIC:
        current = _existing_topic(broker, name)
        dynamic = stored_dynamic_configs(broker.metadata)

        def topic_value(config: str) -> str | None:
            return effective_topic_config(current, broker.config, dynamic)[config]

        updated = _apply_ops(
            current,
            ops,
            _topic_config_type,
            topic_value,
            ErrorCode.INVALID_CONFIG,
        )
        validate_topic_configs(updated)
        check_mirror_change(name, current, updated)
        if changes_link(current, updated):
            check_link_access(broker, f"topic {name}")
        stored = encode_secrets(updated, current, encoder_from(broker.config.get))
        if not validate_only:
            await broker.metadata.set_topic_configs(name, stored)
        return
    if resource_type == BROKER:
        _check_broker_name(broker, name)
        default = name == ""
        dynamic = stored_dynamic_configs(broker.metadata)
        current = dynamic.cluster_default if default else dynamic.per_broker

        def broker_value(config: str) -> str | None:
            d = BROKER_DEFS.get(config)
            return broker.config.props.get(config, None if d is None else d.default)

        updated = _apply_ops(
            dict(current), ops, _broker_config_type, broker_value, ErrorCode.INVALID_REQUEST
        )
        await _set_broker_configs(broker, default, updated, validate_only)
        return
    if resource_type == CLIENT_METRICS:
        subscriptions.check_name(name)
        current = broker.metadata.client_metrics().get(name, {})
        normalized = subscriptions.normalize(_set_or_delete(current, ops))
        if not validate_only:
            await broker.metadata.set_client_metrics(name, normalized)
        return
    if resource_type == GROUP:
        current = broker.metadata.group_configs().get(name, {})
        await _set_group_configs(broker, name, _set_or_delete(current, ops), validate_only)
        return
    if resource_type == MIRROR_LINK_RESOURCE:
        current = broker.metadata.mirror_links().get(name, {})
        await _set_mirror_link(broker, name, _set_or_delete(current, ops), validate_only)
        return
    raise _unsupported_type(resource_type)


def _set_or_delete(current: Mapping[str, str], ops: list[AlterableConfig]) -> dict[str, str | None]:
    """SET and DELETE on a subscription's or a group's configs, none of which is a list;
    validation is the caller's."""
    result: dict[str, str | None] = dict(current)
    for op in ops:
        if op.config_operation in (OP_APPEND, OP_SUBTRACT):
            verb = "APPEND" if op.config_operation == OP_APPEND else "SUBTRACT"
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Can't {verb} to key {op.name} because its type is not LIST.",
            )
        if op.config_operation == OP_SET:
            result[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            result.pop(op.name, None)
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.config_operation}"
            )
    return result


def _broker_config_type(name: str) -> ConfigType:
    """Names kbroker does not know are kept as Kafka keeps them, as strings."""
    d = BROKER_DEFS.get(listener_base_config(name) or name)
    return ConfigType.STRING if d is None else d.type


async def handle_incremental_alter_configs(
    broker: Broker, header: RequestHeader, request: IncrementalAlterConfigsRequest, version: int
) -> IncrementalAlterConfigsResponse:
    async def alter(resource: IncrementalResource) -> None:
        _check_access(
            broker, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name
        )
        await _alter_incrementally(
            broker,
            resource.resource_type,
            resource.resource_name,
            list(resource.configs),
            request.validate_only,
        )

    responses = await _alter_each(request.resources, IncrementalResourceResponse, alter)
    return IncrementalAlterConfigsResponse(responses=responses)
