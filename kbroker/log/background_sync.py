"""Storage fsyncs off the event loop, in the order they were asked for.

The broker serves every client from one asyncio thread, so an fsync made there stops every
request for as long as the disk takes: the loop-stall watcher (loop_stalls.py) caught a new
segment's directory fsync and the leader-epoch checkpoint's atomic write holding the loop for
0.8-2.3 s on a busy machine. Kafka moved the same fsyncs out of its request path (KAFKA-9693:
the producer snapshot at roll; KAFKA-15046: the snapshot and the leader-epoch checkpoint;
the sealed segment has been flushed by a scheduler thread since 0.8). Here the logs write
what they must to the page cache on the loop (cheap) and hand the fsyncs (and the atomic
replacement of checkpoint files, which includes two) to one thread.

Crash safety rests on the order: one thread runs the jobs first in, first out, so a file that
points into data (the recovery-point checkpoint, whose offsets say "everything below is on
disk") becomes durable only after the fsyncs of that data, asked for earlier, have returned.
A job works on descriptors taken when it was asked for (duplicated file descriptors, the
directory opened), never on names: a partition deleted, or deleted and created again under the
same name, meanwhile gets nothing written into the wrong directory.

A job that fails (EIO, ENOSPC) is reported with the log directory it wrote to; the broker takes
that directory offline as for a failed append (KIP-112). `InlineSync` runs each job at once on
the caller's thread, raising its error there: a log opened by itself (tools, tests) behaves as
before.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

Job = Callable[[], None]
FailureHandler = Callable[[Path, OSError], None]


class Syncer(Protocol):
    def submit(self, log_dir: Path, job: Job) -> None:
        """Run `job` (fsyncs of files under `log_dir`) after every job submitted before."""


class InlineSync:
    """Runs each job at once, on the caller's thread."""

    def submit(self, log_dir: Path, job: Job) -> None:
        job()


INLINE = InlineSync()


class BackgroundSync:
    """Runs the jobs one after the other on a daemon thread of its own."""

    def __init__(self) -> None:
        self._pending: queue.SimpleQueue[tuple[Path, Job] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._outstanding = 0
        # Set while no job is pending or running (wait_idle; shutdown and the tests wait on it).
        self._idle = threading.Event()
        self._idle.set()
        # Called on the worker thread with the log directory of a failed job.
        self.on_failure: FailureHandler = _log_failure
        # The log directories a job failed in (shutdown writes no clean-shutdown marker there).
        self.failed_dirs: set[Path] = set()

    def submit(self, log_dir: Path, job: Job) -> None:
        with self._lock:
            self._outstanding += 1
            self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kbroker-background-sync", daemon=True
                )
                self._thread.start()
        self._pending.put((log_dir, job))

    @property
    def outstanding(self) -> int:
        """Jobs submitted and not finished."""
        return self._outstanding

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Whether every job submitted so far has run (within `timeout`)."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        """Run what is pending, then end the thread (a later submit starts another)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._pending.put(None)
            thread.join()

    def _run(self) -> None:
        while True:
            item = self._pending.get()
            if item is None:
                return
            log_dir, job = item
            try:
                try:
                    job()
                except OSError as exc:
                    self.failed_dirs.add(log_dir)
                    self.on_failure(log_dir, exc)
            except Exception:
                # A bug in a job, or a report that cannot be delivered (the loop closed), must
                # not stop the jobs after it.
                log.exception("background sync job under %s failed", log_dir)
            finally:
                with self._lock:
                    self._outstanding -= 1
                    if self._outstanding == 0:
                        self._idle.set()


def _log_failure(log_dir: Path, exc: OSError) -> None:
    log.error("a background fsync under %s failed: %s", log_dir, exc)
