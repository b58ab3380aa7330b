"""Offset commits of a consumer group member at an older member epoch (KIP-848), checked
against the epoch at which the member got each partition, as Kafka 4.3 does
(ConsumerGroup.validateOffsetCommit and its assignment epoch validator): one partition the
member may not commit at that epoch fails the whole commit."""

from __future__ import annotations

from kbroker.group.consumer_group import ConsumerMember, MemberState
from tests.group.test_consumer_heartbeat import G, Harness, T, _replayed
from wire.errors import ErrorCode as E


def _commit(h: Harness, member_id: str, epoch: int, partitions: set[int]) -> E:
    """The error of an OffsetCommit v9 by ``member_id`` at ``epoch`` of topic t."""
    error = h.core.validate_commit(G, member_id, None, epoch, 9)
    if error != E.NONE:
        return error
    return h.core.assignment_epoch_error(G, member_id, epoch, [("t", p) for p in partitions])


def _member(h: Harness, member_id: str) -> ConsumerMember:
    member: ConsumerMember = h.group().consumer.members[member_id]
    return member


def _a_keeps_two_then_gets_two_more() -> tuple[Harness, set[int], set[int]]:
    """a owns all four partitions at epoch 1; b joins (epoch 2), a revokes two and keeps two
    (still assigned at epoch 1); b leaves (epoch 3) and a gets the two back at epoch 3."""
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    asked = h.heartbeat("a", 1)
    assert asked is not None and asked.assignment is not None
    kept = set(asked.assignment[T])
    h.heartbeat("a", 1, owned={T: frozenset(kept)})
    assert _member(h, "a").member_epoch == 2
    h.heartbeat("b", 2)
    assert h.heartbeat("b", -1) is not None
    back = h.heartbeat("a", 2)
    assert back is not None and back.member_epoch == 3
    assert back.assignment is not None and set(back.assignment[T]) == {0, 1, 2, 3}
    return h, kept, {0, 1, 2, 3} - kept


def test_reconciliation_keeps_the_epoch_a_partition_was_assigned_at() -> None:
    h, kept, new = _a_keeps_two_then_gets_two_more()
    a = _member(h, "a")
    assert {p: a.assignment_epoch(T, p) for p in kept} == dict.fromkeys(kept, 1)
    assert {p: a.assignment_epoch(T, p) for p in new} == dict.fromkeys(new, 3)


def test_a_commit_at_an_older_epoch_is_checked_per_partition() -> None:
    h, kept, new = _a_keeps_two_then_gets_two_more()
    assert _commit(h, "a", 3, kept | new) == E.NONE
    # Epoch 2: the partitions a had since epoch 1 may be committed, not those it got at 3,
    # and one of those fails the whole commit.
    assert _commit(h, "a", 2, kept) == E.NONE
    assert _commit(h, "a", 1, kept) == E.NONE
    assert _commit(h, "a", 2, new) == E.STALE_MEMBER_EPOCH
    assert _commit(h, "a", 2, kept | new) == E.STALE_MEMBER_EPOCH
    # A newer epoch than the member's.
    assert _commit(h, "a", 4, kept) == E.STALE_MEMBER_EPOCH
    # TxnOffsetCommit takes the same check.
    assert h.core.validate_txn_commit(G, "a", None, 2) == E.NONE


def test_a_partition_the_member_does_not_own_is_refused_at_an_older_epoch() -> None:
    h = Harness()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    asked = h.heartbeat("a", 1)
    assert asked is not None and asked.assignment is not None
    kept = set(asked.assignment[T])
    h.heartbeat("a", 1, owned={T: frozenset(kept)})
    got = h.heartbeat("b", 2)
    assert got is not None and got.assignment is not None
    moved = set(got.assignment[T])
    # a's commit at epoch 1 (a zombie's, or sent before its epoch 2 answer): what a kept
    # passes, what b now owns does not; a partition of a topic that does not exist neither.
    assert _commit(h, "a", 1, kept) == E.NONE
    assert _commit(h, "a", 1, moved) == E.STALE_MEMBER_EPOCH
    assert h.core.assignment_epoch_error(G, "a", 1, [("nope", 0)]) == E.STALE_MEMBER_EPOCH
    # b got its partitions at epoch 2: not at epoch 1.
    assert _commit(h, "b", 1, moved) == E.STALE_MEMBER_EPOCH


def test_partitions_pending_revocation_keep_their_epoch() -> None:
    h, kept, new = _a_keeps_two_then_gets_two_more()
    h.heartbeat("c", 0)
    h.heartbeat("a", 3)
    a = _member(h, "a")
    assert a.state is MemberState.UNREVOKED_PARTITIONS and a.member_epoch == 3
    revoking = set(a.pending_revocation[T])
    assert revoking
    # At epoch 2, a partition being revoked passes if a had it since epoch 1.
    for p in revoking:
        assert _commit(h, "a", 2, {p}) == (E.NONE if p in kept else E.STALE_MEMBER_EPOCH)


def test_the_epochs_survive_a_coordinator_failover() -> None:
    h, kept, new = _a_keeps_two_then_gets_two_more()
    other = Harness()
    other.core.unload(0)
    other.core.begin_load(0)
    other.core.complete_load(0, _replayed(h.stored))
    a = other.core._groups[G].consumer.members["a"]
    assert a == _member(h, "a")
    assert _commit(other, "a", 2, kept) == E.NONE
    assert _commit(other, "a", 2, new) == E.STALE_MEMBER_EPOCH


def test_a_transactional_commit_without_member_passes_a_group_with_members() -> None:
    """Kafka 4.3 lets a TxnOffsetCommit with generation -1, no member id and no instance id
    through a consumer group that has members; an OffsetCommit without member is refused."""
    h = Harness()
    h.heartbeat("a", 0)
    assert h.core.validate_txn_commit(G, "", None, -1) == E.NONE
    assert h.core.assignment_epoch_error(G, "", -1, [("t", 0)]) == E.NONE
    assert h.core.validate_txn_commit(G, "", "i-1", -1) == E.UNKNOWN_MEMBER_ID
    assert h.core.validate_commit(G, "", None, -1, 9) == E.UNKNOWN_MEMBER_ID
