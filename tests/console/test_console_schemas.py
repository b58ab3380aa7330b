"""The message browser decoding values through kbroker's schema registry: Avro, Protobuf and
JSON Schema values written by confluent-kafka's serializers are shown as JSON, each naming
its schema id; a value whose schema id is unknown is shown in hex with the registry's
answer."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.console.support import ConsoleProcess, console_process, create_topic, produce
from tests.schema_registry.conftest import RegistryBroker, start_registry_broker

pytestmark = pytest.mark.slow
SHOWN = re.compile(r'<pre class="value kind-([a-z-]+)" data-kind="[a-z-]+">(.*?)</pre>', re.S)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryBroker]:
    running = start_registry_broker(tmp_path_factory.mktemp("console-registry"))
    try:
        yield running
    finally:
        running.broker.stop()


@pytest.fixture(scope="module")
def console(registry: RegistryBroker) -> Iterator[ConsoleProcess]:
    with console_process(registry.bootstrap, "--schema-registry", registry.url) as running:
        yield running


def order_class() -> Any:
    """A Protobuf message class made at run time, as protoc's generated code would be."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="console_test/order.proto", package="consoletest", syntax="proto3"
    )
    message = proto.message_type.add(name="Order")
    message.field.add(name="item", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(name="count", number=2, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("consoletest.Order"))


async def shown_values(console: ConsoleProcess, topic: str) -> list[tuple[str, str]]:
    async with aiohttp.ClientSession() as session:
        url = f"{console.url}/topics/{topic}/messages?mode=oldest"
        async with session.get(url) as answer:
            assert answer.status == 200
            page = await answer.text()
    cells = re.findall(r'<td class="val">(.*?)</td>', page, re.S)
    return [(m.group(1), html.unescape(m.group(2))) for c in cells for m in [SHOWN.search(c)] if m]


async def test_avro_protobuf_and_json_schema_values_are_decoded(
    registry: RegistryBroker, console: ConsoleProcess
) -> None:
    sr = SchemaRegistryClient({"url": registry.url})
    avro_schema = json.dumps(
        {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
    )
    json_schema = json.dumps(
        {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    )
    cases = [
        ("avro-users", AvroSerializer(sr, avro_schema), {"name": "<i>Ada</i>"}, "avro"),
        ("json-orders", JSONSerializer(json_schema, sr), {"id": 7}, "json-schema"),
    ]
    order = order_class()
    proto = ProtobufSerializer(order, sr, {"use.deprecated.format": False})
    cases.append(("proto-orders", proto, order(item="pen", count=3), "protobuf"))
    for topic, serializer, value, _ in cases:
        create_topic(registry.bootstrap, topic)
        ctx = SerializationContext(topic, MessageField.VALUE)
        produce(registry.bootstrap, topic, [serializer(value, ctx)])
    for topic, _, value, kind in cases:
        ((shown_kind, text),) = await shown_values(console, topic)
        assert shown_kind == kind
        expected = value if isinstance(value, dict) else {"item": "pen", "count": 3}
        assert json.loads(text) == expected
    # A framed value whose schema id the registry does not know: hex, and why.
    create_topic(registry.bootstrap, "unknown-schema")
    produce(registry.bootstrap, "unknown-schema", [b"\x00\x00\x00\x03\xe7payload"])
    async with aiohttp.ClientSession() as session:
        url = f"{console.url}/topics/unknown-schema/messages"
        async with session.get(url) as answer:
            page = await answer.text()
    assert 'data-kind="hex"' in page and "registry answered 404" in page
