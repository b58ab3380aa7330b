"""Share sessions (KIP-932): what a share consumer fetches from this broker, so that each
ShareFetch need only name what changed. Pure: the shell keeps one ``ShareSessions``.

A session belongs to a (group, member) pair. ShareSessionEpoch 0 opens it (replacing an older
one of the same member, whose records the caller releases), -1 closes it (that request may only
acknowledge), any other value must be the session's next epoch: each ShareFetch and
ShareAcknowledge moves it on by one. Errors as Kafka's: SHARE_SESSION_NOT_FOUND for an epoch
of a session this broker does not have, INVALID_SHARE_SESSION_EPOCH for the wrong epoch,
SHARE_SESSION_LIMIT_REACHED beyond ``group.share.max.share.sessions``.
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
    ) -> SessionUse:
        """Open, continue or close the member's session for one request; KafkaError when
        the epoch does not fit."""
        key = (group_id, member_id)
        current = self._sessions.get(key)
        if epoch == OPEN_EPOCH:
            if current is None and len(self._sessions) >= self._max:
                raise KafkaError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    "The limit of share sessions has been reached.",
                )
            session = ShareSession(group_id, member_id, partitions=set(added))
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

    def members_of(self, group_id: str) -> list[str]:
        return [m for g, m in self._sessions if g == group_id]
