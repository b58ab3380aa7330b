"""Small file helpers shared by the storage modules (append, atomic replace, fsync)."""

from __future__ import annotations

import contextlib
import os
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


def fsync_dir(directory: Path) -> None:
    """Make renames and creations in `directory` durable."""
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
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
