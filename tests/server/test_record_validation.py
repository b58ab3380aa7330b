"""Keyless records on a compacted topic: INVALID_RECORD with record_errors (KIP-467)."""

from __future__ import annotations

from kbroker.broker import Broker
from tests.server.conftest import RawClient
from tests.server.test_data_path import create_topic, produce
from wire.errors import ErrorCode
from wire.records.compression import ZSTD
from wire.records.record import Record, build_batch


def _batch(keys: list[bytes | None], compression: int = 0) -> bytes:
    return build_batch(
        [Record(i, 1_700_000_000_000, k, b"v", []) for i, k in enumerate(keys)],
        compression=compression,
    )


async def test_keyless_records_are_named_by_their_batch_index(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "compacted", cleanup_policy="compact")
    for compression in (0, ZSTD):
        response = await produce(client, "compacted", _batch([b"a", None, b"c", None], compression))
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in partition.record_errors] == [1, 3]
        assert "without key" in (partition.record_errors[0].batch_index_error_message or "")
        assert "compacted-0" in (partition.error_message or "")
    # Nothing of the refused batches was appended; a keyed batch is.
    ok = await produce(client, "compacted", _batch([b"a", b"b"]))
    assert ok.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert ok.responses[0].partition_responses[0].base_offset == 0


async def test_keyless_records_are_fine_on_a_delete_topic(
    broker: Broker, client: RawClient
) -> None:
    await create_topic(client, "plain")
    response = await produce(client, "plain", _batch([None, None]))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
