"""Output of the operations commands: aligned text tables, JSON, and progress on stderr.

Tables are for people: a header row, columns padded to the widest cell, two spaces between
columns. ``--json`` prints one JSON document instead, for scripts. Progress lines go to
stderr so stdout stays clean for data; on a terminal they overwrite each other.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render ``rows`` under ``headers`` with left-aligned, padded columns."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def emit_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, sort_keys=True), file=out or sys.stdout)


def ids(values: Sequence[int]) -> str:
    """Broker id lists as Kafka's tools print them: ``1,2,3``."""
    return ",".join(str(v) for v in values)


class Progress:
    """Rate-limited progress on stderr: rewritten in place on a terminal, one line per update
    (at most every ``interval`` seconds) otherwise."""

    def __init__(self, label: str, *, out: TextIO | None = None, interval: float = 1.0) -> None:
        self._label = label
        self._out = out or sys.stderr
        self._interval = interval
        # Quiet for the first interval: short operations print only their final line.
        self._last = time.monotonic()
        self._tty = self._out.isatty()
        self._shown = False

    def update(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        self._shown = True
        if self._tty:
            self._out.write(f"\r{self._label}: {text}\x1b[K")
        else:
            self._out.write(f"{self._label}: {text}\n")
        self._out.flush()

    def done(self, text: str) -> None:
        if self._tty and self._shown:
            self._out.write("\r\x1b[K")
        self._out.write(f"{self._label}: {text}\n")
        self._out.flush()
