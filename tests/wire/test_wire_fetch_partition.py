"""FetchedPartitionData writes exactly what the generated PartitionData writer writes."""

from __future__ import annotations

import pytest

from wire.fetch_partition import FetchedPartitionData
from wire.messages.fetch_response import AbortedTransaction, LeaderIdAndEpoch, PartitionData
from wire.primitives import Writer


class Region:
    """Stands for a file region: has nbytes, is not bytes-like."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def encoded(data: PartitionData, version: int) -> list[bytes | object]:
    w = Writer()
    data.write(w, version)
    return w.parts()


def generated_twin(fast: FetchedPartitionData) -> PartitionData:
    return PartitionData(
        partition_index=fast.partition_index,
        error_code=fast.error_code,
        high_watermark=fast.high_watermark,
        last_stable_offset=fast.last_stable_offset,
        log_start_offset=fast.log_start_offset,
        aborted_transactions=fast.aborted_transactions,
        records=fast.records,
    )


REGION = Region(300)
CASES = {
    "nothing new": dict(records=b""),
    "bytes": dict(records=b"\x01" * 200),
    "file region": dict(records=REGION),
    "null aborted": dict(records=REGION, aborted_transactions=None),
    "nothing new, null aborted": dict(records=b"", aborted_transactions=None),
    "aborted": dict(
        records=REGION,
        aborted_transactions=[AbortedTransaction(producer_id=7, first_offset=3)],
    ),
}


@pytest.mark.parametrize("version", range(0, 19))
@pytest.mark.parametrize("case", CASES)
def test_bytes_match_the_generated_writer(version: int, case: str) -> None:
    fields = dict(CASES[case])
    records = fields.pop("records")
    fast = FetchedPartitionData(5, 2**40, 2**40 - 9, 17, records, **fields)
    if fields.get("aborted_transactions", []) is None:
        fast.aborted_transactions = None
    if version < 4 and fast.aborted_transactions:
        return  # the generated writer drops the field below v4; nothing to compare
    assert encoded(fast, version) == encoded(generated_twin(fast), version)


def test_a_field_set_after_construction_is_written() -> None:
    fast = FetchedPartitionData(1, 10, 10, 0, b"")
    fast.current_leader = LeaderIdAndEpoch(leader_id=2, leader_epoch=4)
    twin = generated_twin(fast)
    twin.current_leader = LeaderIdAndEpoch(leader_id=2, leader_epoch=4)
    assert encoded(fast, 16) == encoded(twin, 16)
    assert encoded(fast, 16) != encoded(FetchedPartitionData(1, 10, 10, 0, b""), 16)


def test_it_decodes_as_the_partition_it_stands_for() -> None:
    from wire.primitives import Reader

    fast = FetchedPartitionData(3, 100, 90, 4, b"\x02" * 10)
    w = Writer()
    fast.write(w, 16)
    decoded = PartitionData.read(Reader(w.getvalue()), 16)
    assert (decoded.partition_index, decoded.high_watermark, decoded.last_stable_offset) == (
        3,
        100,
        90,
    )
    assert (decoded.log_start_offset, bytes(decoded.records or b"")) == (4, b"\x02" * 10)
