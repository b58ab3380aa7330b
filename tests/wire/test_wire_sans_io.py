"""DESIGN.md rule 1: wire/ is sans-IO."""

from __future__ import annotations

import ast
from pathlib import Path

WIRE = Path(__file__).resolve().parents[2] / "wire"
FORBIDDEN = {"asyncio", "socket", "time", "kazoo", "kbroker"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_wire_imports_no_io() -> None:
    files = sorted(WIRE.rglob("*.py"))
    assert len(files) > 100
    bad = {str(p.relative_to(WIRE)): imported_roots(p) & FORBIDDEN for p in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_scanner_sees_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import time\nfrom asyncio import sleep\nfrom . import x\n")
    assert imported_roots(src) == {"time", "asyncio"}
