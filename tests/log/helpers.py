"""Builders shared by the storage tests."""

from __future__ import annotations

from wire.records.record import Record, build_batch, decode_records


class FakeClock:
    """A settable clock in seconds, like time.time."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


def batch(
    count: int = 1,
    *,
    timestamp: int = 1_000,
    value_size: int = 10,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    tag: int = 0,
) -> bytearray:
    """One v2 batch of `count` records (offsets from 0, timestamps timestamp..+count-1);
    each value starts with `tag` so tests can recognise the batch after a read."""
    records = [
        Record(i, timestamp + i, None, tag.to_bytes(4, "big") + b"x" * value_size)
        for i in range(count)
    ]
    return bytearray(
        build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )


def tags_of(data: bytes) -> list[tuple[int, int]]:
    """(offset, tag) of every record in `data`."""
    return [(r.offset, int.from_bytes(r.value[:4], "big")) for r in decode_records(data)]
