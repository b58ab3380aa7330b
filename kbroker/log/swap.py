"""Crash-safe replacement of segments by a cleaned segment, and start-up resolution of the
files such a replacement (or a deletion) can leave behind.

The cleaner writes the replacement of a group of segments as `<base>.log.cleaned`,
`<base>.index.cleaned`, `<base>.timeindex.cleaned` and, when it holds abort markers,
`<base>.txnindex.cleaned` (`<base>` is the first replaced segment's base offset), fsyncs
them, then `install_cleaned` runs these steps, each a set of renames followed by an fsync of
the directory:

1. `.cleaned` -> `.swap` (indexes first, the .log last): from here on the replacement is
   committed; a `<base>.log.swap` means all of its files are complete;
2. the replaced segments' files -> `.deleted`;
3. `.swap` -> the final names (indexes first, the .log last).

`resolve_leftovers` (called before a log is opened) repairs any state a crash can leave:
- `*.cleaned`: an unfinished clean, deleted (the old segments are intact);
- `<base>.log.swap`: a committed clean; every segment file with a base offset in
  [base, next offset of the swap segment) is deleted, then step 3 is redone. The cleaner
  always keeps the last batch of a group (empty if need be), so the swap segment ends where
  the replaced segments ended and this range is exactly theirs;
- `.index.swap`/`.timeindex.swap` without a `.log.swap` of the same base: either step 1 was
  cut short (the clean is abandoned) or step 3 already renamed the .log; deleted;
- `*.deleted`: files already out of the log, deleted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from kbroker.log.fileio import fsync_dir, unlink_quietly
from kbroker.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
    rename_segment_files,
    scan_batches,
    txn_index_path,
)

log = logging.getLogger(__name__)


def _base_of(path: Path, suffix: str) -> int | None:
    """The base offset of a segment file named `<20 digits><suffix>`, else None."""
    name = path.name
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def segment_bases(directory: Path, extra: str = "") -> list[int]:
    """Base offsets of the `<base>.log<extra>` files in `directory`, ascending."""
    found = (_base_of(p, LOG_SUFFIX + extra) for p in directory.iterdir())
    return sorted(b for b in found if b is not None)


def _next_offset(path: Path, base: int) -> int:
    """The offset after the last whole batch of a segment file (its base when empty)."""
    next_offset = base
    fd = os.open(path, os.O_RDONLY)
    try:
        for _, header, _ in scan_batches(fd, 0, os.fstat(fd).st_size, chunk=1 << 20):
            next_offset = header.next_offset
    finally:
        os.close(fd)
    return next_offset


def install_cleaned(
    directory: Path,
    base: int,
    replaced: list[LogSegment],
    step_done: Callable[[int], None] = lambda _step: None,
) -> list[list[Path]]:
    """Run steps 1-3 for the cleaned segment `<base>.*.cleaned` replacing `replaced`
    (whose files are renamed to `.deleted`; their open files are left alone). Returns the
    `.deleted` paths of each replaced segment. `step_done(n)` runs after step n (tests use
    it to inject crashes)."""
    rename_segment_files(directory, base, CLEANED_SUFFIX, SWAP_SUFFIX)
    fsync_dir(directory)
    step_done(1)
    deleted = [segment.rename_to_deleted() for segment in replaced]
    fsync_dir(directory)
    step_done(2)
    rename_segment_files(directory, base, SWAP_SUFFIX, "")
    fsync_dir(directory)
    step_done(3)
    return deleted


def resolve_leftovers(directory: Path) -> None:
    """Bring `directory` to a state with no `.cleaned`, `.swap` or `.deleted` file (see the
    module docstring); the log is consistent afterwards."""
    changed = False
    for path in list(directory.iterdir()):
        if path.name.endswith(CLEANED_SUFFIX) or path.name.endswith(DELETED_SUFFIX):
            unlink_quietly(path)
            changed = True
    for base in segment_bases(directory, SWAP_SUFFIX):
        swap_log = directory / (LogSegment.paths(directory, base)[0].name + SWAP_SUFFIX)
        end = _next_offset(swap_log, base)
        log.warning("%s: completing an interrupted cleaner swap", swap_log)
        for old in segment_bases(directory):
            if base <= old < max(end, base + 1):
                for path in (*LogSegment.paths(directory, old), txn_index_path(directory, old)):
                    unlink_quietly(path)
        rename_segment_files(directory, base, SWAP_SUFFIX, "")
        changed = True
    for path in list(directory.iterdir()):
        if any(path.name.endswith(suffix + SWAP_SUFFIX) for suffix in SEGMENT_SUFFIXES):
            unlink_quietly(path)
            changed = True
    if changed:
        fsync_dir(directory)
