"""Deleted partitions' directories, removed off the event loop.

A deleted partition's directory is first renamed to `<name>.<id>-delete` (LogManager.delete):
from then on it is not the partition's any more, and start-up removes any such directory a
crash left behind. The removal itself (an fsync of the parent, so the rename is durable, then
the files) is done here by a daemon thread, in batches: deleting a topic of 10,000
partitions took 10-15 s of the event loop when each was removed in turn, and Kafka, too,
answers DeleteTopics before the files are gone.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from pathlib import Path

from kbroker.log.fileio import fsync_dir

log = logging.getLogger(__name__)


class DirRemover:
    """Removes the directories handed to it, in the order given, on a thread of its own."""

    def __init__(self) -> None:
        self._pending: queue.SimpleQueue[Path] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Set while nothing is pending or being removed (wait_idle; the tests wait on it).
        self._idle = threading.Event()
        self._idle.set()

    def remove(self, directory: Path) -> None:
        with self._lock:
            self._idle.clear()
            self._pending.put(directory)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kbroker-dir-remover", daemon=True
                )
                self._thread.start()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Whether everything handed over so far is removed (within `timeout`)."""
        return self._idle.wait(timeout)

    def _run(self) -> None:
        while True:
            batch = [self._pending.get()]
            while True:
                try:
                    batch.append(self._pending.get_nowait())
                except queue.Empty:
                    break
            try:
                for parent in {d.parent for d in batch}:
                    fsync_dir(parent)
            except OSError as exc:
                log.warning("fsync of a log directory after deletions failed: %s", exc)
            for directory in batch:
                shutil.rmtree(directory, ignore_errors=True)
            with self._lock:
                if self._pending.empty():
                    self._idle.set()
