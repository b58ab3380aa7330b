"""A bound on the index files kept open (issue 17: many partitions on one broker).

Each active segment has an offset index and a time index whose files are written through
a file descriptor of their own (entry_index.py). Kafka keeps all of them open, so a broker
with 10,000 partitions needs some 30,000 descriptors and an operator who raises the limit;
kbroker keeps at most ``limit`` index descriptors open, closing the least recently used
(its next append opens the file again; an index written since its last fsync is fsynced
first, so a clean shutdown still finds every index on disk). The segments' ``.log`` files
stay open: fetches may be sending from them.

The default limit is a quarter of the process's open-file limit (RLIMIT_NOFILE), at least
256: with the common limit of 20,000 (or 1,024 on a bare shell), the logs and the client
connections keep the rest.
"""

from __future__ import annotations

import collections
import resource
from typing import Protocol

MIN_LIMIT = 256


class IndexFile(Protocol):
    def release_fd(self) -> None:
        """Close the descriptor (fsync first if written since the last fsync)."""


def default_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(MIN_LIMIT, soft // 4)


class OpenIndexFiles:
    """The index files with an open descriptor, least recently used first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: collections.OrderedDict[IndexFile, None] = collections.OrderedDict()
        # How many descriptors were closed to stay within the limit (for the tests and
        # the metrics).
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._open)

    def used(self, index: IndexFile) -> None:
        """``index`` holds an open descriptor and was just written."""
        opened = self._open
        if index in opened:
            opened.move_to_end(index)
            return
        opened[index] = None
        while len(opened) > self.limit:
            oldest, _ = opened.popitem(last=False)
            self.evictions += 1
            oldest.release_fd()

    def closed(self, index: IndexFile) -> None:
        """``index`` closed its descriptor itself."""
        self._open.pop(index, None)


OPEN_INDEXES = OpenIndexFiles(default_limit())
