"""The registry of one broker process against confluent-kafka's own Schema Registry client and
serializers, unchanged, and against the request/answer pairs of Confluent's API documentation;
broker-side validation; the CLI; everything surviving a restart."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.schema_registry.conftest import RegistryBroker, http, wait_registry

USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "favorite_number", "type": ["null", "int"], "default": None},
        ],
    }
)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)


def produce(
    bootstrap: str, topic: str, values: list[bytes], compression: str = "none"
) -> dict[int, KafkaError | None]:
    """Send ``values`` as one batch; delivery errors by index."""
    reports: dict[int, KafkaError | None] = {}
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 200,
            "retries": 0,
            "acks": "all",
            "compression.type": compression,
        }
    )
    for index, value in enumerate(values):

        def done(err: KafkaError | None, msg: Message, index: int = index) -> None:
            reports[index] = err

        producer.produce(topic, value=value, on_delivery=done)
    assert producer.flush(30) == 0
    return reports


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(300):
            if len(out) >= count:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value() or b"")
    finally:
        consumer.close()
    return out


def test_avro_serializer_and_deserializer(registry_broker: RegistryBroker) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.url})
    topic = unique("avro")
    create_topic(registry_broker.bootstrap, topic)
    serializer = AvroSerializer(sr, USER)
    ctx = SerializationContext(topic, MessageField.VALUE)
    users = [{"name": f"user{i}", "favorite_number": i if i % 2 else None} for i in range(20)]
    reports = produce(registry_broker.bootstrap, topic, [serializer(u, ctx) for u in users])
    assert not any(reports.values())
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.url}))
    got = [deserializer(v, ctx) for v in consume(registry_broker.bootstrap, topic, 20)]
    assert got == users
    latest = sr.get_latest_version(f"{topic}-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str)["name"] == "User"


def test_json_serializer_and_deserializer(registry_broker: RegistryBroker) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.url})
    topic = unique("json")
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
            "required": ["id"],
        }
    )
    serializer = JSONSerializer(schema, sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [{"id": i, "item": f"thing {i}"} for i in range(5)]
    assert not any(
        produce(registry_broker.bootstrap, topic, [serializer(o, ctx) for o in orders]).values()
    )
    deserializer = JSONDeserializer(None, schema_registry_client=sr)
    assert [deserializer(v, ctx) for v in consume(registry_broker.bootstrap, topic, 5)] == orders
    assert sr.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def user_message_class() -> Any:
    """A Protobuf message class built at run time (as protoc's generated code would be)."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="kbroker_test/user.proto", package="kbrokertest", syntax="proto3"
    )
    message = proto.message_type.add(name="User")
    message.field.add(name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(name="age", number=2, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kbrokertest.User"))


def test_protobuf_serializer_and_deserializer(registry_broker: RegistryBroker) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.url})
    topic = unique("proto")
    user_class = user_message_class()
    serializer = ProtobufSerializer(user_class, sr, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    users = [user_class(name=f"u{i}", age=20 + i) for i in range(5)]
    assert not any(
        produce(registry_broker.bootstrap, topic, [serializer(u, ctx) for u in users]).values()
    )
    deserializer = ProtobufDeserializer(user_class, {"use.deprecated.format": False})
    got = [deserializer(v, ctx) for v in consume(registry_broker.bootstrap, topic, 5)]
    assert [(u.name, u.age) for u in got] == [(u.name, u.age) for u in users]
    stored = sr.get_latest_version(f"{topic}-value").schema
    assert stored.schema_type == "PROTOBUF" and "message User" in stored.schema_str
    # The serialized form comes back for the deserializers that ask for it.
    assert sr.get_schema(sr.get_latest_version(f"{topic}-value").schema_id, fmt="serialized")


def test_incompatible_change_refused_under_backward_accepted_under_none(
    registry_broker: RegistryBroker,
) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.url})
    subject = unique("evolve") + "-value"
    first = sr.register_schema(subject, Schema(USER, "AVRO"))
    assert sr.register_schema(subject, Schema(USER, "AVRO")) == first
    breaking = json.loads(USER)
    breaking["fields"].append({"name": "email", "type": "string"})
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(subject, Schema(json.dumps(breaking), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert not sr.test_compatibility(subject, Schema(json.dumps(breaking), "AVRO"))
    sr.set_compatibility(subject, "NONE")
    assert sr.get_compatibility(subject) == "NONE"
    second = sr.register_schema(subject, Schema(json.dumps(breaking), "AVRO"))
    assert second != first
    assert sr.get_versions(subject) == [1, 2]


def test_confluent_documented_examples(registry_broker: RegistryBroker) -> None:
    """The requests of Confluent's "Schema Registry API Usage Examples" and the answers its
    documentation shows (ids taken from the answers: the registry is shared)."""
    url = registry_broker.url
    key, value = unique("Kafka") + "-key", unique("Kafka") + "-value"
    string = {"schema": '{"type": "string"}'}
    status, answer = http(f"{url}/subjects/{key}/versions", "POST", string)
    assert status == 200 and list(answer) == ["id"]
    schema_id = answer["id"]
    assert http(f"{url}/subjects/{value}/versions", "POST", string) == (200, {"id": schema_id})
    status, subjects = http(f"{url}/subjects")
    assert {key, value} <= set(subjects)
    assert http(f"{url}/subjects/{value}/versions") == (200, [1])
    assert http(f"{url}/schemas/ids/{schema_id}") == (200, {"schema": '"string"'})
    expected = {"subject": value, "version": 1, "id": schema_id, "schema": '"string"'}
    assert http(f"{url}/subjects/{value}/versions/1") == (200, expected)
    assert http(f"{url}/subjects/{value}/versions/latest") == (200, expected)
    assert http(f"{url}/subjects/{value}", "POST", string) == (200, expected)
    holders = http(f"{url}/schemas/ids/{schema_id}/versions")[1]
    assert {"subject": key, "version": 1} in holders
    assert {"subject": value, "version": 1} in holders
    compatible = f"{url}/compatibility/subjects/{value}/versions/latest"
    assert http(compatible, "POST", string) == (200, {"is_compatible": True})
    assert http(f"{url}/config/{value}", "PUT", {"compatibility": "FULL"}) == (
        200,
        {"compatibility": "FULL"},
    )
    assert http(f"{url}/config/{value}") == (200, {"compatibilityLevel": "FULL"})
    assert http(f"{url}/config")[1] == {"compatibilityLevel": "BACKWARD"}
    assert http(f"{url}/mode") == (200, {"mode": "READWRITE"})
    assert set(http(f"{url}/schemas/types")[1]) == {"AVRO", "JSON", "PROTOBUF"}
    # Errors, with Confluent's codes.
    missing = unique("missing")
    assert http(f"{url}/subjects/{missing}/versions") == (
        404,
        {"error_code": 40401, "message": f"Subject '{missing}' not found."},
    )
    assert http(f"{url}/subjects/{value}/versions/9")[1]["error_code"] == 40402
    assert http(f"{url}/schemas/ids/987654")[1]["error_code"] == 40403
    status, bad = http(f"{url}/subjects/{value}/versions", "POST", {"schema": '{"type": "nope"}'})
    assert (status, bad["error_code"]) == (422, 42201)
    assert http(f"{url}/subjects/{value}/versions/0")[1]["error_code"] == 42202
    assert http(f"{url}/config/{value}", "PUT", {"compatibility": "SOME"})[1]["error_code"] == 42203
    assert http(f"{url}/subjects/{value}", "POST", {"schema": '"int"'})[1]["error_code"] == 40403
    # Deletes: a version, then the subject soft, then for good.
    assert http(f"{url}/subjects/{value}/versions/1", "DELETE") == (200, 1)
    assert http(f"{url}/subjects/{value}?permanent=true", "DELETE") == (200, [1])
    assert http(f"{url}/subjects/{value}/versions/1?deleted=true")[1]["error_code"] == 40401
    assert http(f"{url}/subjects/{key}?permanent=true", "DELETE")[1]["error_code"] == 40405
    assert http(f"{url}/subjects/{key}", "DELETE") == (200, [1])
    assert http(f"{url}/subjects/{key}", "DELETE")[1]["error_code"] == 40404
    assert key in http(f"{url}/subjects?deleted=true")[1]
    assert http(f"{url}/subjects/{key}?permanent=true", "DELETE") == (200, [1])
    assert key not in http(f"{url}/subjects?deleted=true")[1]


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_validation_refuses_the_record_without_a_registered_id_alone(
    registry_broker: RegistryBroker, compression: str
) -> None:
    """confluent.value.schema.validation: the record without a registered id gets
    INVALID_RECORD (KIP-467 record_errors name it), librdkafka fails the rest of its batch as
    collateral, and those are written when sent again; in a compressed batch too, which
    validation decompresses."""
    bootstrap = registry_broker.bootstrap
    topic = unique("validated")
    create_topic(bootstrap, topic, **{"confluent.value.schema.validation": "true"})
    sr = SchemaRegistryClient({"url": registry_broker.url})
    serializer = AvroSerializer(sr, USER)
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = [serializer({"name": f"n{i}", "favorite_number": i}, ctx) for i in range(4)]
    unregistered = b"\x00\x00\x0f\x42\x40" + good[0][5:]  # id 1000000, nobody's
    values = [good[0], good[1], b"plain bytes", good[2], unregistered, good[3]]
    reports = produce(bootstrap, topic, values, compression)
    invalid = {
        i for i, e in reports.items() if e is not None and e.code() == KafkaError.INVALID_RECORD
    }
    assert invalid == {2, 4}
    retried = [values[i] for i in sorted(reports) if i not in invalid]
    assert not any(produce(bootstrap, topic, retried, compression).values())
    assert consume(bootstrap, topic, 4) == good
    # Another topic's subject does not count, and topics without validation take anything.
    plain = unique("plain")
    create_topic(bootstrap, plain)
    assert not any(produce(bootstrap, plain, [b"anything"]).values())


def kbroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbroker", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli(registry_broker: RegistryBroker, tmp_path: Any) -> None:
    url = ["--url", registry_broker.url]
    subject = unique("cli") + "-value"
    schema_file = tmp_path / "user.avsc"
    schema_file.write_text(USER)
    done = kbroker(
        "schemas", "register", *url, "--subject", subject, "--schema-file", str(schema_file)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"registered under {subject}: id ")
    listed = kbroker("schemas", "list", *url, "--json")
    assert subject in [s["subject"] for s in json.loads(listed.stdout)]
    got = kbroker("schemas", "get", *url, "--subject", subject)
    assert '"name": "User"' in got.stdout
    breaking = json.loads(USER)
    breaking["fields"].append({"name": "email", "type": "string"})
    checked = kbroker(
        "schemas", "compatibility", *url, "--subject", subject, "--schema", json.dumps(breaking)
    )
    assert checked.returncode == 1 and "NOT compatible" in checked.stdout
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in checked.stdout
    level = kbroker("schemas", "compatibility", *url, "--subject", subject, "--set", "none")
    assert level.stdout.strip() == "compatibility: NONE"
    deleted = kbroker("schemas", "delete", *url, "--subject", subject)
    assert deleted.returncode == 0 and "deleted version(s) 1" in deleted.stdout
    missing = kbroker("schemas", "get", *url, "--subject", subject)
    assert missing.returncode == 1 and "error code 40401" in missing.stderr


def test_everything_survives_a_restart(registry_broker: RegistryBroker) -> None:
    url = registry_broker.url
    subject = unique("durable") + "-value"
    schema_id = http(f"{url}/subjects/{subject}/versions", "POST", {"schema": USER})[1]["id"]
    http(f"{url}/config/{subject}", "PUT", {"compatibility": "FULL_TRANSITIVE"})
    before = http(f"{url}/subjects?deleted=true")[1]
    registry_broker.broker.stop()
    registry_broker.broker.start()
    wait_registry(url)
    assert http(f"{url}/subjects?deleted=true")[1] == before
    assert http(f"{url}/subjects/{subject}/versions/1")[1]["id"] == schema_id
    assert http(f"{url}/config/{subject}")[1] == {"compatibilityLevel": "FULL_TRANSITIVE"}
    # New ids continue after the old ones.
    other = http(f"{url}/subjects/{unique('after')}/versions", "POST", {"schema": '"bytes"'})
    assert other[1]["id"] > schema_id
