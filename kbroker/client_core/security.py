"""Kafka's client security properties, read into one value both shells understand.

The names are those of Kafka's clients, so a ``--command-config`` file written for
kafka-topics.sh, or librdkafka's settings, work unchanged:

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
- ``sasl.mechanism`` (librdkafka: ``sasl.mechanisms``): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
- ``sasl.jaas.config`` (the ``username="..." password="..."`` options of a PlainLoginModule
  or ScramLoginModule line), or ``sasl.username`` and ``sasl.password`` (librdkafka).
- ``ssl.ca.location`` (librdkafka) or ``ssl.truststore.location`` with
  ``ssl.truststore.type=PEM``, or ``ssl.truststore.certificates`` (PEM text): whom to trust.
- ``ssl.certificate.location`` and ``ssl.key.location`` (librdkafka), or
  ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (certificate and key in one file),
  with ``ssl.key.password``: the client's own certificate, for brokers that ask for one.
- ``ssl.endpoint.identification.algorithm``: ``https`` (the default) checks the broker's
  host name against its certificate; empty or ``none`` does not.

Java key stores (JKS, PKCS12) are refused with a message: Python's ssl module reads PEM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kbroker.client_core.sasl import SaslMechanism, mechanism_for

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# One option of a JAAS login module line: key="value" (quotes may be escaped) or key=value.
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class SecurityConfigError(ValueError):
    """A security property whose value is unknown or cannot be honoured."""


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    protocol: str = "PLAINTEXT"
    # Kafka's default mechanism; kbroker's clients do not speak it, and say so.
    sasl_mechanism: str = "GSSAPI"
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_cadata: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def mechanism(self) -> SaslMechanism | None:
        """A fresh client mechanism for one connection, or None without SASL."""
        if not self.sasl:
            return None
        if self.sasl_username is None or self.sasl_password is None:
            raise SecurityConfigError(
                f"security.protocol={self.protocol} needs sasl.jaas.config or sasl.username "
                "and sasl.password"
            )
        try:
            return mechanism_for(self.sasl_mechanism, self.sasl_username, self.sasl_password)
        except ValueError as exc:
            raise SecurityConfigError(str(exc)) from exc


PLAINTEXT = SecurityConfig()


def _jaas_credentials(text: str) -> tuple[str | None, str | None]:
    options: dict[str, str] = {}
    for match in _JAAS_OPTION.finditer(text):
        quoted, bare = match.group(2), match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
    return options.get("username"), options.get("password")


def _pem_only(props: Mapping[str, str], store: str) -> None:
    kind = props.get(f"ssl.{store}.type", "").strip().upper()
    if kind and kind != "PEM":
        raise SecurityConfigError(
            f"ssl.{store}.type={kind} is not supported: convert the store to PEM "
            f"(ssl.{store}.type=PEM)"
        )


def security_config(props: Mapping[str, str]) -> SecurityConfig:
    """The security settings among Kafka client ``props`` (others are ignored)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"security.protocol={protocol} is not one of {PROTOCOLS}")
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).strip()
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if "sasl.jaas.config" in props:
        username, password = _jaas_credentials(props["sasl.jaas.config"])
    cafile = props.get("ssl.ca.location")
    if cafile is None and "ssl.truststore.location" in props:
        _pem_only(props, "truststore")
        cafile = props["ssl.truststore.location"]
    certfile = props.get("ssl.certificate.location")
    keyfile = props.get("ssl.key.location")
    if certfile is None and "ssl.keystore.location" in props:
        _pem_only(props, "keystore")
        # A PEM key store holds the certificate chain and the private key in one file.
        certfile = props["ssl.keystore.location"]
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise SecurityConfigError(f"ssl.endpoint.identification.algorithm={algorithm}")
    return SecurityConfig(
        protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username=username,
        sasl_password=password,
        ssl_cafile=cafile,
        ssl_cadata=props.get("ssl.truststore.certificates"),
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
        ssl_key_password=props.get("ssl.key.password", props.get("ssl.keystore.password")),
        ssl_check_hostname=algorithm == "https",
    )
