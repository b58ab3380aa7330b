"""A kbroker process with every kind of secured listener, for tests with real clients.

Listeners (all on 127.0.0.1, each advertising itself):

- PLAINTEXT: readiness probe, inter-broker traffic and setting up SCRAM users;
- SASL_PLAINTEXT: PLAIN (users alice and bob from the listener's JAAS configuration),
  SCRAM-SHA-256 and OAUTHBEARER with unsecured JWTs;
- SASL_SSL: SCRAM-SHA-512 and SCRAM-SHA-256, its certificate from a PKCS12 key store;
- SSL: mutual TLS (client certificates required), principals mapped from the DN by
  ``ssl.principal.mapping.rules`` (``CN=alice,OU=Test`` becomes ``User:alice``).

``client_settings(mode)`` gives librdkafka-style client properties for each way in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compat_tests.broker_process import BrokerProcess, free_port
from tests.security.certs import P12_PASSWORD, Pki, write_pki

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
    + ";"
)
MODES = ("sasl_ssl_scram", "sasl_plaintext_plain", "mtls")


@dataclass
class SecureBroker:
    process: BrokerProcess
    pki: Pki
    ports: dict[str, int]

    def client_settings(self, mode: str, user: str = "alice") -> dict[str, str]:
        """librdkafka / Kafka client properties to reach the broker through ``mode``."""
        if mode == "sasl_ssl_scram":
            return {
                "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_SSL']}",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": PASSWORDS[user],
                "ssl.ca.location": str(self.pki.ca),
            }
        if mode == "sasl_plaintext_plain":
            return {
                "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user,
                "sasl.password": PASSWORDS[user],
            }
        if mode == "sasl_plaintext_oauthbearer":
            return {
                "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": f"principal={user}",
            }
        assert mode == "mtls"
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SSL']}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.pki.ca),
            "ssl.certificate.location": str(self.pki.client_cert),
            "ssl.key.location": str(self.pki.client_key),
        }

    def java_settings(self, mode: str, user: str = "alice") -> dict[str, str]:
        """The same as the Java client's properties."""
        rd = self.client_settings(mode, user)
        props = {"bootstrap.servers": rd["bootstrap.servers"]}
        props["security.protocol"] = rd["security.protocol"]
        if rd.get("sasl.mechanism") == "OAUTHBEARER":
            props["sasl.mechanism"] = "OAUTHBEARER"
            props["sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{user}";'
            )
        elif "sasl.mechanism" in rd:
            module = (
                "plain.PlainLoginModule"
                if rd["sasl.mechanism"] == "PLAIN"
                else "scram.ScramLoginModule"
            )
            props["sasl.mechanism"] = rd["sasl.mechanism"]
            props["sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.{module} required "
                f'username="{user}" password="{PASSWORDS[user]}";'
            )
        if rd["security.protocol"] in ("SSL", "SASL_SSL"):
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(self.pki.ca)
        if mode == "mtls":
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(self.pki.client_keystore)
        return props

    def log_text(self) -> str:
        return self.process.stderr_path.read_text(errors="replace")


def start_secure_broker(work: Path, **overrides: str) -> SecureBroker:
    pki = write_pki(work / "pki")
    process = BrokerProcess(work)
    ports = {
        "PLAINTEXT": process.port,
        "SASL_PLAINTEXT": free_port(),
        "SASL_SSL": free_port(),
        "SSL": free_port(),
    }
    process.overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.location": str(pki.broker_p12),
        "listener.name.sasl_ssl.ssl.keystore.password": P12_PASSWORD,
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        **overrides,
    }
    process.start()
    return SecureBroker(process, pki, ports)
