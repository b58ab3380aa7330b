"""What one listener asks of its clients, built from the broker's properties.

A listener's security protocol (``listener.security.protocol.map``) decides the layers:
TLS for SSL and SASL_SSL (kbroker.security.tls, with the listener's
``listener.name.<l>.ssl.*`` overrides), SASL for SASL_PLAINTEXT and SASL_SSL. The result is
what the connection shell needs and nothing else: an ``ssl.SSLContext`` or None, a factory
of SASL sessions or None, and how a client certificate becomes a principal. Bad settings
fail here, when the broker starts, with the property's name in the message.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kbroker.client_core.security import SecurityConfig, SecurityConfigError, security_config
from kbroker.config import BrokerConfig
from kbroker.config_defs import BROKER_DEFS
from kbroker.security.acls import ANONYMOUS
from kbroker.security.oauthbearer import MECHANISM as OAUTHBEARER
from kbroker.security.oauthbearer import OAuthBearerError, OAuthBearerExchange, validator_options
from kbroker.security.plain import PlainError, PlainExchange, plain_users
from kbroker.security.principal_rules import dn_of_subject, map_principal, parse_rules
from kbroker.security.sasl_session import Exchange, SaslSession
from kbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kbroker.security.scram import ScramCredential, ScramError, ScramServer
from kbroker.security.tls import pkcs12_certificates, server_context

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
# A user's SCRAM credential for a mechanism, or None (looked up at authentication time, so
# a credential added through AlterUserScramCredentials works at once).
CredentialLookup = Callable[[str, str], ScramCredential | None]


class SecuritySetupError(ValueError):
    """A listener's security settings cannot be honoured (the broker does not start)."""


@dataclass(frozen=True)
class SaslSettings:
    """The SASL side of a listener: its mechanisms and limits."""

    mechanisms: Mapping[str, Callable[[], Exchange]]
    max_receive_size: int
    # connections.max.reauth.ms (KIP-368): 0 means sessions do not expire.
    reauth_ms: int
    # connection.failed.authentication.delay.ms: a failed client waits this long for its
    # answer, so password guessing is slow.
    failure_delay_ms: int
    # Ours (issue 29): the time a client has to authenticate, and how many connections may
    # be authenticating at once.
    authentication_timeout_ms: int = 10_000
    max_in_authentication: int = 1000

    def new_session(self) -> SaslSession:
        return SaslSession(
            dict(self.mechanisms),
            (PlainError, ScramError, OAuthBearerError),
            self.max_receive_size,
        )


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str
    tls: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None
    principal_of_dn: Callable[[str], str] | None = None
    # Ours (issue 29): how many TLS handshakes of one client address run at once.
    max_handshakes_per_ip: int = 4

    def tls_principal(self, peer_certificate: Mapping[str, object] | None) -> str:
        """The principal of an SSL listener's client: its certificate's DN mapped through
        ssl.principal.mapping.rules (``User:<name>``), or ANONYMOUS without a certificate."""
        if not peer_certificate or self.principal_of_dn is None:
            return ANONYMOUS
        subject = peer_certificate.get("subject", ())
        return "User:" + self.principal_of_dn(dn_of_subject(subject))  # type: ignore[arg-type]


PLAINTEXT_LISTENER = ListenerSecurity("PLAINTEXT")


def _ssl_props(config: BrokerConfig, listener: str) -> dict[str, str]:
    """The listener's effective ssl.* settings, as kbroker.security.tls reads them."""
    props: dict[str, str] = {}
    for name in BROKER_DEFS:
        if not name.startswith("ssl."):
            continue
        value = config.listener_value(listener, name)
        if value is None:
            continue
        props[name] = ",".join(value) if isinstance(value, list) else str(value)
    return props


def _tls_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    props = _ssl_props(config, listener)
    try:
        return server_context(props)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise SecuritySetupError(f"listener {listener}: TLS settings: {exc}") from exc


