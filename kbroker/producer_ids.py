"""Producer id allocation that never hands out an id twice, across restarts.

Ids are reserved in blocks, like Kafka's producer id blocks (KIP-730): before an
id of a new block is used, the end of that block is written to the file below,
so a restarted broker starts after every id it may have given out.

File format (`producer-id-block` in the first log dir): one line of ASCII text,
the first id of the next unreserved block, written to a temporary name, fsynced
and renamed over the old file.
"""

from __future__ import annotations

import os
from pathlib import Path

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdAllocator:
    def __init__(self, directory: Path) -> None:
        self._path = directory / FILE_NAME
        self._next = self._load()
        self._reserved_until = self._next

    def _load(self) -> int:
        try:
            text = self._path.read_text().strip()
        except FileNotFoundError:
            return 0
        try:
            return int(text)
        except ValueError as exc:
            raise ValueError(f"{self._path}: not a producer id: {text!r}") from exc

    def _reserve(self, until: int) -> None:
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(f"{until}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._reserved_until = until

    def next_id(self) -> int:
        if self._next >= self._reserved_until:
            self._reserve(self._next + BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id
