"""The console producer and consumer: records between text lines and a topic.

Producer input, one record per line (the trailing newline removed):

    [HEADERS<TAB>][KEY<SEP>]VALUE

``HEADERS`` (only with ``parse_headers``) is ``name:value`` pairs separated by commas, as
Kafka's console producer reads them with ``parse.headers=true``; ``KEY<SEP>`` only with a key
separator. Records with a key go to the partition Kafka's default partitioner picks; records
without one are spread round-robin, unless a partition is given.

Consumer output, one line per record: ``[offset=N ][HEADERS<TAB>][KEY<SEP>]VALUE`` in text
mode, or one JSON object per line (topic, partition, offset, timestamp, key, value, headers).
Keys, values and headers are decoded as UTF-8 (invalid bytes replaced); a null prints as
``null``. With a group, the consumer starts at the group's committed offsets and commits
where it stopped, as a member of the group (kbroker/cli/ops/group_member.py): consumers
started with the same group share the topic's partitions.

The share consumer (``run_share_consumer``) is a member of a share group (KIP-932): members
read the same partitions, each record handed to one of them and acknowledged one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from kbroker.cli.ops.admin import OpsError, fetch, leaders, produce
from kbroker.cli.ops.group_member import HEARTBEAT_INTERVAL, GroupMember
from kbroker.cli.ops.output import Progress
from kbroker.client import EARLIEST, LATEST, KafkaClient
from kbroker.client_core.partitioner import partition_for_key
from kbroker.share_consumer import AcknowledgeType, ShareConsumer, ShareRecord
from wire.records.record import Record

Headers = list[tuple[str, bytes | None]]
Parsed = tuple[bytes | None, bytes | None, Headers]


@dataclass(frozen=True)
class ProducerOptions:
    topic: str
    partition: int | None = None
    key_separator: str | None = None
    parse_headers: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    acks: int = -1
    batch_size: int = 500


def parse_line(line: str, options: ProducerOptions) -> Parsed:
    """Split one input line into key, value and headers."""
    headers: Headers = [(k, v.encode()) for k, v in options.headers]
    if options.parse_headers:
        head, sep, line = line.partition("\t")
        if not sep:
            raise OpsError(f"no headers delimiter (TAB) in line {line!r}")
        for item in filter(None, head.split(",")):
            name, colon, value = item.partition(":")
            if not colon:
                raise OpsError(f"header {item!r} is not name:value")
            headers.append((name, value.encode()))
    key: bytes | None = None
    if options.key_separator is not None:
        raw_key, sep, line = line.partition(options.key_separator)
        if not sep:
            raise OpsError(f"no key separator {options.key_separator!r} in line {raw_key!r}")
        key = raw_key.encode()
    return key, line.encode(), headers


def _lines(source: TextIO) -> Iterator[str]:
    for line in source:
        yield line.rstrip("\n").rstrip("\r")


async def run_producer(
    client: KafkaClient, options: ProducerOptions, source: TextIO, progress: Progress
) -> dict[int, tuple[int, int]]:
    """Send every line of ``source``; returns partition -> (first offset, record count)."""
    partition_leaders = await leaders(client, options.topic, create=True)
    partitions = sorted(partition_leaders)
    if options.partition is not None and options.partition not in partition_leaders:
        raise OpsError(f"topic {options.topic!r} has no partition {options.partition}")
    round_robin = itertools.cycle(partitions)
    pending: dict[int, list[Parsed]] = {}
    written: dict[int, tuple[int, int]] = {}
    total = 0

    async def flush(partition: int) -> None:
        nonlocal total
        batch = pending.pop(partition, [])
        if not batch:
            return
        base = await produce(
            client,
            options.topic,
            partition,
            partition_leaders[partition],
            batch,
            acks=options.acks,
        )
        first, count = written.get(partition, (base, 0))
        written[partition] = (first, count + len(batch))
        total += len(batch)
        progress.update(f"{total} records sent")

    for line in _lines(source):
        record = parse_line(line, options)
        if options.partition is not None:
            partition = options.partition
        elif record[0] is not None:
            partition = partition_for_key(record[0], len(partitions))
        else:
            partition = next(round_robin)
        pending.setdefault(partition, []).append(record)
        if len(pending[partition]) >= options.batch_size:
            await flush(partition)
    for partition in list(pending):
        await flush(partition)
    return written


@dataclass
class ConsumerOptions:
    topic: str
    partitions: tuple[int, ...] = ()
    from_beginning: bool = False
    offset: int | None = None
    max_messages: int | None = None
    timeout_ms: int | None = None
    group: str | None = None
    print_key: bool = False
    print_headers: bool = False
    print_offset: bool = False
    key_separator: str = "\t"
    as_json: bool = False
    positions: dict[int, int] = field(default_factory=dict)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def format_record(record: Record, partition: int, options: ConsumerOptions) -> str:
    if options.as_json:
        return json.dumps(
            {
                "topic": options.topic,
                "partition": partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": _text(record.key),
                "value": _text(record.value),
                "headers": [[k, _text(v)] for k, v in record.headers],
            }
        )
    parts: list[str] = []
    if options.print_offset:
        parts.append(f"partition={partition} offset={record.offset} ")
    if options.print_headers:
        parts.append(",".join(f"{k}:{_text(v) or 'null'}" for k, v in record.headers) + "\t")
    if options.print_key:
        key = _text(record.key)
        parts.append(("null" if key is None else key) + options.key_separator)
    value = _text(record.value)
    parts.append("null" if value is None else value)
    return "".join(parts)


async def _start_positions(
    client: KafkaClient, options: ConsumerOptions, partitions: Iterable[int]
) -> dict[int, int]:
    wanted = sorted(partitions)
    if options.offset is not None:
        return dict.fromkeys(wanted, options.offset)
    positions: dict[int, int] = {}
    if options.group is not None:
        committed = await client.committed(options.group)
        positions = {
            p: committed[(options.topic, p)][0] for p in wanted if (options.topic, p) in committed
        }
    rest = [p for p in wanted if p not in positions]
    if rest:
        found = await client.list_offsets(
            [(options.topic, p) for p in rest], EARLIEST if options.from_beginning else LATEST
        )
        positions.update({p: found[(options.topic, p)] for p in rest})
    return positions


class _Session:
    """Which partitions the consumer reads and from where: all (or the chosen) partitions, or
    what the group assigns to this member, at the positions to fetch next."""

    def __init__(self, client: KafkaClient, options: ConsumerOptions) -> None:
        self.client = client
        self.options = options
        self.member = GroupMember(client, options.group, [options.topic]) if options.group else None
        self.partitions: tuple[int, ...] = ()
        self.last_heartbeat = time.monotonic()

    async def assign(self, available: Iterable[int]) -> None:
        options = self.options
        if self.member is not None:
            assignment = await self.member.join()
            self.partitions = tuple(sorted(assignment.get(options.topic, [])))
        else:
            self.partitions = options.partitions or tuple(sorted(available))
        options.positions = await _start_positions(self.client, options, self.partitions)
        self.last_heartbeat = time.monotonic()

    async def keep_membership(self, available: Iterable[int]) -> None:
        """Heartbeat when due; on a rebalance commit, then join again."""
        if self.member is None or time.monotonic() - self.last_heartbeat < HEARTBEAT_INTERVAL:
            return
        self.last_heartbeat = time.monotonic()
        if await self.member.heartbeat():
            return
        with contextlib.suppress(OpsError):
            # Kafka accepts a commit of the ending generation while the group rebalances.
            await self.member.commit(self.options.topic, self.options.positions)
        await self.assign(available)

    async def finish(self) -> None:
        if self.member is not None:
            await self.member.commit(self.options.topic, self.options.positions)
            await self.member.leave()


async def run_consumer(
    client: KafkaClient, options: ConsumerOptions, out: TextIO, progress: Progress
) -> int:
    """Print records until max_messages, timeout_ms without a record, or SIGINT/SIGTERM;
    returns the number printed. ``options.positions`` holds the next offsets at the end."""
    if options.group is not None and (options.partitions or options.offset is not None):
        raise OpsError("--group assigns partitions itself: drop --partition and --offset")
    partition_leaders = await leaders(client, options.topic, create=True)
    missing = [p for p in options.partitions if p not in partition_leaders]
    if missing:
        raise OpsError(f"topic {options.topic!r} has no partition {missing[0]}")
    session = _Session(client, options)
    await session.assign(partition_leaders)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    count = 0
    last_record = time.monotonic()
    wait_ms = min(500, options.timeout_ms or 500)
    try:
        while not stop.is_set():
            if options.max_messages is not None and count >= options.max_messages:
                break
            if (
                options.timeout_ms is not None
                and (time.monotonic() - last_record) * 1000 >= options.timeout_ms
            ):
                break
            await session.keep_membership(partition_leaders)
            by_leader: dict[int, dict[int, int]] = {}
            for p in session.partitions:
                by_leader.setdefault(partition_leaders[p], {})[p] = options.positions[p]
            if not by_leader:
                # A group member without partitions (more members than partitions) waits.
                await asyncio.sleep(wait_ms / 1000)
            for leader, offsets in sorted(by_leader.items()):
                try:
                    results = await fetch(
                        client, options.topic, leader, offsets, max_wait_ms=wait_ms
                    )
                except OpsError as exc:
                    # The leader moved or is being elected: refresh leaders and go on.
                    if not exc.retriable:
                        raise
                    await asyncio.sleep(0.5)
                    partition_leaders = await leaders(client, options.topic, create=True)
                    continue
                for partition, result in sorted(results.items()):
                    for record in result.records:
                        if options.max_messages is not None and count >= options.max_messages:
                            break
                        out.write(format_record(record, partition, options) + "\n")
                        options.positions[partition] = record.offset + 1
                        count += 1
                        last_record = time.monotonic()
                    out.flush()
            progress.update(f"{count} records")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    await session.finish()
    return count


@dataclass(frozen=True)
class ShareConsumerOptions:
    """``kbroker console-share-consumer``: as Kafka's kafka-console-share-consumer.sh, every
    printed record is acknowledged (explicit mode): ACCEPT, or RELEASE / REJECT for every
    ``release_every``-th / ``reject_every``-th record (counting from 1)."""

    topic: str
    group: str
    max_messages: int | None = None
    timeout_ms: int | None = None
    release_every: int | None = None
    reject_every: int | None = None
    print_key: bool = False
    print_offset: bool = False
    print_delivery_count: bool = False
    key_separator: str = "\t"


def share_acknowledge_type(count: int, options: ShareConsumerOptions) -> AcknowledgeType:
    """How the ``count``-th printed record (from 1) is acknowledged."""
    if options.reject_every and count % options.reject_every == 0:
        return AcknowledgeType.REJECT
    if options.release_every and count % options.release_every == 0:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


def format_share_record(record: ShareRecord, options: ShareConsumerOptions) -> str:
    parts: list[str] = []
    if options.print_offset:
        parts.append(f"partition={record.partition} offset={record.offset} ")
    if options.print_delivery_count:
        parts.append(f"delivery={record.delivery_count} ")
    if options.print_key:
        key = _text(record.key)
        parts.append(("null" if key is None else key) + options.key_separator)
    value = _text(record.value)
    parts.append("null" if value is None else value)
    return "".join(parts)


async def run_share_consumer(
    consumer: ShareConsumer, options: ShareConsumerOptions, out: TextIO, progress: Progress
) -> int:
    """Print and acknowledge records until max_messages, timeout_ms without a record, or
    SIGINT/SIGTERM; then close, which sends the acknowledgements and releases the records
    acquired but not printed. Returns the number printed."""
    consumer.subscribe([options.topic])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    count = 0
    last_record = time.monotonic()
    wait = min(500, options.timeout_ms or 500) / 1000
    try:
        while not stop.is_set():
            if options.max_messages is not None and count >= options.max_messages:
                break
            if (
                options.timeout_ms is not None
                and (time.monotonic() - last_record) * 1000 >= options.timeout_ms
            ):
                break
            for record in await consumer.poll(wait):
                if options.max_messages is not None and count >= options.max_messages:
                    # Left unacknowledged: released at close, for other members.
                    break
                out.write(format_share_record(record, options) + "\n")
                count += 1
                consumer.acknowledge(record, share_acknowledge_type(count, options))
                last_record = time.monotonic()
            out.flush()
            progress.update(f"{count} records")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await consumer.close()
    return count
