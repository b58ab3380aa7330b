"""LogManager: layout, clean-shutdown marker, checkpoints, deletion, flushing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbroker.log import LogConfig, LogManager
from kbroker.log.log_manager import CLEAN_SHUTDOWN_FILE, parse_partition_dir
from kbroker.log.segment import LogSegment

from .helpers import FakeClock, batch

CONFIG = LogConfig(segment_bytes=1000)


def fill(manager: LogManager, topic: str, partition: int, n: int) -> None:
    plog = manager.get_or_create(topic, partition, CONFIG)
    for tag in range(n):
        plog.append_as_leader(
            batch(1, value_size=50, tag=tag), leader_epoch=0, log_append_time_ms=None
        )


def test_parse_partition_dir() -> None:
    assert parse_partition_dir("my.topic-with-dashes-12") == ("my.topic-with-dashes", 12)
    assert parse_partition_dir("topic") is None
    assert parse_partition_dir("topic-x") is None
    assert parse_partition_dir("t-0.abc-delete") is None


def test_layout_and_reopen_after_clean_shutdown(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    manager.open_all()
    fill(manager, "orders", 0, 30)
    fill(manager, "orders", 1, 5)
    assert manager.dir_of("orders", 0).parent != manager.dir_of("orders", 1).parent
    assert (manager.dir_of("orders", 0) / "00000000000000000000.log").exists()
    manager.shutdown()
    assert (tmp_path / "a" / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "b" / CLEAN_SHUTDOWN_FILE).exists()

    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    manager.open_all()
    assert not (tmp_path / "a" / CLEAN_SHUTDOWN_FILE).exists()
    assert set(manager.logs()) == {("orders", 0), ("orders", 1)}
    assert manager.get("orders", 0).log_end_offset == 30  # type: ignore[union-attr]
    assert all(not log.recovered_segments for log in manager.logs().values())
    assert manager.get("nope", 0) is None


def test_new_logs_avoid_cordoned_dirs(tmp_path: Path) -> None:
    # KIP-1066: a cordoned directory keeps its logs and takes no new one while another can.
    manager = LogManager([tmp_path / "a", tmp_path / "b"], cordoned=[tmp_path / "a"])
    manager.open_all()
    for partition in range(4):
        fill(manager, "orders", partition, 1)
    assert {manager.dir_of("orders", p).parent for p in range(4)} == {tmp_path / "b"}
    manager.shutdown()
    everywhere = LogManager(
        [tmp_path / "a", tmp_path / "b"], cordoned=[tmp_path / "a", tmp_path / "b"]
    )
    everywhere.open_all()
    # Every directory cordoned: new logs still go where they would otherwise.
    fill(everywhere, "more", 0, 1)
    assert everywhere.dir_of("more", 0).parent == tmp_path / "a"
    everywhere.shutdown()


def test_unclean_restart_recovers(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.open_all()
    fill(manager, "t", 0, 10)
    plog = manager.get("t", 0)
    assert plog is not None
    plog.flush()  # the process dies here: no shutdown, no marker
    manager = LogManager([tmp_path])
    manager.open_all()
    reopened = manager.get("t", 0)
    assert reopened is not None and reopened.log_end_offset == 10
    assert reopened.recovered_segments == [reopened.segment_base_offsets()[-1]]


def test_open_all_uses_config_for(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.open_all()
    fill(manager, "t", 0, 1)
    manager.shutdown()
    manager = LogManager([tmp_path], config_for=lambda topic, p: LogConfig(segment_bytes=777))
    manager.open_all()
    assert manager.get("t", 0).config.segment_bytes == 777  # type: ignore[union-attr]
    plog = manager.get_or_create("t", 0, LogConfig(segment_bytes=555))
    assert plog.config.segment_bytes == 555


def test_log_start_offset_survives_restart(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.open_all()
    fill(manager, "t", 0, 40)
    plog = manager.get("t", 0)
    assert plog is not None
    plog.delete_records_before(plog.segment_base_offsets()[1] + 3)
    start = plog.log_start_offset
    manager.flush_due()
    # Checkpoints are written by the background syncer.
    assert manager.syncer.wait_idle(10)
    text = (tmp_path / "log-start-offset-checkpoint").read_text()
    assert text == f"0\n1\nt 0 {start}\n"
    manager.shutdown()
    manager = LogManager([tmp_path])
    manager.open_all()
    assert manager.get("t", 0).log_start_offset == start  # type: ignore[union-attr]


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.open_all()
    fill(manager, "t", 0, 3)
    directory = manager.dir_of("t", 0)
    manager.delete("t", 0)
    # Renamed at once; removed by the remover's thread once the syncer has run what the
    # log asked for before (its leader-epoch checkpoint, written into the directory).
    assert not directory.exists() and manager.get("t", 0) is None
    assert manager.syncer.wait_idle(30)
    assert manager.remover.wait_idle(30)
    assert not list(tmp_path.glob("*-delete"))
    # A removal interrupted by a crash is finished at start-up.
    (tmp_path / "t-1.0123abcd-delete").mkdir()
    (tmp_path / "t-1.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    manager = LogManager([tmp_path])
    manager.open_all()
    assert not (tmp_path / "t-1.0123abcd-delete").exists()
    assert manager.logs() == {}


def test_flush_due_flushes_logs_past_flush_ms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed: list[Path] = []
    real = LogSegment.take_unsynced
    monkeypatch.setattr(
        LogSegment, "take_unsynced", lambda s: (flushed.append(s.directory), real(s))[1]
    )
    clock = FakeClock()
    manager = LogManager([tmp_path], clock=clock)
    manager.open_all()
    fast = manager.get_or_create("fast", 0, LogConfig(flush_ms=100))
    manager.get_or_create("slow", 0, LogConfig())
    for topic in ("fast", "slow"):
        manager.get(topic, 0).append_as_leader(  # type: ignore[union-attr]
            batch(1), leader_epoch=0, log_append_time_ms=None
        )
    clock.advance_ms(100)
    manager.flush_due()
    assert flushed == [fast.directory]


def test_a_partition_in_two_dirs_is_an_error(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d / "t-0").mkdir(parents=True)
    with pytest.raises(RuntimeError):
        LogManager([tmp_path / "a", tmp_path / "b"]).open_all()


def test_deleting_many_partitions_leaves_the_removal_to_a_thread(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.open_all()
    for partition in range(50):
        fill(manager, "t", partition, 1)
    directories = [manager.dir_of("t", p) for p in range(50)]
    removed: list[Path] = []
    real = manager.remover.remove
    manager.remover.remove = lambda d: removed.append(d)  # type: ignore[method-assign]
    for partition in range(50):
        manager.delete("t", partition)
    assert not any(d.exists() for d in directories)
    # Handed to the remover once the syncer has run what the logs asked for before.
    assert manager.syncer.wait_idle(30)
    assert len(removed) == 50 and all(d.exists() for d in removed)  # renamed, not removed
    for directory in removed:
        real(directory)
    assert manager.remover.wait_idle(10)
    assert not any(d.exists() for d in removed)
