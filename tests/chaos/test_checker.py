"""The checker on hand-made histories, and the schedules' determinism."""

from __future__ import annotations

from typing import Any

from chaos.checker import aggregate, check
from chaos.schedule import KINDS, make_schedule


def history(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "acked": [[100.2, 0, 0, "v0"], [101.5, 0, 1, "v1"], [102.5, 1, 0, "v2"]],
        "failed": [],
        "seen": [[100.3, 0, 0, "v0"], [101.6, 0, 1, "v1"]],
        "final": {"0": [[0, "v0"], [1, "v1"]], "1": [[0, "v2"]]},
        "final_complete": True,
        "faults": [[101.0, 102.0, "pause", ["broker-1"]]],
        "start": 100.0,
        "end": 104.0,
    }
    return {**base, **changes}


def test_a_clean_history_is_safe() -> None:
    report = check(history())
    assert report.safe
    assert report.summary()["lost"] == 0


def test_an_acknowledged_value_missing_at_the_end_is_lost() -> None:
    report = check(history(final={"0": [[0, "v0"]], "1": [[0, "v2"]]}, seen=[]))
    assert report.lost == ["v1@0:1"]
    assert not report.safe


def test_a_value_twice_in_the_log_is_a_duplicate() -> None:
    report = check(history(final={"0": [[0, "v0"], [1, "v1"]], "1": [[0, "v2"], [1, "v2"]]}))
    assert report.duplicates == ["v2"]


def test_an_acknowledged_value_at_another_offset_moved() -> None:
    report = check(history(final={"0": [[0, "v0"], [1, "vx"], [2, "v1"]], "1": [[0, "v2"]]}))
    assert report.offset_changed == ["v1@0:1 now [(0, 2)]"]
    assert report.vanished == ["v1@0:1"]


def test_an_ack_without_offset_needs_the_value_once_in_its_partition() -> None:
    # librdkafka's implicit ack (seed 11 of the overlapping runs): v1 delivered, no offset.
    implicit = [[100.2, 0, 0, "v0"], [101.5, 0, None, "v1"], [102.5, 1, 0, "v2"]]
    report = check(history(acked=implicit))
    assert report.safe and report.acked_without_offset == 1
    missing = check(history(acked=implicit, final={"0": [[0, "v0"]], "1": [[0, "v2"]]}, seen=[]))
    assert missing.lost == ["v1@0:None"]
    elsewhere = {"0": [[0, "v0"]], "1": [[0, "v2"], [1, "v1"]]}
    moved = check(history(acked=implicit, final=elsewhere, seen=[]))
    assert moved.offset_changed == ["v1@0:None now [(1, 1)]"]
    twice = {"0": [[0, "v0"], [1, "v1"], [2, "v1"]], "1": [[0, "v2"]]}
    assert check(history(acked=implicit, final=twice)).duplicates == ["v1"]


def test_a_value_read_that_is_gone_at_the_end_vanished() -> None:
    seen = [[100.3, 0, 0, "v0"], [100.4, 0, 1, "unacked"]]
    report = check(history(acked=[[100.2, 0, 0, "v0"]], seen=seen, final={"0": [[0, "v0"]]}))
    assert report.vanished == ["unacked@0:1"]
    assert not report.lost


def test_offsets_read_backwards_are_out_of_order() -> None:
    seen = [[100.3, 0, 1, "v1"], [100.4, 0, 0, "v0"]]
    assert check(history(seen=seen)).out_of_order == 1


def test_an_incomplete_final_read_is_not_safe() -> None:
    assert not check(history(final_complete=False)).safe


def test_availability_counts_seconds_with_an_ack_per_fault_kind() -> None:
    availability = check(history()).availability
    # Buckets 0..3: the pause covers bucket 1 (an ack at 101.5); buckets 0, 2, 3 are
    # fault-free and 0 and 2 have acks.
    assert availability == {"none": 2 / 3, "pause": 1.0}


def test_a_seed_gives_the_same_schedule_and_it_ends_in_time() -> None:
    args = (42, 90.0, "zookeeper", ["broker-1", "broker-2", "broker-3"], 6.0)
    first = make_schedule(*args)
    assert first == make_schedule(*args)
    assert first != make_schedule(43, *args[1:])
    assert all(f.at + f.hold <= 90.0 for f in first)
    assert {f.kind for f in first} <= set(KINDS)
    pauses = [f for s in range(20) for f in make_schedule(s, *args[1:]) if f.kind == "pause"]
    assert pauses and all(f.hold > 6.0 for f in pauses)


def test_runs_add_up_and_availability_is_averaged_per_kind() -> None:
    one = {**check(history()).summary(), "faults": {"pause": 1}}
    lossy = check(history(final={"0": [[0, "v0"]], "1": [[0, "v2"]]}, seen=[])).summary()
    total = aggregate([one, {**lossy, "faults": {"pause": 2, "kill": 1}}])
    assert total["runs"] == 2 and total["safe_runs"] == 1
    assert total["faults"] == {"kill": 1, "pause": 3}
    assert total["lost"] == 1 and total["acked"] == 6
    assert total["availability"] == {"none": 0.667, "pause": 1.0}
