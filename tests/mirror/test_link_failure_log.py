"""What the link logs when a source broker fails it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kbroker.client import BrokerConnection
from kbroker.mirror.link import MirrorTopic
from kbroker.mirror.partition_core import Backoff
from kbroker.mirror.throttle import LinkThrottle
from kbroker.mirror.topic_configs import ACTIVE, MirrorSpec
from replication.fetcher import FetchSettings


class NoHost:
    broker_id = 1


class SilentClient:
    """A source broker that never answers: connecting times out without a message."""

    async def node(self, node_id: int) -> BrokerConnection:
        raise TimeoutError


def test_a_timeout_without_a_message_is_logged_by_its_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A black-holed link ends in a bare TimeoutError; its log line must still say why."""
    settings = FetchSettings(500, 1, 1 << 20, 1 << 20, 0.2, 30.0)
    spec = MirrorSpec("dc1", "127.0.0.1:9", "orders", ACTIVE)
    mirror = MirrorTopic(NoHost(), "orders", spec, settings, Backoff(100, 1000), LinkThrottle())  # type: ignore[arg-type]
    mirror._client = SilentClient()  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, logger="kbroker.mirror.link"):
        asyncio.run(mirror._with_leader(2, [], [0]))
    assert "mirror orders: source broker 2 failed: TimeoutError()" in caplog.text