def _sasl_settings(
    config: BrokerConfig, listener: str, credentials: CredentialLookup
) -> SaslSettings:
    enabled = [
        m.strip().upper() for m in config.listener_value(listener, "sasl.enabled.mechanisms")
    ]
    unsupported = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
    if unsupported or not enabled:
        raise SecuritySetupError(
            f"listener {listener}: sasl.enabled.mechanisms={','.join(enabled)}: "
            f"{', '.join(unsupported) or 'nothing'} is not supported (kbroker supports "
            f"{', '.join(SUPPORTED_MECHANISMS)})"
        )
    mechanisms: dict[str, Callable[[], Exchange]] = {}
    for mechanism in enabled:
        if mechanism == PLAIN:
            jaas = config.jaas_config(listener, PLAIN)
            if jaas is None:
                raise SecuritySetupError(
                    f"listener {listener}: PLAIN needs its users in "
                    f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
                )
            try:
                users = plain_users(jaas)
            except ValueError as exc:
                raise SecuritySetupError(f"listener {listener}: {exc}") from exc
            mechanisms[PLAIN] = lambda users=users: PlainExchange(users)
        elif mechanism == OAUTHBEARER:
            options = validator_options(config.jaas_config(listener, OAUTHBEARER))
            mechanisms[OAUTHBEARER] = lambda options=options: OAuthBearerExchange(options)
        else:
            mechanisms[mechanism] = lambda m=mechanism: ScramServer(
                m, lambda user, m=m: credentials(user, m)
            )
    return SaslSettings(
        mechanisms=mechanisms,
        max_receive_size=config.listener_value(listener, "sasl.server.max.receive.size"),
        reauth_ms=config.listener_value(listener, "connections.max.reauth.ms"),
        failure_delay_ms=config.get("connection.failed.authentication.delay.ms"),
        authentication_timeout_ms=config.listener_value(
            listener, "sasl.server.authentication.timeout.ms"
        ),
        max_in_authentication=config.listener_value(
            listener, "sasl.server.max.connections.in.authentication"
        ),
    )


def listener_security(
    config: BrokerConfig, listener: str, credentials: CredentialLookup
) -> ListenerSecurity:
    """The security of one listener of ``config`` (SecuritySetupError when unusable)."""
    protocol = config.security_protocol(listener)
    if protocol == "PLAINTEXT":
        return PLAINTEXT_LISTENER
    tls = _tls_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    sasl = (
        _sasl_settings(config, listener, credentials)
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        else None
    )
    principal_of_dn = None
    if protocol == "SSL":
        try:
            rules = parse_rules(config.listener_value(listener, "ssl.principal.mapping.rules"))
        except ValueError as exc:
            raise SecuritySetupError(f"listener {listener}: {exc}") from exc
        principal_of_dn = lambda dn: map_principal(rules, dn)  # noqa: E731
    return ListenerSecurity(
        protocol,
        tls,
        sasl,
        principal_of_dn,
        max_handshakes_per_ip=config.listener_value(listener, "ssl.max.handshakes.per.ip"),
    )


def inter_broker_security(config: BrokerConfig) -> SecurityConfig:
    """How this broker connects to the others (follower fetchers, transaction markers):
    through inter.broker.listener.name, with sasl.mechanism.inter.broker.protocol and the
    username/password options of that listener's JAAS configuration for the mechanism, the
    listener's trust store, and its key store as the client certificate (PEM only here)."""
    listener = config.inter_broker_listener_name
    protocol = config.security_protocol(listener)
    props: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
        props["sasl.mechanism"] = mechanism
        jaas = config.jaas_config(listener, mechanism)
        if jaas is None:
            raise SecuritySetupError(
                f"inter-broker listener {listener}: {mechanism} needs username and password in "
                f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
            )
        props["sasl.jaas.config"] = jaas
    if protocol in ("SSL", "SASL_SSL"):
        ssl_props = _ssl_props(config, listener)
        props["ssl.endpoint.identification.algorithm"] = ssl_props.get(
            "ssl.endpoint.identification.algorithm", "https"
        )
        if ssl_props.get("ssl.truststore.type", "PEM").upper() == "PKCS12":
            props["ssl.truststore.certificates"] = pkcs12_certificates(
                ssl_props["ssl.truststore.location"], ssl_props.get("ssl.truststore.password")
            )
            props["ssl.truststore.type"] = "PEM"
        for name in ("ssl.truststore.location", "ssl.truststore.certificates"):
            if name in ssl_props and "ssl.truststore.certificates" not in props:
                props[name] = ssl_props[name]
        if ssl_props.get("ssl.keystore.type", "PEM").upper() == "PEM" and (
            "ssl.keystore.location" in ssl_props
        ):
            props["ssl.keystore.location"] = ssl_props["ssl.keystore.location"]
            if "ssl.key.password" in ssl_props:
                props["ssl.key.password"] = ssl_props["ssl.key.password"]
    try:
        security = security_config(props)
        security.mechanism()  # a missing username or password fails here
    except SecurityConfigError as exc:
        raise SecuritySetupError(f"inter-broker listener {listener}: {exc}") from exc
    return security
