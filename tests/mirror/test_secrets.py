"""The mirror links' secrets are stored encrypted (kbroker/mirror/secrets.py), in Kafka's
encoding of dynamic password configs, and never in clear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbroker.handlers.admin_topics import handle_create_topics
from kbroker.handlers.configs import handle_incremental_alter_configs
from kbroker.mirror.link_configs import MIRROR_LINK_RESOURCE
from kbroker.mirror.secrets import (
    PasswordEncoder,
    SecretError,
    decode_secrets,
    encode_secrets,
    parse,
)
from tests.handlers_admin.conftest import header, make_broker, roundtrip
from wire.errors import ErrorCode, KafkaError
from wire.messages import incremental_alter_configs_request as iac
from wire.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)

# Encoded by Kafka 3.9's own encoder (PasswordEncoder.encrypting(secret,
# "PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding", 128, 4096), kafka-server-common-3.9.0.jar)
# with the secret "kafka-3.9-secret".
KAFKA_ENCODED = (
    "initializationVector:w06AE2Ozk3rZPd9yy6AMrA==,keyLength:128,salt:6pUH+veBlVKDE6MGiugcZe56s"
    "wY15DXnCVOzZsuCWksaGZ86NpTS0pISMNuLfTR9uaAm7zsKA+jC6ddyZJbl/6/MxRFK/4dJpWR9YkRkkf232G68Bfc"
    "rJlTvXRIOZROaIfqE4ivbn274pN8TcM//ZtS5u1rxLBxIFWtnCftpCBL43g2oq5VNQMqnnhyOaW67nxYECTX5oFHm1"
    "nF+ufAz3tWCSxiXbNrFfdI5KQ5jYewQmyaP6sh5A+whpjqA82UbAd9S4OmlXOl3BAMqgfjuuQuzR9S5FeMv37IE2yn"
    "0j90YQx9tlGs72nNvBam2fAMsTTIborYpb9NCxm5nB4RcrA==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512"
    ",cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096,passwordLength:22,encryptedPassword:"
    "Wsd9XamUFgLVWErBupsb4p/U5/NS8BJz7sfdga9QYEA="
)
JAAS = "kbroker.mirror.source.config.sasl.jaas.config"
LINE = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="m" password="p-42";'
)
SASL = {
    "kbroker.mirror.source.bootstrap": "127.0.0.1:1",
    "kbroker.mirror.source.config.security.protocol": "SASL_PLAINTEXT",
    "kbroker.mirror.source.config.sasl.mechanism": "PLAIN",
    JAAS: LINE,
}


def test_kafka_encoded_passwords_decode() -> None:
    assert PasswordEncoder("kafka-3.9-secret").decode(KAFKA_ENCODED) == 'password="s3cret-é😀";'
    with pytest.raises(SecretError):
        PasswordEncoder("another secret").decode(KAFKA_ENCODED)


def test_encoded_in_kafkas_form_with_fresh_salt_and_iv() -> None:
    encoder = PasswordEncoder("s", iterations=1024, key_length=256)
    first, second = encoder.encode("pw😀"), encoder.encode("pw😀")
    assert first != second
    fields = parse(first)
    assert fields is not None
    assert (fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"]) == (
        "PBKDF2WithHmacSHA512",
        "AES/CBC/PKCS5Padding",
    )
    # Java's String.length() of the password, as Kafka checks it.
    assert (fields["keyLength"], fields["iterations"], fields["passwordLength"]) == (
        "256",
        "1024",
        "4",
    )
    assert PasswordEncoder("s").decode(second) == "pw😀"


def test_only_new_secrets_are_encoded_and_none_without_a_secret() -> None:
    encoder = PasswordEncoder("s")
    stored = encode_secrets(SASL, {}, encoder)
    assert stored[JAAS] != LINE and parse(stored[JAAS]) is not None
    assert {k: v for k, v in stored.items() if k != JAAS} == {
        k: v for k, v in SASL.items() if k != JAAS
    }
    # Kept as stored when unchanged (an incremental change of another config).
    assert encode_secrets(stored, stored, encoder) == stored
    assert decode_secrets(stored, encoder) == SASL
    with pytest.raises(KafkaError) as refused:
        encode_secrets(SASL, {}, None)
    assert refused.value.code == ErrorCode.INVALID_CONFIG
    assert "set password.encoder.secret" in refused.value.message
    with pytest.raises(SecretError):
        decode_secrets(stored, None)


async def create_mirror(broker: object, name: str) -> tuple[int, str | None]:
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=1,
                replication_factor=1,
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in SASL.items()],
            )
        ],
        timeout_ms=30000,
    )
    response = await handle_create_topics(broker, header(19, 7), roundtrip(request, 7), 7)
    result = roundtrip(response, 7).topics[0]
    return result.error_code, result.error_message


async def set_link(broker: object, name: str) -> int:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=MIRROR_LINK_RESOURCE,
                resource_name=name,
                configs=[
                    iac.AlterableConfig(name=k, config_operation=0, value=v)
                    for k, v in SASL.items()
                ],
            )
        ]
    )
    response = await handle_incremental_alter_configs(
        broker, header(44, 1), roundtrip(request, 1), 1
    )
    return int(roundtrip(response, 1).responses[0].error_code)


async def test_without_a_broker_secret_link_secrets_are_refused(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path)
    code, message = await create_mirror(broker, "m")
    assert code == ErrorCode.INVALID_CONFIG
    assert message is not None and JAAS in message and "password.encoder.secret" in message
    assert broker.metadata.topic("m") is None
    assert await set_link(broker, "eu") == ErrorCode.INVALID_CONFIG
    assert broker.metadata.mirror_links() == {}


async def test_link_secrets_are_stored_encrypted(tmp_path: Path) -> None:
    broker = await make_broker(tmp_path, **{"password.encoder.secret": "cluster-secret"})
    assert (await create_mirror(broker, "m"))[0] == ErrorCode.NONE
    assert await set_link(broker, "eu") == ErrorCode.NONE
    state = (tmp_path / "d1" / "__kbroker_metadata.json").read_text()
    assert "p-42" not in state
    stored = json.loads(state)
    encoder = PasswordEncoder("cluster-secret")
    assert encoder.decode(stored["mirror_links"]["eu"][JAAS]) == LINE
    topic = broker.metadata.topic("m")
    assert topic is not None and encoder.decode(topic.configs[JAAS]) == LINE
