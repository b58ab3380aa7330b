"""Reading the Prometheus text exposition format (0.0.4) that kbroker's metrics endpoint
serves: the samples of chosen counters, by one label. Comment lines and other metrics are
skipped; a malformed line is skipped too (the console shows what it can)."""

from __future__ import annotations

import re
from collections.abc import Collection

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], value)


def counters_by_label(
    text: str, names: Collection[str], label: str
) -> dict[tuple[str, str], float]:
    """(metric name, value of ``label``) -> sample value, for the metrics in ``names``;
    samples of those metrics without the label are summed under ""."""
    found: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group(1) not in names:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = {k: _unescape(v) for k, v in _LABEL.findall(match.group(2) or "")}
        key = (match.group(1), labels.get(label, ""))
        found[key] = found.get(key, 0.0) + value
    return found
