"""Dynamic broker configs (KIP-226) on a broker process with embedded metadata: a listener's
key store swapped without a restart (through confluent-kafka's admin client), the log cleaner
given more threads by the cluster-wide default (the empty resource name, which
confluent-kafka cannot name: sent as kafka-configs.sh sends it), and both still there after
a restart."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from compat_tests.broker_process import BrokerProcess, free_port
from kbroker.client import BrokerConnection
from tests.security.certs import Pki, write_pki
from wire.api_keys import ApiKey
from wire.messages import incremental_alter_configs_request as iac
from wire.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pkis(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pki, Pki]:
    work = tmp_path_factory.mktemp("pki")
    return write_pki(work / "first"), write_pki(work / "second")


@pytest.fixture
def broker(tmp_path: Path, pkis: tuple[Pki, Pki]) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "broker")
    ssl_port = free_port()
    process.overrides = {
        "broker.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SSL://127.0.0.1:{ssl_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(pkis[0].broker_keystore),
    }
    process.start()
    try:
        yield process
    finally:
        process.stop()


def ssl_port(process: BrokerProcess) -> int:
    return int(process.overrides["listeners"].rsplit(":", 1)[1])


def served_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def der(pem_file: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_file.read_text())


def alter(admin: AdminClient, name: str, **configs: str) -> None:
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


async def _call(process: BrokerProcess, api_key: int, version: int, body: object) -> object:
    connection = await BrokerConnection.open((process.host, process.port), "test")
    try:
        return await connection.call(api_key, version, body)
    finally:
        await connection.close()


def alter_default(process: BrokerProcess, **configs: str) -> None:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=ConfigResource.Type.BROKER.value,
                resource_name="",
                configs=[
                    iac.AlterableConfig(name=k, config_operation=0, value=v)
                    for k, v in configs.items()
                ],
            )
        ]
    )
    response = asyncio.run(_call(process, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request))
    assert response.responses[0].error_code == 0  # type: ignore[attr-defined]


def describe_default(process: BrokerProcess) -> dict[str, tuple[str, int]]:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=ConfigResource.Type.BROKER.value,
                resource_name="",
                configuration_keys=None,
            )
        ]
    )
    response = asyncio.run(_call(process, ApiKey.DESCRIBE_CONFIGS, 4, request))
    return {
        c.name: (c.value, c.config_source)
        for c in response.results[0].configs  # type: ignore[attr-defined]
    }


def describe(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.BROKER, name)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def wait_for_log(process: BrokerProcess, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in process.stderr_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{text!r} not logged"
        time.sleep(0.2)


def test_dynamic_configs_apply_at_once_and_survive_a_restart(
    broker: BrokerProcess, pkis: tuple[Pki, Pki]
) -> None:
    port = ssl_port(broker)
    assert served_certificate(port) == der(pkis[0].broker_cert)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    alter(admin, "1", **{"listener.name.ssl.ssl.keystore.location": str(pkis[1].broker_keystore)})
    assert served_certificate(port) == der(pkis[1].broker_cert)
    alter_default(broker, **{"log.cleaner.threads": "2", "message.max.bytes": "2000000"})
    wait_for_log(broker, "log cleaner reconfigured: 2 threads")
    configs = describe(admin, "1")
    assert configs["log.cleaner.threads"].value == "2"
    assert configs["log.cleaner.threads"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    keystore = configs["listener.name.ssl.ssl.keystore.location"]
    assert (keystore.value, keystore.source) == (
        str(pkis[1].broker_keystore),
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )

    broker.restart()
    assert served_certificate(port) == der(pkis[1].broker_cert)
    default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert describe_default(broker) == {
        "log.cleaner.threads": ("2", default),
        "message.max.bytes": ("2000000", default),
    }
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert describe(admin, "1")["message.max.bytes"].value == "2000000"
