"""DescribeCluster and DescribeLogDirs handlers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kbroker.handlers.cluster import (
    ALL_CLUSTER_OPERATIONS,
    handle_describe_cluster,
    handle_describe_log_dirs,
)
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode
from wire.messages.describe_cluster_request import DescribeClusterRequest
from wire.messages.describe_log_dirs_request import DescribableLogDirTopic, DescribeLogDirsRequest
from wire.messages.describe_log_dirs_response import DescribeLogDirsResponse

DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS = 60, 35


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_cluster(tmp_path: Path, version: int) -> None:
    broker = await make_broker(tmp_path, **{"broker.rack": "rack-a"})
    request = roundtrip(DescribeClusterRequest(), version)
    response = await handle_describe_cluster(
        broker, header(DESCRIBE_CLUSTER, version), request, version
    )
    response = roundtrip(response, version)
    assert response.error_code == ErrorCode.NONE
    assert response.cluster_id == broker.metadata.cluster_id
    assert response.controller_id == 1
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "127.0.0.1", 9092, "rack-a")
    ]
    # v2 (KIP-1073) may ask for fenced brokers too; a kbroker broker is never fenced.
    assert not any(b.is_fenced for b in response.brokers)
    assert response.cluster_authorized_operations == -2147483648


async def test_describe_cluster_authorized_operations(broker: Any) -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    response = await handle_describe_cluster(broker, header(DESCRIBE_CLUSTER, 1), request, 1)
    assert response.cluster_authorized_operations == ALL_CLUSTER_OPERATIONS
    # DESCRIBE (8) and ALTER_CONFIGS (11) among them.
    assert ALL_CLUSTER_OPERATIONS & (1 << 8) and ALL_CLUSTER_OPERATIONS & (1 << 11)


async def test_describe_cluster_controller_endpoint_refused(broker: Any) -> None:
    request = roundtrip(DescribeClusterRequest(endpoint_type=2), 1)
    response = roundtrip(
        await handle_describe_cluster(broker, header(DESCRIBE_CLUSTER, 1), request, 1), 1
    )
    assert response.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    assert response.error_message and response.brokers == []


async def describe_dirs(
    broker: Any, version: int, topics: list[DescribableLogDirTopic] | None
) -> DescribeLogDirsResponse:
    request = roundtrip(DescribeLogDirsRequest(topics=topics), version)
    response = await handle_describe_log_dirs(
        broker, header(DESCRIBE_LOG_DIRS, version), request, version
    )
    return roundtrip(response, version)


def _layout(response: DescribeLogDirsResponse) -> dict[str, dict[str, list[tuple[int, int]]]]:
    return {
        r.log_dir: {
            t.name: [(p.partition_index, p.partition_size) for p in t.partitions] for t in r.topics
        }
        for r in response.results
    }


@pytest.mark.parametrize("version", range(0, 6))
async def test_describe_log_dirs(broker: Any, version: int) -> None:
    d1, d2 = broker.config.log_dirs
    broker.logs.add("a", 0, d1, 100)
    broker.logs.add("a", 1, d2, 200)
    broker.logs.add("b", 0, d1, 300)
    response = await describe_dirs(broker, version, None)
    assert _layout(response) == {
        os.path.abspath(d1): {"a": [(0, 100)], "b": [(0, 300)]},
        os.path.abspath(d2): {"a": [(1, 200)]},
    }
    for result in response.results:
        assert result.error_code == ErrorCode.NONE
        for t in result.topics:
            assert all(p.offset_lag == 0 and not p.is_future_key for p in t.partitions)
        if version >= 4:
            assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
        else:
            assert result.total_bytes == -1
    assert response.error_code == ErrorCode.NONE


async def test_describe_log_dirs_reports_cordoned_dirs(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path, **{"cordoned.log.dirs": str(tmp_path / "d2")})
    response = await describe_dirs(broker, 5, None)
    assert [(r.log_dir, r.is_cordoned) for r in response.results] == [
        (os.path.abspath(tmp_path / "d1"), False),
        (os.path.abspath(tmp_path / "d2"), True),
    ]


async def test_describe_log_dirs_filtered(broker: Any) -> None:
    d1, d2 = broker.config.log_dirs
    broker.logs.add("a", 0, d1, 100)
    broker.logs.add("a", 1, d2, 200)
    broker.logs.add("b", 0, d1, 300)
    response = await describe_dirs(
        broker, 2, [DescribableLogDirTopic(topic="a", partitions=[1, 7])]
    )
    assert _layout(response) == {os.path.abspath(d1): {}, os.path.abspath(d2): {"a": [(1, 200)]}}


@pytest.mark.parametrize("version", [0, 4])
async def test_failed_log_dir_is_listed_with_a_storage_error(broker: Any, version: int) -> None:
    """As Kafka lists an offline directory (KIP-112): its path and KAFKA_STORAGE_ERROR, no
    topics, no sizes; the online one as usual."""
    d1, d2 = broker.config.log_dirs
    broker.logs.dirs = [d1]
    broker.logs.offline_dirs = [d2]
    broker.logs.add("a", 0, d1, 100)
    response = await describe_dirs(broker, version, None)
    assert [(r.log_dir, r.error_code) for r in response.results] == [
        (os.path.abspath(d1), ErrorCode.NONE),
        (os.path.abspath(d2), ErrorCode.KAFKA_STORAGE_ERROR),
    ]
    failed = response.results[1]
    assert failed.topics == [] and failed.total_bytes == -1 and failed.usable_bytes == -1


async def test_unavailable_log_dir(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path)
    gone = tmp_path / "gone"
    broker.logs.dirs = [*broker.logs.dirs, gone]
    response = await describe_dirs(broker, 4, None)
    assert [r.error_code for r in response.results] == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    ]
