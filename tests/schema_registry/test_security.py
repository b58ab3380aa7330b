"""The registry over TLS with HTTP basic authentication against the broker's SASL users (PLAIN
users of its JAAS line, SCRAM users of its metadata) and Kafka ACLs on subjects."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_tests.broker_process import BrokerProcess, free_port
from tests.security.certs import Pki, write_pki

ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)


class SecureRegistry:
    def __init__(self, broker: BrokerProcess, url: str, pki: Pki) -> None:
        self.broker = broker
        self.url = url
        self.pki = pki
        self.context = ssl.create_default_context(cafile=str(pki.ca))

    def call(
        self, path: str, method: str = "GET", body: Any = None, user: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        if user is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def kbroker(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kbroker", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRegistry]:
    work = tmp_path_factory.mktemp("secure-registry")
    pki = write_pki(work / "pki")
    port, sasl_port, http_port = free_port(), free_port(), free_port()
    broker = BrokerProcess(
        work,
        port=port,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # The brokers' own principal on the plaintext inter-broker listener.
            "super.users": "User:ANONYMOUS;User:admin",
            "offsets.topic.replication.factor": "1",
            "schema.registry.listeners": f"https://127.0.0.1:{http_port}",
            "schema.registry.authentication.method": "BASIC",
            "schema.registry.ssl.keystore.location": str(pki.broker_keystore),
            "schema.registry.ssl.truststore.location": str(pki.ca),
        },
    )
    broker.start()
    bootstrap = ["--bootstrap-server", broker.bootstrap]
    kbroker(
        "users",
        "add",
        "carol",
        "--password",
        "carol-secret",
        "--mechanism",
        "SCRAM-SHA-256",
        *bootstrap,
    )
    for principal, operation in (
        ("User:alice", "Write"),
        ("User:alice", "Read"),
        ("User:carol", "Read"),
    ):
        kbroker(
            "acls",
            "add",
            "--topic",
            "orders",
            "--allow-principal",
            principal,
            "--operation",
            operation,
            *bootstrap,
        )
    running = SecureRegistry(broker, f"https://127.0.0.1:{http_port}", pki)
    try:
        yield running
    finally:
        broker.stop()


def test_basic_authentication(secure: SecureRegistry) -> None:
    status, body = secure.call("/subjects")
    assert (status, body["error_code"]) == (401, 401)
    assert secure.call("/subjects", user="alice:wrong")[0] == 401
    assert secure.call("/subjects", user="nobody:x")[0] == 401
    assert secure.call("/subjects", user="carol:wrong")[0] == 401
    assert secure.call("/subjects", user="alice:alice-secret")[0] == 200
    assert secure.call("/subjects", user="carol:carol-secret")[0] == 200  # a SCRAM user


def test_acls_decide_who_registers_and_reads(secure: SecureRegistry) -> None:
    schema = {"schema": ORDER}
    status, body = secure.call(
        "/subjects/orders-value/versions", "POST", schema, user="bob:bob-secret"
    )
    assert (status, body["error_code"]) == (403, 40301)
    assert (
        secure.call("/subjects/orders-value/versions", "POST", schema, user="carol:carol-secret")[0]
        == 403
    )
    status, answer = secure.call(
        "/subjects/orders-value/versions", "POST", schema, user="alice:alice-secret"
    )
    assert status == 200
    schema_id = answer["id"]
    assert secure.call("/subjects/orders-value/versions", user="carol:carol-secret") == (200, [1])
    assert secure.call(f"/schemas/ids/{schema_id}", user="carol:carol-secret")[0] == 200
    assert secure.call(f"/schemas/ids/{schema_id}", user="bob:bob-secret")[0] == 403
    assert secure.call("/subjects", user="bob:bob-secret") == (200, [])
    assert secure.call("/subjects", user="carol:carol-secret") == (200, ["orders-value"])
    assert secure.call("/subjects/orders-value", "DELETE", user="alice:alice-secret")[0] == 403
    assert (
        secure.call("/config", "PUT", {"compatibility": "NONE"}, user="alice:alice-secret")[0]
        == 403
    )
    assert (
        secure.call("/config", "PUT", {"compatibility": "BACKWARD"}, user="admin:admin-secret")[0]
        == 200
    )


def test_confluent_serializer_over_tls_with_basic_auth(secure: SecureRegistry) -> None:
    sr = SchemaRegistryClient(
        {
            "url": secure.url,
            "basic.auth.user.info": "alice:alice-secret",
            "ssl.ca.location": str(secure.pki.ca),
        }
    )
    serializer = AvroSerializer(sr, ORDER)
    data = serializer({"id": 7}, SerializationContext("orders", MessageField.VALUE))
    assert (
        data[0] == 0
        and int.from_bytes(data[1:5], "big") == sr.get_latest_version("orders-value").schema_id
    )
