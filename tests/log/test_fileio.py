"""fileio: one sync(2) in place of an fsync per file inside `one_sync`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.log.fileio import atomic_write, one_sync


def test_inside_one_sync_fsyncs_wait_for_a_single_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync"))
    monkeypatch.setattr(os, "sync", lambda: calls.append("sync"))
    with one_sync():
        atomic_write(tmp_path / "a", b"x")
        with one_sync():  # nested: still one sync, at the outer end
            atomic_write(tmp_path / "b", b"y")
        assert calls == []
    assert calls == ["sync"]
    atomic_write(tmp_path / "c", b"z")  # the file, then its directory
    assert calls == ["sync", "fsync", "fsync"]
    assert [(tmp_path / n).read_bytes() for n in "abc"] == [b"x", b"y", b"z"]
