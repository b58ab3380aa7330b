"""Routes each decoded request to its handler; decides what ApiVersions advertises.

Clients use the highest version both sides support, so the advertised ranges
are exactly the handlers present here, each over every version in the specs
(COMPAT-NOTES: "Advertise only what is implemented"). An API without a handler
closes the connection, as Kafka does for a request it does not know.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kbroker.busy_time import BusyTimer
from kbroker.handlers import (
    acls,
    admin_topics,
    api_versions,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    delete_records,
    describe_producers,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    groups,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    offsets,
    produce,
    reassignments,
    scram_users,
    share_fetch,
    share_groups,
    share_offsets,
    share_state,
    telemetry,
    transactions,
    write_txn_markers,
)
from kbroker.handlers.throttling import charge_request_time, exempt_from_request_quota
from kbroker.logfmt import fields
from kbroker.metrics import RequestMetrics
from kbroker.quotas import REQUEST_PERCENTAGE
from kbroker.server.connection import CloseConnection
from wire.api_keys import REQUEST_CLASSES, ApiKey
from wire.errors import ErrorCode
from wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

# The request log (debug level): one line per request handled.
request_log = logging.getLogger("kbroker.request")

Handler = Callable[[Any, RequestHeader, Any, int], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: produce.handle_produce,
    ApiKey.FETCH: fetch.handle_fetch,
    ApiKey.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKey.METADATA: metadata.handle_metadata,
    ApiKey.API_VERSIONS: api_versions.handle_api_versions,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle_offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: delete_records.handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle_init_producer_id,
    ApiKey.CREATE_TOPICS: admin_topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: admin_topics.handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: admin_topics.handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKey.DESCRIBE_LOG_DIRS: cluster.handle_describe_log_dirs,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions.handle_describe_topic_partitions,
}

# Consumer groups and committed offsets (kbroker/group).
HANDLERS.update(
    {
        ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator,
        ApiKey.JOIN_GROUP: groups.handle_join_group,
        ApiKey.SYNC_GROUP: groups.handle_sync_group,
        ApiKey.HEARTBEAT: groups.handle_heartbeat,
        ApiKey.LEAVE_GROUP: groups.handle_leave_group,
        ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
        ApiKey.LIST_GROUPS: groups.handle_list_groups,
        ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
        ApiKey.OFFSET_COMMIT: offsets.handle_offset_commit,
        ApiKey.OFFSET_FETCH: offsets.handle_offset_fetch,
        ApiKey.OFFSET_DELETE: offsets.handle_offset_delete,
        ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.handle_consumer_group_heartbeat,
        ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.handle_consumer_group_describe,
        # Share groups (KIP-932).
        ApiKey.SHARE_GROUP_HEARTBEAT: share_groups.handle_share_group_heartbeat,
        ApiKey.SHARE_GROUP_DESCRIBE: share_groups.handle_share_group_describe,
        ApiKey.SHARE_FETCH: share_fetch.handle_share_fetch,
        ApiKey.SHARE_ACKNOWLEDGE: share_fetch.handle_share_acknowledge,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_offsets.handle_describe_share_group_offsets,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_offsets.handle_alter_share_group_offsets,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_offsets.handle_delete_share_group_offsets,
    }
)
# Served only when group.coordinator.rebalance.protocols lists their protocol (KIP-848): a
# client offered the API expects the protocol to work.
PROTOCOL_APIS = {
    "consumer": (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE),
}


# Transactions: the partition side (markers written by the transaction coordinator, the
# producers and open transactions of each partition).
HANDLERS[ApiKey.WRITE_TXN_MARKERS] = write_txn_markers.handle_write_txn_markers
HANDLERS[ApiKey.DESCRIBE_PRODUCERS] = describe_producers.handle_describe_producers
# Transactions: the coordinator (kbroker/txn/).
HANDLERS.update(
    {
        ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
        ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
        ApiKey.END_TXN: transactions.handle_end_txn,
        ApiKey.TXN_OFFSET_COMMIT: offsets.handle_txn_offset_commit,
        ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
        ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
    }
)

# Share coordinators (KIP-932): share-partition state, asked by the partition leaders and
# group coordinators of other brokers (kbroker/share/).
HANDLERS.update(
    {
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: share_state.handle_initialize_share_group_state,
        ApiKey.READ_SHARE_GROUP_STATE: share_state.handle_read_share_group_state,
        ApiKey.WRITE_SHARE_GROUP_STATE: share_state.handle_write_share_group_state,
        ApiKey.DELETE_SHARE_GROUP_STATE: share_state.handle_delete_share_group_state,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: share_state.handle_read_share_group_state_summary,
    }
)

# Cluster operations (replication, controller/).
HANDLERS.update(
    {
        ApiKey.ELECT_LEADERS: elect_leaders.handle_elect_leaders,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments.handle_alter_partition_reassignments,
        ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments.handle_list_partition_reassignments,
        ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle_describe_client_quotas,
        ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.handle_alter_client_quotas,
    }
)

# Security: SASL requests on listeners without SASL, SCRAM credentials (KIP-554).
HANDLERS.update(
    {
        ApiKey.SASL_HANDSHAKE: scram_users.handle_sasl_handshake,
        ApiKey.SASL_AUTHENTICATE: scram_users.handle_sasl_authenticate,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
            scram_users.handle_describe_user_scram_credentials
        ),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_users.handle_alter_user_scram_credentials,
    }
)

# ACLs (kbroker/security/acls.py, kbroker/authorization.py).
HANDLERS.update(
    {
        ApiKey.CREATE_ACLS: acls.handle_create_acls,
        ApiKey.DESCRIBE_ACLS: acls.handle_describe_acls,
        ApiKey.DELETE_ACLS: acls.handle_delete_acls,
    }
)


# Client telemetry (KIP-714, kbroker/telemetry/) and the config resources it lists.
HANDLERS.update(
    {
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: telemetry.handle_get_telemetry_subscriptions,
        ApiKey.PUSH_TELEMETRY: telemetry.handle_push_telemetry,
        ApiKey.LIST_CONFIG_RESOURCES: telemetry.handle_list_config_resources,
    }
)


# The newest version served where it is older than the specs' newest: versions whose
# meaning is not implemented yet are not advertised ("Advertise only what is implemented").
SERVED_MAX: dict[int, int] = {
    # v6 is KIP-939's two-phase commit, which Kafka 4.3 does not advertise by default either.
    ApiKey.INIT_PRODUCER_ID: 5,
}


def served_versions(api_key: int) -> range:
    """The versions of an API this broker serves (and advertises)."""
    cls = REQUEST_CLASSES[api_key]
    return range(cls.MIN_VERSION, SERVED_MAX.get(api_key, cls.MAX_VERSION) + 1)


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        enabled = set(broker.config.get("group.coordinator.rebalance.protocols"))
        self._handlers = {
            key: handler
            for key, handler in HANDLERS.items()
            if not any(
                key in apis for protocol, apis in PROTOCOL_APIS.items() if protocol not in enabled
            )
        }
        self._versions = [
            ApiVersion(
                api_key=key,
                min_version=served_versions(key).start,
                max_version=served_versions(key).stop - 1,
            )
            for key in sorted(self._handlers)
        ]
        self.metrics = RequestMetrics(self._topic_name)

    def supported_versions(self) -> list[ApiVersion]:
        return self._versions

    async def handle(self, header: RequestHeader, request: object) -> object | None:
        handler = self._handlers.get(header.request_api_key)
        if handler is None:
            raise CloseConnection(f"{ApiKey(header.request_api_key).name} is not supported")
        if header.request_api_version > SERVED_MAX.get(header.request_api_key, 32767):
            raise CloseConnection(
                f"{ApiKey(header.request_api_key).name} v{header.request_api_version}"
                " is not supported"
            )
        started = time.perf_counter()
        response = None
        failed = True
        try:
            work = handler(self._broker, header, request, header.request_api_version)
            if not self._broker.quotas.defines(REQUEST_PERCENTAGE) or exempt_from_request_quota(
                header, request
            ):
                response = await work
            else:
                timer = BusyTimer(work)
                response = await timer
                charge_request_time(self._broker, header, timer.seconds, response)
            failed = False
            return response
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.observe(header.request_api_key, request, response, elapsed, failed=failed)
            if request_log.isEnabledFor(logging.DEBUG):
                request_log.debug(
                    "request",
                    extra=fields(
                        api=ApiKey(header.request_api_key).name,
                        version=header.request_api_version,
                        correlation_id=header.correlation_id,
                        client_id=header.client_id or "",
                        ms=round(elapsed * 1000, 3),
                        failed=failed,
                    ),
                )

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._broker.metadata.topic_by_id(topic_id)
        return None if topic is None else topic.name

    def reject_version(self, header: RequestHeader) -> object | None:
        """KIP-511: an ApiVersions request of an unknown version is answered in
        version 0 with UNSUPPORTED_VERSION and our ranges; anything else closes."""
        if header.request_api_key != ApiKey.API_VERSIONS:
            return None
        return ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self._versions
        )
