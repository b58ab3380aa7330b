"""Configs kept per name for entities that are not topics or brokers, as both metadata backends
store them: client-metrics subscriptions (KIP-714, ConfigResource type CLIENT_METRICS,
kbroker/telemetry/subscriptions.py), group configs (KIP-848/KIP-932, type GROUP,
kbroker/group/group_configs.py) and kbroker's mirror links (kbroker/mirror/link_configs.py).
Each kind is a table of name -> configs; a name without any config is not in the table.

ZooKeeper keeps them in Kafka's ``/config/<type>/<name>`` layout:

- ``/config/client-metrics/<name>``, ``/config/groups/<name>`` and (kbroker's own, which
  Kafka never reads) ``/config/kbroker-mirror-links/<name>``: ``{"version": 1,
  "config": {"interval.ms": "1000"}}``, the name URL-encoded as Kafka's Sanitizer does (a
  name may hold ``/``);
- after each change a sequential ``/config/changes/config_change_`` znode
  ``{"version": 2, "entity_path": "<type>/<name>"}``, as for the other config types.

The embedded backend keeps ``{"<name>": {"interval.ms": "1000", ...}}`` under the kind's key.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.quota_store import sanitize

Table = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class NamedConfigKind:
    """One kind of named configs: its ZooKeeper entity type and its key in the embedded
    metadata file."""

    entity_type: str
    state_key: str

    @property
    def root(self) -> str:
        return f"/config/{self.entity_type}"

    def node_path(self, name: str) -> str:
        return f"{self.root}/{sanitize(name)}"

    def entity_path(self, name: str) -> str:
        """The path below /config, as change notifications name it."""
        return f"{self.entity_type}/{sanitize(name)}"


CLIENT_METRICS = NamedConfigKind("client-metrics", "client_metrics")
GROUPS = NamedConfigKind("groups", "group_configs")
MIRROR_LINKS = NamedConfigKind("kbroker-mirror-links", "mirror_links")
KINDS = (CLIENT_METRICS, GROUPS, MIRROR_LINKS)


def with_change(table: Table, name: str, configs: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """A new table where ``name`` has ``configs`` (none: the name is removed)."""
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


def node_name(node: str) -> str:
    return urllib.parse.unquote(node)
