"""listeners / advertised.listeners / listener.security.protocol.map."""

from __future__ import annotations

import pytest

from kbroker.config import BrokerConfig, ConfigError, Listener


def _config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def test_listener_hosts_and_advertised_default() -> None:
    config = _config(listeners="PLAINTEXT://0.0.0.0:9092")
    assert config.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9092)]
    assert config.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_ipv6_listener() -> None:
    config = _config(listeners="PLAINTEXT://[::1]:9093")
    assert config.listeners == [Listener("PLAINTEXT", "::1", 9093)]
    assert config.advertised_listeners == [Listener("PLAINTEXT", "::1", 9093)]


def test_explicit_advertised_listeners() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://:9092",
            "advertised.listeners": "PLAINTEXT://broker1.example:19092",
        }
    )
    assert config.advertised_listeners == [Listener("PLAINTEXT", "broker1.example", 19092)]


def test_advertising_the_wildcard_address_is_refused() -> None:
    with pytest.raises(ConfigError, match="advertised.listeners"):
        BrokerConfig.from_properties({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_custom_listener_names_through_the_protocol_map() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "internal",
        }
    )
    assert [lst.name for lst in config.listeners] == ["CLIENT", "INTERNAL"]
    assert config.inter_broker_listener_name == "INTERNAL"
    # Without inter.broker.listener.name and no PLAINTEXT listener: the first one.
    config = BrokerConfig.from_properties(
        {
            "listeners": "CLIENT://127.0.0.1:9092",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT",
        }
    )
    assert config.inter_broker_listener_name == "CLIENT"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"listeners": "X://:9093", "listener.security.protocol.map": "X:KERBEROS"},
            "unknown security protocol KERBEROS",
        ),
        ({"listener.name.plaintext.ssl.nonsense": "1"}, "Unknown configuration property"),
        ({"listeners": "localhost:9092"}, "NAME://host:port"),
        ({"listeners": "PLAINTEXT://host:99999"}, "bad port"),
        ({"listeners": "OTHER://:9092"}, "listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "repeated"),
        (
            {
                "listeners": "PLAINTEXT://a:9092,X://b:9092",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,X:PLAINTEXT",
            },
            "repeated",
        ),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "LISTENER_NAME:SECURITY_PROTOCOL"),
        ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ],
)
def test_bad_listener_settings(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_security_settings_per_listener() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "SASL_SSL://:9093,SSL://:9094",
            "ssl.keystore.location": "/default.pem",
            "listener.name.ssl.ssl.keystore.location": "/ssl.pem",
            "sasl.jaas.config": "default",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": "plain-on-sasl-ssl",
            "listener.name.sasl_ssl.connections.max.reauth.ms": "60000",
        }
    )
    assert config.security_protocol("SASL_SSL") == "SASL_SSL"
    assert config.listener_value("SSL", "ssl.keystore.location") == "/ssl.pem"
    assert config.listener_value("SASL_SSL", "ssl.keystore.location") == "/default.pem"
    assert config.jaas_config("SASL_SSL", "PLAIN") == "plain-on-sasl-ssl"
    assert config.jaas_config("SASL_SSL", "SCRAM-SHA-256") == "default"
    assert config.listener_value("SASL_SSL", "connections.max.reauth.ms") == 60000
    assert config.listener_value("SSL", "connections.max.reauth.ms") == 0
