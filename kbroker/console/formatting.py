"""How numbers and times read on the console's pages (Jinja2 filters)."""

from __future__ import annotations

from datetime import UTC, datetime


def format_timestamp(ms: int | float | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def format_size(size: int | float | None) -> str:
    if size is None:
        return "-"
    if size < 1024:
        return f"{size:.0f} B"
    value, units = size / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value /= 1024
        units.pop(0)
    return f"{value:.1f} {units[0]}"


def format_rate(rate: float | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.1f}/s" if rate < 100 else f"{rate:,.0f}/s"
