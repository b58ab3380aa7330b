"""A byte range of an open segment file, handed to the server instead of a copy.

The server writes it to the socket with os.sendfile (zero copy); `read()` is the fallback
(TLS, tests, down-conversion).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True)
class FileRegion:
    """`nbytes` bytes of `file` starting at `position`."""

    file: BinaryIO
    position: int
    nbytes: int

    def split(self, size: int) -> list[FileRegion]:
        """The region as consecutive regions of at most `size` bytes."""
        return [
            FileRegion(self.file, self.position + start, min(size, self.nbytes - start))
            for start in range(0, self.nbytes, size)
        ]

    def read(self) -> bytes:
        """The region's bytes (os.pread; never moves the file's offset)."""
        fd = self.file.fileno()
        chunks: list[bytes] = []
        done = 0
        while done < self.nbytes:
            chunk = os.pread(fd, self.nbytes - done, self.position + done)
            if not chunk:
                raise OSError(f"file ended {self.nbytes - done} bytes before the region's end")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
