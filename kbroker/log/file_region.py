"""A byte range of an open segment file, handed to the server instead of a copy.

The server writes it to the socket with os.sendfile (zero copy); `read()` is the fallback
(TLS, tests, down-conversion).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO


# Not frozen: a frozen dataclass sets its fields through object.__setattr__, and a Fetch
# makes one region per partition with data (1,000 in a fetch of 1,000 partitions). Regions
# are still never changed after they are made.
@dataclass(slots=True)
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
        first = os.pread(fd, self.nbytes, self.position)
        if len(first) == self.nbytes:
            return first  # the usual case: one read
        chunks = [first]
        done = len(first)
        while done < self.nbytes:
            chunk = os.pread(fd, self.nbytes - done, self.position + done)
            if not chunk:
                raise OSError(f"file ended {self.nbytes - done} bytes before the region's end")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
