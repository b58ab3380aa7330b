"""Share sessions (kbroker/share/sessions.py) without sockets: epochs, and the binding of a
session to the connection that opened it (KIP-932; Kafka 4.3 ends a member's session, and
releases its records, when that connection closes)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.share.sessions import CLOSE_EPOCH, OPEN_EPOCH, ShareSessions
from wire.errors import ErrorCode, KafkaError

KEY = (uuid.UUID(int=7), 0)


def test_a_connection_closing_ends_the_sessions_it_opened() -> None:
    sessions = ShareSessions(10)
    sessions.use("g", "a", OPEN_EPOCH, [KEY], connection_id=1)
    sessions.use("g", "b", OPEN_EPOCH, [KEY], connection_id=2)
    sessions.use("h", "c", OPEN_EPOCH, [KEY], connection_id=1)
    ended = sessions.connection_closed(1)
    assert sorted((s.group_id, s.member_id, s.partitions == {KEY}) for s in ended) == [
        ("g", "a", True),
        ("h", "c", True),
    ]
    assert sessions.members_of("g") == ["b"]
    assert sessions.members_of("h") == []
    with pytest.raises(KafkaError) as found:
        sessions.use("g", "a", 1, connection_id=1)
    assert found.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert sessions.connection_closed(1) == []


def test_a_session_opened_again_belongs_to_its_new_connection() -> None:
    sessions = ShareSessions(10)
    sessions.use("g", "a", OPEN_EPOCH, [KEY], connection_id=1)
    replaced = sessions.use("g", "a", OPEN_EPOCH, [KEY], connection_id=2)
    assert replaced.ended is not None and replaced.ended.connection_id == 1
    # The old connection closing later ends nothing: its session was replaced.
    assert sessions.connection_closed(1) == []
    assert [s.member_id for s in sessions.connection_closed(2)] == ["a"]


def test_a_session_closed_by_its_member_is_not_ended_again_by_its_connection() -> None:
    sessions = ShareSessions(10)
    sessions.use("g", "a", OPEN_EPOCH, [KEY], connection_id=1)
    sessions.use("g", "a", 1, connection_id=1)
    closed = sessions.use("g", "a", CLOSE_EPOCH, connection_id=1)
    assert closed.session is None and closed.ended is not None
    assert sessions.connection_closed(1) == []
