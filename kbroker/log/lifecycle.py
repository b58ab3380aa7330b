"""The storage duties a broker runs in the background: retention and the log cleaner.

- Retention, every log.retention.check.interval.ms on the event loop: each hosted log
  deletes its oldest segments beyond retention.ms / retention.bytes (only below the high
  watermark, only when cleanup.policy includes "delete"); the deleted segments' files are
  renamed to `.deleted` and unlinked after file.delete.delay.ms by the log manager's
  periodic flush duty. Moving the log start offset wakes fetches waiting on the partition.
- The log cleaner (cleaner.py), log.cleaner.threads workers whose heavy work runs in
  threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbroker.log.cleaner import CleanerConfig, LogCleaner
from kbroker.log.log_manager import LogManager, TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LifecycleSettings:
    """Broker-level settings of the background storage duties."""

    retention_check_interval_ms: int = 300_000
    cleaner: CleanerConfig = CleanerConfig()

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> LifecycleSettings:
        """From a BrokerConfig's `get(name)`."""
        return cls(
            retention_check_interval_ms=int(get("log.retention.check.interval.ms")),
            cleaner=CleanerConfig.from_broker(get),
        )


class StorageLifecycle:
    """Runs retention and the cleaner for the logs of a LogManager."""

    def __init__(
        self,
        logs: LogManager,
        settings: LifecycleSettings,
        *,
        stable_offset: Callable[[TopicPartition], int | None],
        on_change: Callable[[TopicPartition], None] = lambda _tp: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`stable_offset(tp)`: the partition's last stable offset, which retention and the
        cleaner never pass (at most the high watermark); None for a log this broker does not
        serve (left alone by
        retention). `on_change(tp)` runs after retention moved a log start offset."""
        self.logs = logs
        self.settings = settings
        self._stable_offset = stable_offset
        self._on_change = on_change
        self.cleaner = LogCleaner(logs, settings.cleaner, stable_offset=stable_offset, clock=clock)
        self._retention_task: asyncio.Task[None] | None = None

    def enforce_retention(self) -> int:
        """One retention pass over every served log; returns the segments deleted."""
        deleted = 0
        for tp, plog in self.logs.logs().items():
            bound = self._stable_offset(tp)
            if bound is None:
                continue
            count = plog.enforce_retention(stable_offset=bound)
            if count:
                log.info(
                    "%s-%d: retention deleted %d segments, log start offset now %d",
                    *tp,
                    count,
                    plog.log_start_offset,
                )
                self._on_change(tp)
                deleted += count
        return deleted

    async def _retain_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.retention_check_interval_ms / 1000)
            try:
                self.enforce_retention()
            except Exception:
                log.exception("retention pass failed")

    def start(self) -> None:
        """Start both duties on the running event loop."""
        loop = asyncio.get_running_loop()
        self._retention_task = loop.create_task(self._retain_periodically())
        self.cleaner.start()

    async def stop(self) -> None:
        """Stop both (before the logs are closed)."""
        if self._retention_task is not None:
            self._retention_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retention_task
            self._retention_task = None
        await self.cleaner.stop()
