"""The schema registry inside a broker (``schema.registry.listeners``): its store on the
broker's ``_schemas`` partition, its HTTP listeners, its users and ACLs, and the URL it
publishes so that the other brokers forward writes to it while it leads ``_schemas``."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from kbroker.client import KafkaClient
from kbroker.config import BrokerConfig, ConfigError
from kbroker.schema_registry.http import HttpSecurity, RegistryApp
from kbroker.schema_registry.service import RegistryService
from kbroker.schema_registry.state import RegistryState
from kbroker.schema_registry.store import BrokerStore
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.plain import plain_users
from kbroker.security.scram import credential_from_salted, salted_password
from kbroker.security.tls import server_context

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

SERVICE = "schema-registry"
PREFIX = "schema.registry."
# A password checked against a SCRAM credential is remembered (as a hash) this long, so that
# the PBKDF2 iterations are not paid on every request of a client.
VERIFIED_SECONDS = 60.0
VERIFIED_MAX = 1024


@dataclass(frozen=True, slots=True)
class HttpListener:
    scheme: str
    host: str
    port: int


def parse_listeners(config: BrokerConfig) -> list[HttpListener]:
    """``schema.registry.listeners`` (ConfigError on a bad entry); empty: the registry is off."""
    out = []
    for entry in config.get("schema.registry.listeners"):
        parts = urlsplit(entry.strip())
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("http", "https") or port is None or parts.path not in ("", "/"):
            raise ConfigError(
                f"Invalid value {entry!r} for configuration schema.registry.listeners: "
                "expected http://host:port or https://host:port"
            )
        out.append(HttpListener(parts.scheme, parts.hostname or "", port))
    if any(lst.scheme == "https" for lst in out) and not config.get(
        "schema.registry.ssl.keystore.location"
    ):
        raise ConfigError("schema.registry.listeners has https: set schema.registry.ssl.keystore.*")
    return out


def _ssl_props(config: BrokerConfig) -> dict[str, str]:
    props = {}
    for name in (
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.client.auth",
    ):
        value = config.get(PREFIX + name)
        if value is not None:
            props[name] = str(value)
    return props


def _client_ssl(config: BrokerConfig) -> ssl.SSLContext:
    """How a registry forwarding a write trusts the leader's https listener."""
    context = ssl.create_default_context()
    location = config.get(PREFIX + "ssl.truststore.location")
    if location:
        context.load_verify_locations(cafile=location)
    return context


class PasswordChecker:
    """HTTP basic credentials against the broker's SASL users: PLAIN users of its JAAS
    configuration, then SCRAM credentials of the cluster metadata (either mechanism)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._plain: dict[str, str] = {}
        config = broker.config
        for listener in config.listeners:
            jaas = config.jaas_config(listener.name, "PLAIN")
            if jaas is not None and "PlainLoginModule" in jaas:
                self._plain.update(plain_users(jaas))
        self._verified: OrderedDict[bytes, float] = OrderedDict()

    async def __call__(self, user: str, password: str) -> str | None:
        expected = self._plain.get(user)
        if expected is not None:
            ok = hmac.compare_digest(expected.encode(), password.encode())
            return f"User:{user}" if ok else None
        credentials = self._broker.metadata.scram_credentials().get(user, {})
        if not credentials:
            return None
        token = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        now = time.monotonic()
        seen = self._verified.get(token)
        if seen is not None and now - seen < VERIFIED_SECONDS:
            return f"User:{user}"
        for mechanism, credential in credentials.items():
            salted = await asyncio.to_thread(
                salted_password, mechanism, password, credential.salt, credential.iterations
            )
            derived = credential_from_salted(
                mechanism, credential.salt, credential.iterations, salted
            )
            if hmac.compare_digest(derived.stored_key, credential.stored_key):
                self._verified[token] = now
                self._verified.move_to_end(token)
                while len(self._verified) > VERIFIED_MAX:
                    self._verified.popitem(last=False)
                return f"User:{user}"
        return None


class BrokerRegistry:
    def __init__(self, broker: Broker, listeners: list[HttpListener]) -> None:
        self._broker = broker
        self._listeners = listeners
        config = broker.config
        self._server_ssl = (
            server_context(_ssl_props(config))
            if any(lst.scheme == "https" for lst in listeners)
            else None
        )
        self._client: KafkaClient | None = None
        self.store: BrokerStore | None = None
        self.service: RegistryService | None = None
        self.app: RegistryApp | None = None
        self.ports: list[int] = []

    @property
    def state(self) -> RegistryState | None:
        return None if self.store is None else self.store.state

    def _authorize(
        self, principal: str, host: str, operation: AclOperation, kind: ResourceType, name: str
    ) -> bool:
        authorizer = self._broker.authorizer
        assert authorizer is not None
        return authorizer.authorize(principal, host, operation, kind, name)

    async def start(self) -> None:
        broker, config = self._broker, self._broker.config
        inter = next(
            e
            for e in broker.advertised_endpoints()
            if e.listener == config.inter_broker_listener_name
        )
        self._client = KafkaClient(
            [(inter.host, inter.port)],
            client_id=f"schema-registry-{config.broker_id}",
            security=broker.inter_broker_security,
        )
        self.store = BrokerStore(
            broker, self._client, config.get("schema.registry.topic.replication.factor")
        )
        self.service = RegistryService(self.store)
        security = HttpSecurity(
            check_password=(
                PasswordChecker(broker)
                if config.get("schema.registry.authentication.method") == "BASIC"
                else None
            ),
            authorize=self._authorize if broker.authorizer is not None else None,
        )
        self.app = RegistryApp(self.service, security, self._writer_url, _client_ssl(config))
        await self.service.start()
        self.ports = await self.app.start(
            [(lst.scheme, lst.host, lst.port) for lst in self._listeners], self._server_ssl
        )
        await broker.metadata.publish_service_url(SERVICE, self._advertised_url(inter.host))

    def _advertised_url(self, fallback_host: str) -> str:
        configured = self._broker.config.get("schema.registry.advertised.listener")
        if configured:
            return str(configured)
        first = self._listeners[0]
        host = first.host if first.host not in ("", "0.0.0.0", "::") else fallback_host
        return f"{first.scheme}://{host}:{self.ports[0]}"

    async def _writer_url(self) -> str | None:
        assert self.store is not None
        leader = self.store.leader()
        if leader is None:
            return None
        return await self._broker.metadata.service_url(SERVICE, leader)

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.close()
        if self.service is not None:
            await self.service.stop()
