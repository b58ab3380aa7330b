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
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def format_rate(rate: float | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.1f}/s" if rate < 100 else f"{rate:,.0f}/s"
