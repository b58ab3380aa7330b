"""Links that follow a topic regex: the source topics created after the link are mirrored too.

The broker that is the cluster's controller looks at the source of every link with a
``kbroker.mirror.topic.regex`` (kbroker/mirror/link_configs.py) once at start and then each
``metadata.max.age.ms`` of the link's source client properties (Kafka clients' default,
5 minutes, as for the new partitions a mirror topic follows), and creates a mirror topic
for each matching source topic the cluster lacks, with the source's partition count; the
brokers leading its partitions then follow it (kbroker/mirror/manager.py), and the leader
of its partition 0 takes the source's copied configs at its first metadata refresh. One
broker does it so that two brokers never race to create the same topic (the loser would
only log TOPIC_ALREADY_EXISTS, but the log would be noise).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kbroker.client import KafkaClient, parse_address
from kbroker.client_core.security import security_config
from kbroker.mirror.link_configs import (
    TOPIC_REGEX,
    mirror_topic_configs,
    replication_factor,
    topics_to_create,
)
from kbroker.mirror.secrets import PasswordEncoder, SecretError, decode_secrets
from kbroker.mirror.topic_configs import SOURCE_BOOTSTRAP, SOURCE_CONFIG
from replication.fetcher import NETWORK_ERRORS
from wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kbroker.broker import Broker

log = logging.getLogger(__name__)

DEFAULT_METADATA_MAX_AGE_MS = 300_000
LOOK_SECONDS = 1.0
SOURCE_TIMEOUT_SECONDS = 30.0


def client_props(configs: Mapping[str, str]) -> dict[str, str]:
    return {k[len(SOURCE_CONFIG) :]: v for k, v in configs.items() if k.startswith(SOURCE_CONFIG)}


class LinkFollower:
    """Creates the mirror topics of regex links on the controller (see the module doc)."""

    def __init__(
        self,
        broker: Broker,
        encoder: PasswordEncoder | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._broker = broker
        self._encoder = encoder
        self._clock = clock
        # Link name -> (its configs when last looked at, when to look again).
        self._due: dict[str, tuple[Mapping[str, str], float]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self.look_once()
            except Exception:
                log.exception("mirror links: looking at the sources failed")
            await asyncio.sleep(LOOK_SECONDS)

    async def look_once(self) -> None:
        """Look at each regex link whose time has come (or whose configs changed)."""
        metadata = self._broker.metadata
        if metadata.controller_id() != self._broker.config.broker_id:
            self._due.clear()
            return
        links = {n: c for n, c in metadata.mirror_links().items() if TOPIC_REGEX in c}
        for name in list(self._due):
            if name not in links:
                del self._due[name]
        now = self._clock()
        for name, configs in sorted(links.items()):
            seen = self._due.get(name)
            if seen is not None and seen[0] == configs and now < seen[1]:
                continue
            max_age_ms = int(
                client_props(configs).get("metadata.max.age.ms", DEFAULT_METADATA_MAX_AGE_MS)
            )
            self._due[name] = (configs, now + max_age_ms / 1000)
            try:
                await self._follow(name, configs)
            except SecretError as exc:
                log.error("mirror link %s: its source secrets: %s", name, exc)
            except (*NETWORK_ERRORS, KafkaError) as exc:
                log.warning("mirror link %s: source not read: %s", name, exc)

    async def _follow(self, link: str, configs: Mapping[str, str]) -> None:
        """``configs`` as stored: the new topics get them so, secrets encrypted."""
        readable = decode_secrets(configs, self._encoder)
        async with KafkaClient(
            [parse_address(a) for a in configs[SOURCE_BOOTSTRAP].split(",")],
            client_id=f"kbroker-mirror-link-{link}",
            timeout=SOURCE_TIMEOUT_SECONDS,
            security=security_config(client_props(readable)),
        ) as source:
            found = await source.partitions(None)
        source_topics = {name: len(partitions) for name, partitions in found.items()}
        wanted = topics_to_create(configs, source_topics, self._broker.metadata.topics())
        for topic, partitions in wanted.items():
            try:
                await self._broker.metadata.create_topic(
                    topic,
                    partitions,
                    replication_factor(configs),
                    configs=mirror_topic_configs(link, configs, topic),
                )
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("mirror link %s: topic %s not created: %s", link, topic, exc)
                continue
            log.info(
                "mirror link %s: source topic %s matches %s: mirroring it (%d partitions)",
                link,
                topic,
                configs[TOPIC_REGEX],
                partitions,
            )
