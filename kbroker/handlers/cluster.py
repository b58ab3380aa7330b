"""DescribeCluster and DescribeLogDirs.

DescribeCluster lists the brokers from the metadata backend, with the addresses of the
listener the request came through. Only the BROKER endpoint type
(1) is served: a broker asked for controller endpoints (KIP-919, type 2) answers
UNSUPPORTED_ENDPOINT_TYPE as Kafka brokers do. A request for the authorized operations
(KIP-430) gets the cluster operations the principal may do (all of them without an
authorizer); otherwise the field keeps its "not requested" value.

DescribeLogDirs needs DESCRIBE on the cluster (kbroker/authorization.py); it reports every
log dir with the partitions it holds, their size on disk, offset lag 0 (there are no future
replicas) and, from v4, the file system's total and usable bytes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from kbroker.authorization import authorize, authorized_operations
from kbroker.handlers.common import client_brokers
from kbroker.security.acls import (
    CLUSTER_NAME,
    OPERATIONS_NOT_REQUESTED,
    AclOperation,
    ResourceType,
    all_operations,
)
from wire.errors import ErrorCode
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
from wire.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

ENDPOINT_TYPE_BROKER = 1

# What a request for the authorized operations gets without an authorizer.
ALL_CLUSTER_OPERATIONS = all_operations(ResourceType.CLUSTER)


async def handle_describe_cluster(
    broker: Broker, header: RequestHeader, request: DescribeClusterRequest, version: int
) -> DescribeClusterResponse:
    if version >= 1 and request.endpoint_type != ENDPOINT_TYPE_BROKER:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"This broker serves endpoint type {ENDPOINT_TYPE_BROKER} only, "
            f"not {request.endpoint_type}",
        )
    return DescribeClusterResponse(
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.metadata.controller_id(),
        brokers=[
            DescribeClusterBroker(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in client_brokers(broker)
        ],
        cluster_authorized_operations=(
            authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else OPERATIONS_NOT_REQUESTED
        ),
    )


def _disk_space(directory: Path) -> tuple[int, int] | None:
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle_describe_log_dirs(
    broker: Broker, header: RequestHeader, request: DescribeLogDirsRequest, version: int
) -> DescribeLogDirsResponse:
    if not authorize(broker, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # As Kafka: nothing listed, and the error where the version has the field.
        return DescribeLogDirsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0
        )
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[Path, dict[str, list[DescribeLogDirsPartition]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for (topic, index), plog in sorted(broker.logs.logs().items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        by_dir[plog.directory.parent][topic].append(
            DescribeLogDirsPartition(
                partition_index=index,
                partition_size=plog.size_bytes,
                offset_lag=0,
                is_future_key=False,
            )
        )
    results: list[DescribeLogDirsResult] = []
    for directory in broker.logs.dirs:
        space = _disk_space(directory)
        result = DescribeLogDirsResult(
            log_dir=os.path.abspath(directory),
            topics=[
                DescribeLogDirsTopic(name=name, partitions=partitions)
                for name, partitions in sorted(by_dir[directory].items())
            ],
        )
        if space is None:
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        elif version >= 4:
            result.total_bytes, result.usable_bytes = space
        result.is_cordoned = directory in broker.logs.cordoned
        results.append(result)
    # A directory whose writes failed (KIP-112) is listed as Kafka lists it: its error and
    # nothing else, until the broker restarts.
    results.extend(
        DescribeLogDirsResult(
            log_dir=os.path.abspath(directory), error_code=ErrorCode.KAFKA_STORAGE_ERROR
        )
        for directory in broker.logs.offline_dirs
    )
    return DescribeLogDirsResponse(results=results)
