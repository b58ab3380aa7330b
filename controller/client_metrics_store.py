"""Client-metrics subscriptions (KIP-714, ConfigResource type CLIENT_METRICS) as both
metadata backends store them: a table of subscription name -> configs (``metrics``,
``interval.ms``, ``match``; kbroker/telemetry/subscriptions.py), a subscription with no
config being no subscription.

ZooKeeper keeps them in Kafka's ``/config/<type>/<name>`` layout:

- ``/config/client-metrics/<name>``: ``{"version": 1, "config": {"interval.ms": "1000",
  "metrics": "org.apache.kafka.producer."}}``, the name URL-encoded as Kafka's Sanitizer
  does (a subscription name may hold ``/``);
- after each change a sequential ``/config/changes/config_change_`` znode
  ``{"version": 2, "entity_path": "client-metrics/<name>"}``, as for the other config types.

The embedded backend keeps ``{"<name>": {"interval.ms": "1000", ...}}``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from controller.quota_store import sanitize

ROOT = "/config/client-metrics"
ENTITY_TYPE = "client-metrics"

Table = Mapping[str, Mapping[str, str]]


def with_change(table: Table, name: str, configs: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """A new table where ``name`` has ``configs`` (none: the subscription is removed)."""
    out = {k: dict(v) for k, v in table.items()}
    if configs:
        out[name] = dict(configs)
    else:
        out.pop(name, None)
    return out


def to_json(table: Table) -> dict[str, dict[str, str]]:
    return {name: dict(configs) for name, configs in table.items()}


def from_json(obj: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    return {
        str(name): {str(k): str(v) for k, v in configs.items()} for name, configs in obj.items()
    }


def node_path(name: str) -> str:
    return f"{ROOT}/{sanitize(name)}"


def node_name(node: str) -> str:
    return urllib.parse.unquote(node)


def entity_path(name: str) -> str:
    """The path below /config, as change notifications name it."""
    return f"{ENTITY_TYPE}/{sanitize(name)}"
