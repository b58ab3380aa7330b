"""Producer id blocks (controller/producer_id_blocks.py) and the broker's allocator over them
(kbroker/producer_ids.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller.producer_id_blocks import (
    FileBlockStore,
    ProducerIdBlock,
    block_after,
    decode_znode,
    encode_znode,
)
from kbroker.producer_ids import ProducerIdAllocator
from wire.errors import ErrorCode, KafkaError


def test_znode_is_kafkas() -> None:
    block = block_after(ProducerIdBlock(1, 0), 2)
    assert block == ProducerIdBlock(2, 1000)
    assert encode_znode(block) == (
        b'{"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}'
    )
    # As Kafka 3.9 writes it (no spaces).
    assert decode_znode(b'{"version":1,"broker":3,"block_start":"2000","block_end":"2999"}') == (
        ProducerIdBlock(3, 2000)
    )
    for bad in (b"", b"{}", b'{"broker":1,"block_start":"9","block_end":"1"}'):
        with pytest.raises(ValueError):
            decode_znode(bad)


def test_file_blocks_survive_a_restart(tmp_path: Path) -> None:
    assert FileBlockStore(tmp_path).reserve(0) == ProducerIdBlock(0, 0)
    assert FileBlockStore(tmp_path).reserve(0) == ProducerIdBlock(0, 1000)
    assert (tmp_path / "producer-id-block").read_text() == "2000\n"


async def test_allocator_prefetches_the_next_block() -> None:
    given: list[ProducerIdBlock] = []

    async def allocate() -> ProducerIdBlock:
        given.append(block_after(given[-1] if given else None, 1))
        return given[-1]

    allocator = ProducerIdAllocator(allocate)
    with pytest.raises(KafkaError):
        allocator.next_id()
    await allocator.ensure_available()
    ids = [allocator.next_id() for _ in range(900)]
    assert ids == list(range(900)) and len(given) == 1
    await asyncio.sleep(0)  # the prefetch started at 90% runs
    assert len(given) == 2
    ids = [allocator.next_id() for _ in range(200)]
    assert ids == list(range(900, 1100))


async def test_allocator_without_a_block_answers_load_in_progress() -> None:
    async def allocate() -> ProducerIdBlock:
        raise OSError("zookeeper is away")

    allocator = ProducerIdAllocator(allocate)
    with pytest.raises(KafkaError) as raised:
        await allocator.ensure_available()
    assert raised.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
