"""A secured broker process shared by the security tests that use real clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.security.secure_broker import PASSWORDS, SecureBroker, start_secure_broker


@pytest.fixture(scope="package")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = start_secure_broker(tmp_path_factory.mktemp("secure"))
    try:
        admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(mechanism, 4096), password.encode()
            )
            for user, password in PASSWORDS.items()
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result()
        yield broker
    finally:
        broker.process.stop()
