"""Who may create, change and delete mirror links.

Kafka has no ACL resource for a cluster link. A link makes the cluster connect out to
another cluster with credentials it stores, and write what it copies into its own topics:
an act on the cluster, as changing broker configs is (Kafka asks ALTER_CONFIGS on the
CLUSTER for those). kbroker asks ALTER on the CLUSTER resource for every change of a link:

- writing or deleting a link's record (kbroker/mirror/link_configs.py; describing it needs
  DESCRIBE_CONFIGS on the cluster, as listing config resources does);
- creating a topic with ``kbroker.mirror.*`` configs (a mirror topic), besides CREATE on the
  topic (or the cluster) that any topic needs;
- adding, changing or removing a topic's ``kbroker.mirror.*`` configs: pause, resume,
  promote, the source's client properties, besides ALTER_CONFIGS on the topic.

Deleting a mirror topic is deleting a topic (DELETE on it); reading one is reading a topic.
A principal refused gets CLUSTER_AUTHORIZATION_FAILED for that topic or link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kbroker.authorization import authorize
from kbroker.mirror.topic_configs import is_mirror_config
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker


def changes_link(current: Mapping[str, str], updated: Mapping[str, str | None]) -> bool:
    """Whether going from ``current`` topic configs to ``updated`` adds, changes or removes a
    mirror config."""

    def mirror_part(configs: Mapping[str, str | None]) -> dict[str, str | None]:
        return {k: v for k, v in configs.items() if is_mirror_config(k) and v is not None}

    return mirror_part(current) != mirror_part(updated)


def check_link_access(broker: Broker, subject: str) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED unless the request's principal has ALTER on the
    cluster."""
    if not authorize(broker, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        raise KafkaError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{subject}: changing a mirror link needs ALTER on the cluster",
        )
