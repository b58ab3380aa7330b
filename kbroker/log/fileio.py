"""Small file helpers shared by the storage modules (append, atomic replace, fsync)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

TMP_SUFFIX = ".tmp"


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte (os.write may write less than asked, e.g. when interrupted)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Up to `size` bytes at `position`; shorter only at the end of the file."""
    chunks: list[bytes] = []
    done = 0
    while done < size:
        chunk = os.pread(fd, size - done, position + done)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


class _SyncDeferral:
    """Set inside `one_sync`: fsyncs are left to the sync(2) at its end."""

    active = False


_DEFERRAL = _SyncDeferral()


@contextlib.contextmanager
def one_sync() -> Iterator[None]:
    """Make every write inside durable with one sync(2) at the end instead of an fsync per
    file. Closing 10,000 partition logs at shutdown took tens of thousands of fsyncs (about
    1 ms each on a small VM), and one sync of the same writes 0.2 s. Inside, no write is
    durable before another: use it only where every file written is one that start-up
    checks and rebuilds (segments and their indexes, producer snapshots), never for
    checkpoints or markers that a start-up trusts."""
    if _DEFERRAL.active:
        yield
        return
    _DEFERRAL.active = True
    try:
        yield
    finally:
        _DEFERRAL.active = False
    os.sync()


def fsync(fd: int) -> None:
    """fsync(2), unless inside `one_sync`."""
    if not _DEFERRAL.active:
        os.fsync(fd)


def fsync_dir(directory: Path) -> None:
    """Make renames and creations in `directory` durable."""
    if _DEFERRAL.active:
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: temp file, fsync, rename, fsync of the directory
    (DESIGN.md rule 6), so a crash leaves either the old or the new content."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def open_dir(directory: Path) -> int:
    """A descriptor of `directory`, for work done in it later whatever its name is then."""
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)


def fsync_and_close(fds: list[int]) -> None:
    """fsync each descriptor (files or directories), then close them all (a background job
    given duplicated descriptors; see background_sync.py)."""
    try:
        for fd in fds:
            fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


def atomic_write_in(dir_fd: int, name: str, data: bytes) -> None:
    """`atomic_write` of `name` in the directory open as `dir_fd`, which it closes."""
    tmp = name + TMP_SUFFIX
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
        try:
            write_all(fd, data)
            fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        fsync(dir_fd)
    finally:
        os.close(dir_fd)
