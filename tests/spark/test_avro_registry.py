"""valueFormat=avro: Avro values read as typed columns through the schema registry (a
micro-batch query), and rows written with a subject's latest schema. The registry here is
``kbroker schema-registry`` beside the tests' broker (the standalone registry)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_tests.broker_process import free_port
from tests.schema_registry.conftest import wait_registry
from tests.spark.conftest import REPO_ROOT, on_connector_spark
from tests.spark.helpers import make_topic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(on_connector_spark(), reason="the kbroker data source needs PySpark 4.2+"),
]

PAGE_VIEW = {
    "type": "record",
    "name": "PageView",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "millis", "type": "long"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture(scope="module")
def registry_url(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("standalone-registry") / "registry.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kbroker",
                "schema-registry",
                "--bootstrap-server",
                broker.bootstrap,
                "--listeners",
                f"http://127.0.0.1:{port}",
                "--replication-factor",
                "1",
            ],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_registry(url, timeout=60)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def test_micro_batch_reads_avro_values_as_typed_columns(
    spark: Any, broker: Any, registry_url: str, unique: str, tmp_path: Path
) -> None:
    make_topic(broker.bootstrap, unique, 2)
    sr = SchemaRegistryClient({"url": registry_url})
    # An older writer schema (no referrer) and the latest one: both decode to the latest.
    old = {**PAGE_VIEW, "fields": PAGE_VIEW["fields"][:3]}
    old_serializer = AvroSerializer(sr, json.dumps(old))
    new_serializer = AvroSerializer(sr, json.dumps(PAGE_VIEW))
    ctx = SerializationContext(unique, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    views = []
    for i in range(10):
        view = {"user": f"u{i % 3}", "page": f"/p{i}", "millis": 1000 + i}
        if i < 4:
            producer.produce(unique, key=b"k%d" % i, value=old_serializer(view, ctx))
            view["referrer"] = None
        else:
            view["referrer"] = f"/from{i}"
            producer.produce(unique, key=b"k%d" % i, value=new_serializer(view, ctx))
        views.append(view)
    assert producer.flush(30) == 0
    stream = (
        spark.readStream.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry_url)
        .load()
    )
    types = {f.name: f.dataType.simpleString() for f in stream.schema["value"].dataType.fields}
    assert types == {"user": "string", "page": "string", "millis": "bigint", "referrer": "string"}
    query = (
        stream.select("value.user", "value.page", "value.millis", "value.referrer")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive and query.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.page, r.user, r.millis, r.referrer) for r in rows) == sorted(
        (v["page"], v["user"], v["millis"], v["referrer"]) for v in views
    )

    # The sink: struct rows encoded with the subject's latest schema.
    sink = unique + "-out"
    make_topic(broker.bootstrap, sink, 1)
    sr.register_schema(f"{sink}-value", sr.get_latest_version(f"{unique}-value").schema)
    (
        spark.read.parquet(str(tmp_path / "out"))
        .selectExpr("struct(user, page, millis, referrer) as value")
        .write.format("kbroker")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry_url)
        .save()
    )
    back = (
        spark.read.format("kbroker")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", sink)
        .load()
        .collect()
    )
    deserializer = AvroDeserializer(sr)
    decoded = [
        deserializer(bytes(r.value), SerializationContext(sink, MessageField.VALUE)) for r in back
    ]
    assert sorted(decoded, key=lambda v: v["page"]) == sorted(views, key=lambda v: v["page"])
