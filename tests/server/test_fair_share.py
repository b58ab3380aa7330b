"""The fair-share rule for the request-memory pool (issue 29, item 1), without sockets."""

from __future__ import annotations

from kbroker.server.fair_share import FairShare, Verdict

MB = 1024 * 1024


def test_small_requests_only_need_room_in_the_pool() -> None:
    share = FairShare(100 * MB, small_request_bytes=MB)
    share.hold("attacker", "10.0.0.1", 75 * MB)
    assert share.decide("client", "10.0.0.2", MB, MB // 2, pool_used=80 * MB) is Verdict.GRANTED
    assert share.decide("client", "10.0.0.2", MB, MB, pool_used=100 * MB) is Verdict.POOL_FULL


def test_partial_large_requests_never_take_the_reserve() -> None:
    share = FairShare(100 * MB, small_request_bytes=MB, reserve_fraction=0.25)
    for i in range(74):
        share.hold(f"c{i}", f"10.0.1.{i}", MB)
    assert share.large_held == 74 * MB
    big = 100 * MB
    assert share.decide("c0", "10.0.1.0", big, MB, pool_used=74 * MB) is Verdict.OVER_SHARE
    assert share.decide("new", "10.0.2.1", big, 2 * MB, pool_used=74 * MB) is Verdict.OVER_SHARE
    assert share.decide("new", "10.0.2.1", MB, 2 * MB, pool_used=74 * MB) is Verdict.GRANTED


def test_a_connection_gets_its_part_of_its_address_share() -> None:
    share = FairShare(100 * MB, small_request_bytes=MB, reserve_fraction=0.25)
    big = 100 * MB
    # One address, three connections: each may hold a third of the 75 MB.
    share.hold("a", "10.0.0.1", 20 * MB)
    share.hold("b", "10.0.0.1", 20 * MB)
    assert share.decide("c", "10.0.0.1", big, 25 * MB, pool_used=40 * MB) is Verdict.GRANTED
    assert share.decide("c", "10.0.0.1", big, 26 * MB, pool_used=40 * MB) is Verdict.OVER_SHARE
    # a and b alone: each may hold half.
    assert share.decide("a", "10.0.0.1", big, 17 * MB, pool_used=40 * MB) is Verdict.GRANTED
    assert share.decide("a", "10.0.0.1", big, 18 * MB, pool_used=40 * MB) is Verdict.OVER_SHARE


def test_an_address_with_many_connections_leaves_other_addresses_their_share() -> None:
    share = FairShare(100 * MB, small_request_bytes=MB, reserve_fraction=0.25)
    big = 100 * MB
    for i in range(30):
        share.hold(f"attacker{i}", "10.0.0.1", MB)
    # Two addresses now: the attacker's has 37.5 MB, whatever its number of connections.
    assert share.decide("attacker0", "10.0.0.1", big, 8 * MB, pool_used=30 * MB) is (
        Verdict.OVER_SHARE
    )
    assert share.decide("client", "10.0.0.2", big, 30 * MB, pool_used=30 * MB) is Verdict.GRANTED
    assert share.decide("client", "10.0.0.2", big, 38 * MB, pool_used=30 * MB) is (
        Verdict.OVER_SHARE
    )


def test_holdings_given_back_free_the_share() -> None:
    share = FairShare(100 * MB, small_request_bytes=MB, reserve_fraction=0.25)
    big = 100 * MB
    share.hold("a", "10.0.0.1", 70 * MB)
    assert share.decide("b", "10.0.0.2", big, 10 * MB, pool_used=70 * MB) is Verdict.OVER_SHARE
    share.hold("a", "10.0.0.1", 0)
    assert share.large_held == 0 and share.holders == 0
    assert share.decide("b", "10.0.0.2", big, 10 * MB, pool_used=0) is Verdict.GRANTED
    share.hold("b", "10.0.0.2", 10 * MB)
    share.hold("b", "10.0.0.2", 30 * MB)
    assert share.held_by("b") == 30 * MB and share.large_held == 30 * MB


def test_an_unbounded_pool_grants_everything() -> None:
    share = FairShare(None, small_request_bytes=MB)
    assert share.decide("a", "10.0.0.1", 100 * MB, 100 * MB, pool_used=10**12) is Verdict.GRANTED


def test_requests_of_unauthenticated_connections_count_as_large() -> None:
    share = FairShare(100 * MB, small_request_bytes=MB, reserve_fraction=0.25)
    share.hold("stranger", "10.0.0.1", 75 * MB)
    assert share.decide("other", "10.0.0.2", MB // 2, MB // 2, 75 * MB, trusted=False) is (
        Verdict.OVER_SHARE
    )
    assert share.decide("other", "10.0.0.2", MB // 2, MB // 2, 75 * MB) is Verdict.GRANTED
