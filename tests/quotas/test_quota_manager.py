"""The pure quota manager: Kafka's precedence and its sampled-rate throttle."""

from __future__ import annotations

import pytest

from controller.quota_store import apply_changes, entity_path, from_json, to_json
from kbroker.quotas import PRODUCER_BYTE_RATE, QuotaManager, SampledRate, entity

LEVELS = [
    (entity("alice", "app"), entity("alice", "app")),
    (entity("alice", None), entity("alice", "app")),
    (entity("alice"), entity("alice")),
    (entity(None, "app"), entity("alice", "app")),
    (entity(None, None), entity("alice", "app")),
    (entity(None), entity("alice")),
    (entity(client_id="app"), entity(client_id="app")),
    (entity(client_id=None), entity(client_id="app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_precedence_picks_the_most_specific_entity_set(level: int) -> None:
    # Every level from `level` down has a quota: the one at `level` must win.
    table = {key: {PRODUCER_BYTE_RATE: float(i + 1)} for i, (key, _) in enumerate(LEVELS)}
    for key, _ in LEVELS[:level]:
        del table[key]
    manager = QuotaManager(lambda: table, clock=lambda: 0.0)
    found = manager.quota_for(PRODUCER_BYTE_RATE, "alice", "app")
    assert found == (LEVELS[level][1], float(level + 1))


def test_no_quota_no_throttle() -> None:
    manager = QuotaManager(dict, clock=lambda: 0.0)
    assert manager.record(PRODUCER_BYTE_RATE, "u", "c", 10**9) == 0


def test_rate_counts_at_least_all_windows_but_one() -> None:
    rate = SampledRate(samples=11, window=1.0)
    rate.record(1000, 0.0)
    # One second in, the rate is still measured over ten seconds (Kafka's Rate).
    assert rate.measure(1.0) == pytest.approx(100)


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    now = [0.0]
    table = {entity(client_id="app"): {PRODUCER_BYTE_RATE: 1000.0}}
    manager = QuotaManager(lambda: table, samples=2, window_seconds=1.0, clock=lambda: now[0])
    assert manager.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 500) == 0
    # 3000 bytes over a 1 s window against 1000 B/s: (3000 - 1000) / 1000 x 1 s.
    assert manager.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 2500) == 2000
    assert manager.throttled[PRODUCER_BYTE_RATE] == 1
    # Another client id is metered on its own, against the same default-less table: free.
    assert manager.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "other", 10**6) == 0
    now[0] = 5.0  # the samples have expired
    assert manager.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 500) == 0


def test_store_changes_paths_and_json_round_trip() -> None:
    table = apply_changes({}, [(entity("alice", None), {PRODUCER_BYTE_RATE: 5.0})])
    assert table == {entity("alice", None): {PRODUCER_BYTE_RATE: 5.0}}
    assert from_json(to_json(table)) == table
    assert apply_changes(table, [(entity("alice", None), {PRODUCER_BYTE_RATE: None})]) == {}
    assert entity_path(entity("alice", None)) == "users/alice/clients/<default>"
    assert entity_path(entity(client_id="a b*")) == "clients/a%20b%2A"


def test_defines_follows_the_table_it_reads() -> None:
    tables = [{entity(client_id="a"): {PRODUCER_BYTE_RATE: 1.0}}]
    manager = QuotaManager(lambda: tables[0], clock=lambda: 0.0)
    assert manager.defines(PRODUCER_BYTE_RATE)
    assert not manager.defines("request_percentage")
    # Quotas change by replacing the table.
    tables[0] = {entity(user=None): {"request_percentage": 50.0}}
    assert manager.defines("request_percentage")
    assert not manager.defines(PRODUCER_BYTE_RATE)
