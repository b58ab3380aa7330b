"""The ``kbroker`` data source against a SASL_SSL listener with SCRAM-SHA-512: Kafka's client
security properties as ``kafka.``-prefixed options, as Spark's Kafka source takes them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.security.secure_broker import SecureBroker, start_secure_broker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = start_secure_broker(tmp_path_factory.mktemp("spark-secure"))
    try:
        admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result()
        yield broker
    finally:
        broker.process.stop()


def test_write_and_read_over_sasl_ssl(spark: Any, secure: SecureBroker, unique: str) -> None:
    settings = secure.client_settings("sasl_ssl_scram")
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(unique, 2, 1)])[unique].result(30)
    options = {
        "kafka.bootstrap.servers": settings["bootstrap.servers"],
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="alice-secret";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(secure.pki.ca),
    }
    rows = [(f"k{i}", f"v{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.format("kbroker").options(topic=unique, **options).mode("append").save()
    read = spark.read.format("kbroker").options(subscribe=unique, **options).load()
    got = sorted(bytes(r.value).decode() for r in read.collect())
    assert got == sorted(v for _, v in rows)
    # The same read without the credentials is refused, not silently empty.
    plain = {k: v for k, v in options.items() if not k.startswith("kafka.sasl")}
    with pytest.raises(Exception, match="(?i)sasl|authentication|closed"):
        spark.read.format("kbroker").options(subscribe=unique, **plain).load().collect()
