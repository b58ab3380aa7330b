"""The client core does no IO and keeps no time (DESIGN.md: pure cores, thin shells)."""

from __future__ import annotations

from pathlib import Path

from tests.wire.test_wire_sans_io import imported_roots

CORE = Path(__file__).resolve().parents[2] / "kbroker" / "client_core"
FORBIDDEN = {"asyncio", "socket", "ssl", "select", "selectors", "threading", "time", "os"}


def test_client_core_imports_no_io() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) >= 4
    bad = {p.name: imported_roots(p) & FORBIDDEN for p in files}
    assert {k: v for k, v in bad.items() if v} == {}
