"""The assignors are pure (the coordinator runs them on its event loop, and a target assignment
must not depend on when or where it is computed): no IO, no clock, no randomness, and nothing
of the broker beyond their own package."""

from __future__ import annotations

from pathlib import Path

from tests.wire.test_wire_sans_io import imported_roots

ASSIGNORS = Path(__file__).resolve().parents[2] / "kbroker" / "group" / "assignors"
FORBIDDEN = {"asyncio", "socket", "time", "random", "os", "threading", "datetime", "kazoo"}


def test_assignors_import_no_io_clock_or_randomness() -> None:
    files = sorted(ASSIGNORS.glob("*.py"))
    assert len(files) > 5
    bad = {p.name: imported_roots(p) & FORBIDDEN for p in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_assignors_import_only_their_own_package_from_the_broker() -> None:
    for path in ASSIGNORS.glob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith(("from kbroker", "import kbroker")):
                assert line.startswith("from kbroker.group.assignors"), (path.name, line)
