"""ACLs with a stock client (confluent-kafka, librdkafka) against a broker process: the
admin API creates, describes and deletes them; a principal with READ on one topic and its
group (and WRITE on it) uses them and is refused everything else with Kafka's errors.

The reader is the SCRAM user alice on a SASL_SSL listener; the broker's PLAINTEXT listener
(User:ANONYMOUS, a super user here) sets everything up, and bob, who has no ACL, sees
nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.security.secure_broker import PASSWORDS, start_secure_broker

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
ME = "User:alice"


def _acl(kind: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(kind, name, ResourcePatternType.LITERAL, ME, "*", op, AclPermissionType.ALLOW)


def _set_up(admin: AdminClient) -> None:
    for future in admin.create_topics(
        [NewTopic("t", 1, 1), NewTopic("u", 1, 1)], operation_timeout=10
    ).values():
        future.result(10)
    bindings = [
        _acl(ResourceType.TOPIC, "t", AclOperation.READ),
        _acl(ResourceType.TOPIC, "t", AclOperation.WRITE),
        _acl(ResourceType.GROUP, "g", AclOperation.READ),
        _acl(ResourceType.TOPIC, "u", AclOperation.ALTER),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(10)
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    assert sorted(admin.describe_acls(everything).result(10), key=str) == sorted(bindings, key=str)
    alter_u = AclBindingFilter(
        ResourceType.TOPIC, "u", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    (deleted,) = admin.delete_acls([alter_u]).values()
    assert deleted.result(10) == [bindings[3]]


def _users(admin: AdminClient) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upserts = [UserScramCredentialUpsertion(u, info, p.encode()) for u, p in PASSWORDS.items()]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(10)


def test_a_reader_of_one_topic_and_group(tmp_path: Path) -> None:
    secure = start_secure_broker(
        tmp_path / "broker", **AUTHORIZER, **{"super.users": "User:ANONYMOUS"}
    )
    try:
        setup = AdminClient({"bootstrap.servers": secure.process.bootstrap})
        _users(setup)
        _set_up(setup)
        settings = secure.client_settings("sasl_ssl_scram")
        bob = AdminClient(secure.client_settings("sasl_ssl_scram", "bob"))
        assert set(bob.list_topics(timeout=10).topics) == set()
        admin = AdminClient(settings)
        assert set(admin.list_topics(timeout=10).topics) == {"t"}
        read_u = _acl(ResourceType.TOPIC, "u", AclOperation.READ)
        with pytest.raises(KafkaException) as refused:
            admin.create_acls([read_u])[read_u].result(10)
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

        producer = Producer({**settings, "enable.idempotence": True})
        outcomes: dict[str, int] = {}

        def report(err: KafkaError | None, msg: object) -> None:
            outcomes[msg.topic()] = err.code() if err else 0  # type: ignore[attr-defined]

        producer.produce("t", b"hello", on_delivery=report)
        assert producer.flush(20) == 0
        producer.produce("u", b"nope", on_delivery=report)
        producer.flush(20)
        assert outcomes == {"t": 0, "u": KafkaError.TOPIC_AUTHORIZATION_FAILED}

        def consume(group: str) -> tuple[list[bytes], int | None]:
            consumer = Consumer(
                {
                    **settings,
                    "group.id": group,
                    "auto.offset.reset": "earliest",
                }
            )
            consumer.subscribe(["t"])
            values: list[bytes] = []
            error: int | None = None
            deadline = time.monotonic() + 30
            try:
                while not values and error is None and time.monotonic() < deadline:
                    msg = consumer.poll(0.5)
                    if msg is None:
                        continue
                    if msg.error():
                        error = msg.error().code()
                    else:
                        values.append(msg.value())
                if values:
                    consumer.commit(asynchronous=False)
            finally:
                consumer.close()
            return values, error

        assert consume("g") == ([b"hello"], None)
        assert consume("h") == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    finally:
        secure.process.stop()
