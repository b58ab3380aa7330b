"""Crash-safety of the cleaner's segment swap: a crash after any step, or halfway through
one, leaves files that start-up resolves into a consistent log without losing a record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.log import PartitionLog
from kbroker.log.segment import LogSegment

from .compaction_helpers import cleaner_for, compact_config, manager_with_log, put, read_kv


class Crash(Exception):
    pass


def prepare(root: Path) -> tuple[list, dict]:
    """A log with superseded records; returns its records and the final value per key."""
    manager, plog = manager_with_log(root, compact_config())
    for r in range(8):
        for k in range(8):
            put(plog, [(b"k%d" % k, b"v%d-%d" % (k, r) + b"x" * 20)])
    kv = read_kv(plog)
    plog.flush()
    # The flush, and the checkpoints before it, are done by the manager's syncer: the "crash"
    # comes after them.
    assert manager.syncer.wait_idle(10)
    return kv, {k: v for _, k, v in kv}


def reopen_and_check(directory: Path, before: list, final: dict) -> list:
    plog = PartitionLog.open(directory, compact_config(), recover=True)
    leftovers = [
        p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
    ]
    assert leftovers == []
    after = read_kv(plog)
    assert set(after) <= set(before)
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert {k: v for _, k, v in after} == final
    assert plog.log_end_offset == before[-1][0] + 1
    plog.close()
    return after


@pytest.mark.parametrize("crash_after", [0, 1, 2, 3])
def test_crash_after_each_swap_step(tmp_path: Path, crash_after: int) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    for r in range(8):
        for k in range(8):
            put(plog, [(b"k%d" % k, b"v%d-%d" % (k, r) + b"x" * 20)])
    before = read_kv(plog)
    final = {k: v for _, k, v in before}
    plog.flush()
    cleaner = cleaner_for(manager)
    plan = cleaner.grab_filthiest()
    assert plan is not None
    result = cleaner.build(plan)

    def step_done(step: int) -> None:
        if step == crash_after:
            raise Crash

    if crash_after == 0:
        # Crash before any rename: only .cleaned files exist.
        assert list(plog.directory.glob("*.log.cleaned"))
    else:
        with pytest.raises(Crash):
            cleaner.install(result, step_done)
    after = reopen_and_check(plog.directory, before, final)
    # Once step 1 is done the clean is committed: start-up finishes it.
    assert (len(after) < len(before)) == (crash_after >= 1)


def test_crash_halfway_through_the_final_renames(tmp_path: Path) -> None:
    manager, plog = manager_with_log(tmp_path, compact_config())
    for r in range(8):
        for k in range(8):
            put(plog, [(b"k%d" % k, b"v%d-%d" % (k, r) + b"x" * 20)])
    before = read_kv(plog)
    final = {k: v for _, k, v in before}
    cleaner = cleaner_for(manager)
    plan = cleaner.grab_filthiest()
    assert plan is not None
    result = cleaner.build(plan)
    directory = plog.directory

    def step_done(step: int) -> None:
        if step == 2:
            # Step 3 cut short: the first group's index is renamed, its .log is not.
            base = result.groups[0][0].base_offset
            index = LogSegment.paths(directory, base)[1]
            os.replace(index.with_name(index.name + ".swap"), index)
            raise Crash

    with pytest.raises(Crash):
        cleaner.install(result, step_done)
    after = reopen_and_check(directory, before, final)
    assert len(after) < len(before)


def test_stray_swap_indexes_without_their_log_are_dropped(tmp_path: Path) -> None:
    before, final = prepare(tmp_path)
    directory = tmp_path / "t-0"
    # Step 1 cut short: an index became .swap, the .log is still .cleaned.
    (directory / "00000000000000000000.index.swap").write_bytes(b"\0" * 8)
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"garbage")
    after = reopen_and_check(directory, before, final)
    assert after == before


@pytest.mark.parametrize("crash_after", [1, 2, 3])
def test_recovery_completes_exactly_the_committed_swap(tmp_path: Path, crash_after: int) -> None:
    from wire.records.record import decode_records

    manager, plog = manager_with_log(tmp_path, compact_config())
    for r in range(12):
        for k in range(6):
            put(plog, [(b"k%d" % k, b"v%d-%d" % (k, r) + b"x" * 20)])
    # Written with small segments, cleaned into groups of several: the first groups end
    # with segments whose every record is superseded.
    plog.update_config(compact_config(segment_bytes=4000))
    cleaner = cleaner_for(manager)
    plan = cleaner.grab_filthiest()
    assert plan is not None
    result = cleaner.build(plan)
    # The crash hits the first group's swap: it is committed, the later groups' are not.
    first_group = result.groups[0]
    assert len(first_group) > 1
    replaced = {ref.base_offset for ref in first_group}
    cleaned = LogSegment.paths(plog.directory, first_group[0].base_offset, ".cleaned")[0]
    expected = decode_records(cleaned.read_bytes())
    for segment in plog.segments():
        if segment.base_offset not in replaced:
            expected += decode_records(segment.log_path.read_bytes())

    def step_done(step: int) -> None:
        if step == crash_after:
            raise Crash

    with pytest.raises(Crash):
        cleaner.install(result, step_done)
    reopened = PartitionLog.open(plog.directory, compact_config(), recover=True)
    assert read_kv(reopened) == [(r.offset, r.key, r.value) for r in expected]
    reopened.close()
