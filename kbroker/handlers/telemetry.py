"""Client telemetry (KIP-714): GetTelemetrySubscriptions, PushTelemetry, and
ListConfigResources (KIP-714's ListClientMetricsResources as v0, KIP-1142's v1).

kbroker serves the telemetry APIs out of the box; Kafka advertises them only with a
receiver plugin configured. The decisions are the core's (kbroker/telemetry/manager.py);
the client's attributes come from its connection: client id, the software name and version
of its ApiVersions request, its address and port. As in Kafka, neither API is authorized
(any client may fetch its subscription and push), while ListConfigResources needs
DESCRIBE_CONFIGS on the cluster.

Subscriptions ask clients for cumulative values (``delta_temporality`` false): a Prometheus
endpoint shows the latest value of a counter as it is, where deltas would need adding up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.mirror.link_configs import MIRROR_LINK_RESOURCE
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.server.connection import CLIENT_HOST, CLIENT_PORT, CLIENT_SOFTWARE
from kbroker.telemetry.manager import ACCEPTED_COMPRESSION_TYPES, ClientInfo
from wire.errors import ErrorCode, KafkaError
from wire.messages.get_telemetry_subscriptions_request import GetTelemetrySubscriptionsRequest
from wire.messages.get_telemetry_subscriptions_response import GetTelemetrySubscriptionsResponse
from wire.messages.list_config_resources_request import ListConfigResourcesRequest
from wire.messages.list_config_resources_response import (
    ConfigResource,
    ListConfigResourcesResponse,
)
from wire.messages.push_telemetry_request import PushTelemetryRequest
from wire.messages.push_telemetry_response import PushTelemetryResponse
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

# ConfigResource types (Kafka's ConfigResource.Type ids).
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32
# What each ListConfigResources version may ask for (v0 knows client metrics only).
LISTABLE = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


def _client(header: RequestHeader) -> ClientInfo:
    software = CLIENT_SOFTWARE.get()
    return ClientInfo(
        client_id=header.client_id or "",
        software_name=None if software is None else software.name,
        software_version=None if software is None else software.version,
        source_address=CLIENT_HOST.get().lstrip("/"),
        source_port=CLIENT_PORT.get(),
    )


async def handle_get_telemetry_subscriptions(
    broker: Broker, header: RequestHeader, request: GetTelemetrySubscriptionsRequest, version: int
) -> GetTelemetrySubscriptionsResponse:
    telemetry = broker.telemetry
    try:
        answer = telemetry.get_subscriptions(request.client_instance_id, _client(header))
    except KafkaError as exc:
        return GetTelemetrySubscriptionsResponse(error_code=exc.code)
    return GetTelemetrySubscriptionsResponse(
        client_instance_id=answer.instance_id,
        subscription_id=answer.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
        push_interval_ms=answer.push_interval_ms,
        telemetry_max_bytes=telemetry.telemetry_max_bytes,
        delta_temporality=False,
        requested_metrics=list(answer.metrics),
    )


async def handle_push_telemetry(
    broker: Broker, header: RequestHeader, request: PushTelemetryRequest, version: int
) -> PushTelemetryResponse:
    try:
        broker.telemetry.push(
            request.client_instance_id,
            request.subscription_id,
            request.terminating,
            request.compression_type,
            bytes(request.metrics),
            _client(header),
        )
    except KafkaError as exc:
        return PushTelemetryResponse(error_code=exc.code)
    return PushTelemetryResponse()


async def handle_list_config_resources(
    broker: Broker, header: RequestHeader, request: ListConfigResourcesRequest, version: int
) -> ListConfigResourcesResponse:
    if not authorize(broker, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    listable = LISTABLE[min(version, 1)]
    wanted = set(request.resource_types if version >= 1 else ()) or set(listable)
    # kbroker's mirror links are listed when asked for by their type only, so that an
    # answer for "every type" stays Kafka's.
    if not wanted <= {*listable, MIRROR_LINK_RESOURCE}:
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    # In Kafka's order. GROUP lists the groups that have configs.
    found: list[ConfigResource] = []
    if GROUP in wanted:
        found += [
            ConfigResource(resource_name=name, resource_type=GROUP)
            for name in sorted(broker.metadata.group_configs())
        ]
    if CLIENT_METRICS in wanted:
        found += [
            ConfigResource(resource_name=name, resource_type=CLIENT_METRICS)
            for name in sorted(broker.metadata.client_metrics())
        ]
    brokers = [str(b) for b in sorted(b.broker_id for b in broker.metadata.brokers())]
    for kind in (BROKER_LOGGER, BROKER):
        if kind in wanted:
            found += [ConfigResource(resource_name=b, resource_type=kind) for b in brokers]
    if TOPIC in wanted:
        found += [
            ConfigResource(resource_name=name, resource_type=TOPIC)
            for name in sorted(broker.metadata.topics())
        ]
    if MIRROR_LINK_RESOURCE in wanted:
        found += [
            ConfigResource(resource_name=name, resource_type=MIRROR_LINK_RESOURCE)
            for name in sorted(broker.metadata.mirror_links())
        ]
    return ListConfigResourcesResponse(config_resources=found)
