"""What a client knows about the cluster: brokers, partition leaders, coordinators.

A plain cache fed with responses and errors; the shells ask it where to send a request and
tell it what came back. It decides when its knowledge is stale:

- A partition's leader is forgotten on the errors that mean it moved or is unknown
  (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...): the next look-up refreshes Metadata.
  Produce v10+ and Fetch v16+ name the new leader and its address with those errors
  (KIP-951); a hint with a newer leader epoch than ours is taken at once, no refresh.
- A leader epoch never goes back (KIP-320): Metadata from a broker that has not heard of
  the newer leader yet does not undo what we learned.
- A coordinator is forgotten on NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE; the next
  look-up sends FindCoordinator again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wire.errors import ErrorCode
from wire.messages.find_coordinator_request import FindCoordinatorRequest
from wire.messages.find_coordinator_response import FindCoordinatorResponse
from wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from wire.messages.metadata_response import MetadataResponse

Address = tuple[str, int]
TopicPartition = tuple[str, int]

# FindCoordinator key types.
GROUP = 0
TRANSACTION = 1

# Errors after which a partition request is sent again once its leader is known again.
LEADER_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
# The errors that may come with a KIP-951 hint of the new leader.
_LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
# Errors after which a group or transaction request is retried (the coordinator moves or
# is still loading its state); the first two also mean the coordinator must be found again.
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    }
)
_COORDINATOR_MOVED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


@dataclass(frozen=True, slots=True)
class Leader:
    node_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class CoordinatorAnswer:
    """FindCoordinator's answer for one key, the same for every version."""

    error: ErrorCode
    node_id: int
    host: str
    port: int
    message: str


def metadata_request(
    topics: Sequence[str] | None, version: int, *, allow_auto_topic_creation: bool = False
) -> MetadataRequest:
    """Metadata of ``topics`` (None: every topic)."""
    return MetadataRequest(
        # Before v1 an empty list meant all topics and null was not allowed.
        topics=None
        if topics is None and version >= 1
        else [MetadataRequestTopic(name=t) for t in topics or []],
        # Before v4 the request cannot say "do not create"; the broker's setting decides.
        allow_auto_topic_creation=allow_auto_topic_creation or version < 4,
    )


def find_coordinator_request(key: str, key_type: int, version: int) -> FindCoordinatorRequest:
    if version >= 4:
        # KIP-699: v4 batches keys.
        return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    if version >= 1:
        return FindCoordinatorRequest(key=key, key_type=key_type)
    return FindCoordinatorRequest(key=key)


def find_coordinator_answer(response: FindCoordinatorResponse, version: int) -> CoordinatorAnswer:
    if version >= 4:
        c = response.coordinators[0]
        return CoordinatorAnswer(
            ErrorCode(c.error_code), c.node_id, c.host, c.port, c.error_message or ""
        )
    return CoordinatorAnswer(
        ErrorCode(response.error_code),
        response.node_id,
        response.host,
        response.port,
        response.error_message or "",
    )


def topic_partitions(
    response: MetadataResponse, *, include_internal: bool = True
) -> dict[str, list[int]]:
    """The topics of a Metadata response that exist (internal ones only with
    ``include_internal``), with their partition ids."""
    return {
        topic.name or "": sorted(p.partition_index for p in topic.partitions)
        for topic in response.topics
        if topic.error_code == ErrorCode.NONE and (include_internal or not topic.is_internal)
    }


class ClusterMetadata:
    """The client's cache of brokers, leaders and coordinators."""

    def __init__(self) -> None:
        self.brokers: dict[int, Address] = {}
        self.controller_id = -1
        self._leaders: dict[TopicPartition, Leader] = {}
        self._coordinators: dict[tuple[int, str], int] = {}

    # -- partitions ------------------------------------------------------------------------

    def update(self, response: MetadataResponse) -> None:
        """Learn brokers and leaders from a Metadata response."""
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        self.controller_id = response.controller_id
        for topic in response.topics:
            name = topic.name or ""
            if topic.error_code != ErrorCode.NONE:
                for tp in [tp for tp in self._leaders if tp[0] == name]:
                    del self._leaders[tp]
                continue
            for p in topic.partitions:
                tp = (name, p.partition_index)
                known = self._leaders.get(tp)
                if known is not None and known.epoch > p.leader_epoch >= 0:
                    continue
                if p.leader_id < 0:
                    self._leaders.pop(tp, None)
                else:
                    self._leaders[tp] = Leader(p.leader_id, p.leader_epoch)

    def leader(self, tp: TopicPartition) -> Leader | None:
        """The partition's leader, if known and reachable (None: refresh Metadata)."""
        leader = self._leaders.get(tp)
        if leader is None or leader.node_id not in self.brokers:
            return None
        return leader

    def leader_address(self, tp: TopicPartition) -> Address | None:
        leader = self.leader(tp)
        return None if leader is None else self.brokers[leader.node_id]

    def invalidate_leader(self, tp: TopicPartition) -> None:
        self._leaders.pop(tp, None)

    def partition_error(
        self,
        tp: TopicPartition,
        error: int,
        hint: tuple[int, int] | None = None,
        endpoints: Iterable[tuple[int, str, int]] = (),
    ) -> bool:
        """A request for ``tp`` failed with ``error``; ``hint`` is the (leader id, leader
        epoch) and ``endpoints`` the (node id, host, port) a KIP-951 response carries.
        True when the request is worth sending again (to the leader ``leader`` now gives)."""
        if error not in LEADER_ERRORS:
            return False
        if error in _LEADER_MOVED and hint is not None and self._take_hint(tp, hint, endpoints):
            return True
        self.invalidate_leader(tp)
        return True

    def _take_hint(
        self, tp: TopicPartition, hint: tuple[int, int], endpoints: Iterable[tuple[int, str, int]]
    ) -> bool:
        leader_id, epoch = hint
        known = self._leaders.get(tp)
        if leader_id < 0 or epoch < 0 or (known is not None and known.epoch >= epoch):
            return False
        addresses = {node: (host, port) for node, host, port in endpoints}
        if leader_id in addresses:
            self.brokers[leader_id] = addresses[leader_id]
        elif leader_id not in self.brokers:
            return False
        self._leaders[tp] = Leader(leader_id, epoch)
        return True

    # -- coordinators ----------------------------------------------------------------------

    def coordinator(self, key: str, key_type: int = GROUP) -> Address | None:
        """Where the coordinator of ``key`` is, if known (None: send FindCoordinator)."""
        node = self._coordinators.get((key_type, key))
        return None if node is None else self.brokers.get(node)

    def coordinator_found(self, key: str, key_type: int, answer: CoordinatorAnswer) -> bool:
        """Learn from FindCoordinator's answer; True when it names the coordinator."""
        if answer.error != ErrorCode.NONE:
            return False
        self.brokers[answer.node_id] = (answer.host, answer.port)
        self._coordinators[(key_type, key)] = answer.node_id
        return True

    def coordinator_error(self, key: str, key_type: int, error: int) -> bool:
        """A request to the coordinator of ``key`` failed with ``error``; True when it is
        worth sending again (after finding the coordinator again where it moved)."""
        if error in _COORDINATOR_MOVED:
            self._coordinators.pop((key_type, key), None)
        return error in COORDINATOR_ERRORS
