"""Dynamic broker configs at run time (KIP-226): checking a change, applying what is in force.

The configuration in force is the static properties with the dynamic configs on top, this
broker's own over the cluster-wide defaults (``BrokerConfig.with_dynamic``). A change is
checked as Kafka checks it (names and values: ``validate_dynamic_broker_configs``), then
against this broker: the whole configuration it would give must be valid and every
listener's TLS and SASL settings usable (a key store that does not load is refused, not
applied). Once stored, wherever it came from (this broker, another one, the cluster
default), every broker applies what changed:

- the defaults of topic configs (``log.*``, ``message.max.bytes``, ``min.insync.replicas``,
  ``compression.type``, ...): every hosted partition takes its effective config again (the
  metadata backends report every topic changed);
- ``log.cleaner.*``: the cleaner restarts its workers with the new settings;
- a listener's TLS and SASL settings (``listener.name.<listener>.ssl.*``, ...): connections
  accepted from then on use them, open ones keep theirs.

The other dynamic configs are stored and take effect at the next start (listeners and their
protocols, connection limits; kbroker has no thread pools for the ``num.*.threads`` ones).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from controller.interface import MetadataBackend
from kbroker.config import BrokerConfig, ConfigError, DynamicConfigs
from kbroker.log.cleaner import CleanerConfig
from kbroker.security.listener_security import (
    CredentialLookup,
    ListenerSecurity,
    SecuritySetupError,
    listener_security,
)
from wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


def stored_dynamic_configs(metadata: MetadataBackend) -> DynamicConfigs:
    """The dynamic broker configs stored for this broker and for the whole cluster."""
    return DynamicConfigs(metadata.broker_configs(), metadata.default_broker_configs())


def configuration_with(
    static: BrokerConfig, dynamic: DynamicConfigs, credentials: CredentialLookup
) -> tuple[BrokerConfig, dict[str, ListenerSecurity]]:
    """The configuration ``dynamic`` gives this broker and its listeners' security;
    KafkaError(INVALID_REQUEST) naming the problem when either is unusable."""
    try:
        config = static.with_dynamic(dynamic)
        security = {
            lst.name: listener_security(config, lst.name, credentials) for lst in config.listeners
        }
    except (ConfigError, SecuritySetupError) as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid dynamic config: {exc}") from exc
    return config, security


def changed_listeners(
    before: Mapping[str, ListenerSecurity],
    after: Mapping[str, ListenerSecurity],
    old: BrokerConfig,
    new: BrokerConfig,
) -> list[str]:
    """The listeners whose security settings differ between two configurations (by their
    properties: a rebuilt TLS context never compares equal) and whose protocol is the same
    (a listener's protocol changes only with a restart)."""
    out: list[str] = []
    for name, security in after.items():
        previous = before.get(name)
        if previous is None or previous.protocol != security.protocol:
            continue
        if _security_props(old, name) != _security_props(new, name):
            out.append(name)
    return out


def _security_props(config: BrokerConfig, listener: str) -> dict[str, object]:
    prefix = f"listener.name.{listener.lower()}."
    return {
        name: value
        for name, value in config.values.items()
        if name.startswith(("ssl.", "sasl.", prefix))
    }


def cleaner_changed(old: BrokerConfig, new: BrokerConfig) -> CleanerConfig | None:
    """The cleaner's new settings when a log.cleaner.* config it uses changed."""
    before, after = CleanerConfig.from_broker(old.get), CleanerConfig.from_broker(new.get)
    return None if before == after else after


def log_changes(old: BrokerConfig, new: BrokerConfig) -> None:
    changed = sorted(
        name
        for name in new.values.keys() | old.values.keys()
        if new.values.get(name) != old.values.get(name)
    )
    if changed:
        log.info("dynamic broker configs in force changed: %s", ", ".join(changed))
