"""The schema registry: lookups per second, and produce throughput with broker-side schema
validation on versus off, in one run against one broker of its own.

- Uncached lookups: ``GET /schemas/ids/{id}`` over one keep-alive connection per thread (what a
  deserializer does the first time it meets an id), and ``POST /subjects/{s}`` (a lookup by
  schema text, which the registry parses: what a serializer with auto.register.schemas=false
  does the first time); cached: confluent-kafka's SchemaRegistryClient answering
  ``get_schema`` from its cache, as it does for every later record.
- Produce: kcat (its records in C) writes records in the registry's framing (magic byte, schema
  id, payload) to two topics, one with ``confluent.value.schema.validation=true``; runs
  alternate between the topics and the median of ``--repeat`` runs is kept, with the broker's
  CPU time per record (user and system, all threads) of each run: under a shared machine's
  load it varies less than the throughput does.

    .venv/bin/python bench/schema_registry.py [--records 2000000] [--record-size 100] [--repeat 3]
        [--compression none|gzip|snappy|lz4|zstd]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from brokers import cpu_seconds  # noqa: E402
from throughput import Settings, kcat_command, kcat_properties, own_broker  # noqa: E402

from compat_tests.broker_process import free_port  # noqa: E402

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Event",
        "fields": [{"name": "payload", "type": "bytes"}, {"name": "n", "type": "long"}],
    }
)


def http_lookups(
    port: int, path: str, method: str, body: bytes | None, total: int, threads: int
) -> float:
    """Requests per second over ``threads`` keep-alive connections."""
    per_thread = total // threads

    def work() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        for _ in range(per_thread):
            conn.request(method, path, body=body, headers=headers)
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200, answer.status
        conn.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return per_thread * threads / (time.perf_counter() - start)


def cached_lookups(url: str, schema_id: int, total: int) -> float:
    client = SchemaRegistryClient({"url": url})
    client.get_schema(schema_id)
    start = time.perf_counter()
    for _ in range(total):
        client.get_schema(schema_id)
    return total / (time.perf_counter() - start)


def produce(bootstrap: str, topic: str, lines: Path, records: int, compression: str) -> float:
    kcat, env = kcat_command()
    settings = Settings(
        bootstrap=bootstrap,
        topic=topic,
        records=records,
        record_size=0,
        producers=1,
        partitions=1,
        acks="1",
        linger_ms=5,
        batch_size=1_000_000,
        compression=compression,
    )
    cmd = [
        kcat,
        "-b",
        bootstrap,
        "-P",
        "-q",
        "-t",
        topic,
        *kcat_properties(settings),
        "-l",
        str(lines),
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"kcat exited with {done.returncode}")
    return records / elapsed


def stored(bootstrap: str, topic: str) -> int:
    """The records of the topic's one partition (its high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    parser.add_argument("--lookups", type=int, default=5_000)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with own_broker(**{"schema.registry.listeners": url}) as broker:
        bootstrap = broker.bootstrap
        suffix = uuid.uuid4().hex[:6]
        plain, validated = f"plain-{suffix}", f"validated-{suffix}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics(
            [
                NewTopic(plain, 1, 1),
                NewTopic(validated, 1, 1, config={"confluent.value.schema.validation": "true"}),
            ]
        )
        for future in futures.values():
            future.result(30)
        deadline = time.monotonic() + 30
        while True:
            try:
                registry = SchemaRegistryClient({"url": url})
                schema_id = registry.register_schema(f"{validated}-value", Schema(SCHEMA, "AVRO"))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        registry.register_schema(f"{plain}-value", Schema(SCHEMA, "AVRO"))

        figures: dict[str, object] = {}
        by_id = f"/schemas/ids/{schema_id}"
        figures["lookup_by_id_per_s_1_thread"] = http_lookups(
            port, by_id, "GET", None, args.lookups, 1
        )
        figures["lookup_by_id_per_s_4_threads"] = http_lookups(
            port, by_id, "GET", None, args.lookups, 4
        )
        body = json.dumps({"schema": SCHEMA}).encode()
        figures["lookup_by_schema_per_s_1_thread"] = http_lookups(
            port, f"/subjects/{validated}-value", "POST", body, args.lookups // 5, 1
        )
        figures["cached_lookup_per_s"] = cached_lookups(url, schema_id, args.lookups * 20)

        # Records in the registry's framing; no byte of them is a newline (kcat -l splits there).
        prefix = b"\x00" + schema_id.to_bytes(4, "big")
        assert b"\n" not in prefix
        value = prefix + b"x" * max(args.record_size - len(prefix), 0)
        with tempfile.TemporaryDirectory() as tmp:
            lines = Path(tmp) / "records.txt"
            lines.write_bytes((value + b"\n") * args.records)
            runs: dict[str, list[float]] = {"off": [], "on": []}
            cpu_us: dict[str, list[float]] = {"off": [], "on": []}
            pid = broker.pid
            if pid is None:
                raise RuntimeError("the broker is not running")
            for _ in range(args.repeat):
                for name, topic in (("off", plain), ("on", validated)):
                    before = cpu_seconds(pid)
                    runs[name].append(
                        produce(bootstrap, topic, lines, args.records, args.compression)
                    )
                    cpu_us[name].append((cpu_seconds(pid) - before) / args.records * 1e6)
        # A fast run of the validated topic must not be one whose records were refused.
        sent = args.repeat * args.records
        for topic in (plain, validated):
            held = stored(bootstrap, topic)
            if held != sent:
                raise RuntimeError(f"{topic} holds {held} records, not the {sent} sent")
        off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
        figures["produce_msgs_per_s_validation_off"] = off
        figures["produce_msgs_per_s_validation_on"] = on
        figures["produce_on_over_off"] = on / off
        cpu_off, cpu_on = statistics.median(cpu_us["off"]), statistics.median(cpu_us["on"])
        figures["broker_cpu_us_per_record_validation_off"] = cpu_off
        figures["broker_cpu_us_per_record_validation_on"] = cpu_on
        figures["broker_cpu_off_over_on"] = cpu_off / cpu_on
        figures["runs"] = runs
        figures["broker_cpu_us_per_record_runs"] = cpu_us
        figures["records"] = args.records
        figures["record_size"] = len(value)
        figures["compression"] = args.compression
    for name, figure in figures.items():
        print(f"{name}: {figure if isinstance(figure, (dict, int, str)) else f'{figure:,.2f}'}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
