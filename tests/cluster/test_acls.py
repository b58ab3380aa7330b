"""ACLs in a three-broker ZooKeeper cluster (issue 12, item 4): seeded with Kafka 3.9's
kafka-acls.sh, then created through one broker, they apply on the other two within a
second, read from Kafka's znodes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from local_cluster import LocalCluster

from compat_tests.kafka_tools import KafkaTools
from compat_tests.support import require
from compat_tests.zookeeper_process import java_available
from tests.server.conftest import RawClient
from wire.api_keys import ApiKey
from wire.messages.create_acls_request import AclCreation, CreateAclsRequest
from wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from wire.messages.metadata_request import MetadataRequest

# Before the brokers start, as an operator would: the brokers (User:ANONYMOUS over
# PLAINTEXT) may replicate, create topics and manage ACLs; nobody may describe topics yet.
SEED = ("--add", "--allow-principal", "User:ANONYMOUS", "--operation", "ClusterAction",
        "--operation", "Create", "--operation", "Alter", "--cluster")  # fmt: skip


async def _topics(port: int) -> set[str]:
    client = await RawClient.connect(port)
    try:
        response = await client.call(ApiKey.METADATA, 9, MetadataRequest(topics=None))
        return {t.name for t in response.topics}
    finally:
        await client.close()


async def _create_topic(port: int) -> None:
    client = await RawClient.connect(port)
    try:
        topics = CreateTopicsRequest(
            topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=3)],
            timeout_ms=10000,
        )
        created = await client.call(ApiKey.CREATE_TOPICS, 5, topics)
        assert created.topics[0].error_code == 0
    finally:
        await client.close()


async def _add_describe_everything(port: int) -> None:
    client = await RawClient.connect(port)
    try:
        request = CreateAclsRequest(
            creations=[
                AclCreation(
                    resource_type=2,
                    resource_name="*",
                    resource_pattern_type=3,
                    principal="User:ANONYMOUS",
                    host="*",
                    operation=8,
                    permission_type=3,
                )
            ]
        )
        response = await client.call(ApiKey.CREATE_ACLS, 3, request)
        assert [r.error_code for r in response.results] == [0]
    finally:
        await client.close()


def test_acls_created_on_one_broker_apply_on_the_others(
    tmp_path: Path, kafka_tools: KafkaTools
) -> None:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    cluster = LocalCluster(
        tmp_path, overrides={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    )
    try:
        cluster.zookeeper.start()
        kafka_tools.check(
            (
                "kafka-acls.sh",
                "--authorizer-properties",
                f"zookeeper.connect={cluster.zookeeper.connect}",
                *SEED,
            )
        )
        for broker in cluster.brokers.values():
            broker.start(timeout=60)
        cluster.wait_registered()
        one, two, three = (b.port for b in cluster.brokers.values())

        async def scenario() -> float:
            await _create_topic(one)
            await asyncio.sleep(1)  # every broker knows the topic, none may describe it
            assert await _topics(two) == await _topics(three) == set()
            started = time.monotonic()
            await _add_describe_everything(one)
            while not (await _topics(two) == {"t"} and await _topics(three) == {"t"}):
                assert time.monotonic() - started < 1.0, "not applied within a second"
                await asyncio.sleep(0.02)
            return time.monotonic() - started

        seconds = asyncio.run(scenario())
        print(f"ACL applied on the other brokers after {seconds * 1000:.0f} ms")
    finally:
        cluster.kill_all()
