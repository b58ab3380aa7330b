"""Producer id blocks: the ranges of producer ids a broker may hand out (KIP-98, KIP-730).

A producer id must be unique in the whole cluster: a broker that gave an idempotent producer
an id another broker's transaction coordinator also gave out would make the partition leaders
mix the two producers' sequences and epochs (the newer epoch fences the other producer's
batches). So brokers do not count ids themselves: each takes a block of ``BLOCK_SIZE`` ids
from the metadata backend, which never hands out a block twice, across restarts.

Where the blocks are recorded:

- ZooKeeper (as Kafka's ZooKeeper mode does): ``/latest_producer_id_block`` holds the last
  block given out, ``{"version": 1, "broker": <id>, "block_start": "<first id>",
  "block_end": "<last id>"}`` (the ids as decimal strings); a broker takes the next block by
  writing the node conditionally on the version it read (``encode_znode``/``decode_znode``).
- Embedded metadata (one broker): ``producer-id-block`` in the first log dir, one line of
  ASCII text, the first id of the next unreserved block, written to a temporary name, fsynced
  and renamed over the old file (``FileBlockStore``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"
ZNODE_VERSION = 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids ``first`` .. ``first + size - 1``, given to ``broker_id``."""

    broker_id: int
    first: int
    size: int = BLOCK_SIZE

    @property
    def last(self) -> int:
        return self.first + self.size - 1


def block_after(previous: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block that follows ``previous`` (the first one when None)."""
    return ProducerIdBlock(broker_id, 0 if previous is None else previous.last + 1)


def encode_znode(block: ProducerIdBlock) -> bytes:
    return json.dumps(
        {
            "version": ZNODE_VERSION,
            "broker": block.broker_id,
            "block_start": str(block.first),
            "block_end": str(block.last),
        }
    ).encode()


def decode_znode(data: bytes) -> ProducerIdBlock:
    """ValueError when the node does not hold a block."""
    try:
        obj = json.loads(data)
        first = int(obj["block_start"])
        last = int(obj["block_end"])
        broker_id = int(obj["broker"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a producer id block: {data!r}") from exc
    if last < first:
        raise ValueError(f"not a producer id block: {data!r}")
    return ProducerIdBlock(broker_id, first, last - first + 1)


class FileBlockStore:
    """The embedded backend's blocks, recorded in ``<directory>/producer-id-block``."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / FILE_NAME

    def _next_first(self) -> int:
        try:
            text = self._path.read_text().strip()
        except FileNotFoundError:
            return 0
        try:
            return int(text)
        except ValueError as exc:
            raise ValueError(f"{self._path}: not a producer id: {text!r}") from exc

    def reserve(self, broker_id: int) -> ProducerIdBlock:
        """The next block, durably recorded before it is returned (blocking IO)."""
        block = ProducerIdBlock(broker_id, self._next_first())
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(f"{block.last + 1}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return block
