"""Both client shells over TLS and SASL, configured with Kafka's client property names,
against a stand-in broker (tests/client_shells/secure_server.py)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbroker.cli import main
from kbroker.client import BrokerConnection, KafkaClient
from kbroker.client_core.security import SecurityConfigError, security_config
from kbroker.data_client import DataClient
from tests.client_shells.secure_server import (
    Certificates,
    SecureServer,
    in_thread,
    make_certificates,
    server_context,
)
from wire.api_keys import ApiKey
from wire.errors import ErrorCode, KafkaError
from wire.messages.metadata_request import MetadataRequest

USERS = {"alice": "alice-secret", "bob": "bob=secret"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certificates]:
    yield make_certificates(tmp_path_factory.mktemp("certs"))


def jaas(mechanism: str, user: str, password: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return (
        f"org.apache.kafka.common.security.{module} required "
        f'username="{user}" password="{password}";'
    )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_asyncio_client_over_sasl_ssl(certs: Certificates, mechanism: str) -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas(mechanism, "bob", "bob=secret"),
        "ssl.truststore.location": str(certs.ca),
        "ssl.truststore.type": "PEM",
    }
    async with SecureServer(server_context(certs), USERS) as server:
        address = ("localhost", server.port)
        async with KafkaClient([address], security=security_config(props)) as client:
            assert await client.partitions(["t"]) == {"t": [0]}
            assert client.brokers == {0: address}
        assert server.authentications == [(mechanism, "bob")]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_blocking_client_over_sasl_ssl(certs: Certificates, mechanism: str) -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mechanism,
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(certs.ca),
    }
    with in_thread(SecureServer(server_context(certs), USERS)) as server:
        with DataClient(f"localhost:{server.port}", security=security_config(props)) as client:
            assert client.metadata(["t"]) == {"t": [0]}
    assert server.authentications == [(mechanism, "alice")]


def test_blocking_client_refused_password() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": jaas("SCRAM-SHA-512", "alice", "wrong"),
    }
    with in_thread(SecureServer(None, USERS)) as server:
        with DataClient(f"127.0.0.1:{server.port}", security=security_config(props)) as client:
            with pytest.raises(ConnectionError, match="SASL_AUTHENTICATION_FAILED"):
                client.metadata(["t"])
    assert server.authentications == []


async def test_host_name_is_checked_unless_disabled(certs: Certificates) -> None:
    """The certificate names localhost, not 127.0.0.1."""
    props = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    async with SecureServer(server_context(certs), USERS) as server:
        address = ("127.0.0.1", server.port)
        with pytest.raises(ssl.SSLCertVerificationError):
            await BrokerConnection.open(address, "test", 5, security=security_config(props))
        props["ssl.endpoint.identification.algorithm"] = ""
        connection = await BrokerConnection.open(
            address, "test", 5, security=security_config(props)
        )
        assert ApiKey.SASL_HANDSHAKE in connection.versions
        await connection.close()


async def test_untrusted_certificate_is_refused(certs: Certificates, tmp_path: Path) -> None:
    other = make_certificates(tmp_path)
    props = {"security.protocol": "SSL", "ssl.ca.location": str(other.ca)}
    async with SecureServer(server_context(certs), USERS) as server:
        with pytest.raises(ssl.SSLCertVerificationError):
            await BrokerConnection.open(
                ("localhost", server.port), "test", 5, security=security_config(props)
            )


async def test_wrong_password_fails_the_asyncio_open() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "wrong",
    }
    async with SecureServer(None, USERS) as server:
        with pytest.raises(KafkaError) as exc:
            await BrokerConnection.open(
                ("127.0.0.1", server.port), "test", 5, security=security_config(props)
            )
    assert exc.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in str(exc.value)


async def test_asyncio_connection_reauthenticates_before_the_session_ends() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    async with SecureServer(None, USERS, session_lifetime_ms=200) as server:
        connection = await BrokerConnection.open(
            ("127.0.0.1", server.port), "test", 5, security=security_config(props)
        )
        await asyncio.sleep(0.5)
        assert len(server.authentications) >= 2
        response, _ = await connection.request(ApiKey.METADATA, MetadataRequest(topics=[]))
        assert response.brokers[0].node_id == 0
        await connection.close()


def test_blocking_connection_reauthenticates_when_the_session_ran_out() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    with in_thread(SecureServer(None, USERS, session_lifetime_ms=100)) as server:
        with DataClient(f"127.0.0.1:{server.port}", security=security_config(props)) as client:
            client.metadata(["t"])
            time.sleep(0.2)
            client.metadata(["t"])
    assert server.authentications == [("PLAIN", "alice"), ("PLAIN", "alice")]


def test_security_properties() -> None:
    config = security_config(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="a\\"b" password=p1;'
            ),
            "ssl.keystore.location": "/k.pem",
            "ssl.keystore.type": "PEM",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert (config.tls, config.sasl) == (True, True)
    assert (config.sasl_username, config.sasl_password) == ('a"b', "p1")
    assert (config.ssl_certfile, config.ssl_key_password) == ("/k.pem", "kp")
    assert not config.ssl_check_hostname
    plaintext = security_config({})
    assert (plaintext.tls, plaintext.sasl, plaintext.mechanism()) == (False, False, None)


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks"}, None),
        (
            {"ssl.truststore.location": "/t.jks", "ssl.truststore.type": "JKS"},
            "convert the store to PEM",
        ),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "identification"),
    ],
)
def test_bad_security_properties(props: dict[str, str], match: str | None) -> None:
    if match is None:
        security_config(props)
        return
    with pytest.raises(SecurityConfigError, match=match):
        security_config(props)


def test_sasl_needs_credentials_and_a_known_mechanism() -> None:
    with pytest.raises(SecurityConfigError, match="sasl.jaas.config"):
        security_config({"security.protocol": "SASL_PLAINTEXT"}).mechanism()
    gssapi = {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"}
    with pytest.raises(SecurityConfigError, match="GSSAPI"):
        security_config(gssapi).mechanism()


def test_missing_trust_store_is_reported() -> None:
    props = {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}
    with pytest.raises(SecurityConfigError, match="TLS settings"):
        DataClient("localhost:1", security=security_config(props))
    with pytest.raises(SecurityConfigError, match="TLS settings"):
        KafkaClient([("localhost", 1)], security=security_config(props))


def test_cli_takes_kafka_client_properties(
    certs: Certificates, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--command-config``, as kafka-topics.sh takes it."""
    config = tmp_path / "client.properties"
    config.write_text(
        "# as for kafka-topics.sh\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" password="alice-secret";\n'
        f"ssl.truststore.location={certs.ca}\n"
        "ssl.truststore.type=PEM\n"
        "client.id=ops-tool\n"
    )
    with in_thread(SecureServer(server_context(certs), USERS)) as server:
        bootstrap = f"localhost:{server.port}"
        args = ["topics", "list", "--bootstrap-server", bootstrap, "--command-config", str(config)]
        with pytest.raises(SystemExit) as exit_status:
            main(args)
    assert exit_status.value.code == 0
    assert server.authentications == [("SCRAM-SHA-256", "alice")]
    with pytest.raises(SystemExit) as exit_status:
        main(["topics", "list", "--command-config", str(tmp_path / "missing.properties")])
    assert exit_status.value.code == 1
    assert "missing.properties" in capsys.readouterr().err
