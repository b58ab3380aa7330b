import pytest

from kbroker.security.plain import PlainError, authenticate_plain, plain_users

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="se\\"cret";'
)


def test_jaas_users() -> None:
    assert plain_users(JAAS) == {"admin": "admin-secret", "alice": 'se"cret'}


@pytest.mark.parametrize(
    "bad",
    [
        'org.example.Other required user_a="b";',
        'org.apache.kafka.common.security.plain.PlainLoginModule user_a="b";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"',
    ],
)
def test_jaas_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        plain_users(bad)


def test_plain_token() -> None:
    users = {"alice": "secret"}
    assert authenticate_plain(b"\x00alice\x00secret", users) == "alice"
    assert authenticate_plain(b"alice\x00alice\x00secret", users) == "alice"
    for token in (b"\x00alice\x00wrong", b"\x00bob\x00secret", b"alice\x00secret", b"\x00\x00x"):
        with pytest.raises(PlainError):
            authenticate_plain(token, users)
    with pytest.raises(PlainError, match="authorization id"):
        authenticate_plain(b"admin\x00alice\x00secret", users)
