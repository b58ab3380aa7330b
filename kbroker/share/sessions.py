"""Share sessions (KIP-932): what a share consumer fetches from this broker, so that each
ShareFetch need only name what changed. Pure: the shell keeps one ``ShareSessions``.

A session belongs to a (group, member) pair. ShareSessionEpoch 0 opens it (replacing an older
one of the same member, whose records the caller releases), -1 closes it (that request may only
acknowledge), any other value must be the session's next epoch: each ShareFetch and
ShareAcknowledge moves it on by one. Errors as Kafka's: SHARE_SESSION_NOT_FOUND for an epoch
of a session this broker does not have, INVALID_SHARE_SESSION_EPOCH for the wrong epoch,
SHARE_SESSION_LIMIT_REACHED beyond ``group.share.max.share.sessions``.

A session is bound to the connection that opened it, as Kafka's share session cache binds it:
when that connection closes the session ends, and the caller releases its member's records
(a crashed consumer's records go to the others at once, not when their locks expire).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from wire.errors import ErrorCode, KafkaError

OPEN_EPOCH = 0
CLOSE_EPOCH = -1

# (topic id, partition)
SharePartitionKey = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    # The connection that opened the session (kbroker.server.connection.CONNECTION_ID).
    connection_id: int = 0
    next_epoch: int = 1
    partitions: set[SharePartitionKey] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class SessionUse:
    """What a request did to its session: the session (None once closed) and the session it
    replaced or closed, whose member's records are to be released."""

    session: ShareSession | None
    ended: ShareSession | None = None


class ShareSessions:
    def __init__(self, max_sessions: int) -> None:
        self._max = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def use(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[SharePartitionKey] = (),
        forgotten: Iterable[SharePartitionKey] = (),
        connection_id: int = 0,
    ) -> SessionUse:
        """Open, continue or close the member's session for one request, which came on
        connection ``connection_id``; KafkaError when the epoch does not fit."""
        key = (group_id, member_id)
        current = self._sessions.get(key)
        if epoch == OPEN_EPOCH:
            if current is None and len(self._sessions) >= self._max:
                raise KafkaError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    "The limit of share sessions has been reached.",
                )
            session = ShareSession(group_id, member_id, connection_id, partitions=set(added))
            self._sessions[key] = session
            return SessionUse(session, current)
        if current is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND, "Share session not found.")
        if epoch == CLOSE_EPOCH:
            del self._sessions[key]
            return SessionUse(None, current)
        if epoch != current.next_epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, None)
        current.next_epoch += 1
        current.partitions.update(added)
        current.partitions.difference_update(forgotten)
        return SessionUse(current)

    def connection_closed(self, connection_id: int) -> list[ShareSession]:
        """End the sessions opened on a connection that closed; they are returned so that
        their members' records are released."""
        ended = [s for s in self._sessions.values() if s.connection_id == connection_id]
        for session in ended:
            del self._sessions[(session.group_id, session.member_id)]
        return ended

    def members_of(self, group_id: str) -> list[str]:
        return [m for g, m in self._sessions if g == group_id]
