"""DESIGN.md: controller/zk_backend.py is the only module of the distribution importing kazoo."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The packages of the distribution (pyproject.toml [tool.setuptools.packages.find]).
PACKAGES = ("wire", "kbroker", "controller", "replication", "spark_conn")
ALLOWED = "controller/zk_backend.py"


def imports_kazoo(source: str, name: str) -> bool:
    """True when any import statement, at any depth (functions included), names kazoo."""
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] == "kazoo" for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "kazoo":
                return True
    return False


def test_only_the_zookeeper_backend_imports_kazoo() -> None:
    files = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    assert len(files) > 100
    importers = [
        str(p.relative_to(ROOT))
        for p in files
        if imports_kazoo(p.read_text(encoding="utf-8"), str(p))
    ]
    assert importers == [ALLOWED]


def test_scanner_finds_imports_inside_functions() -> None:
    nested = "def f() -> None:\n    from kazoo.client import KazooClient\n"
    assert imports_kazoo(nested, "nested.py")
    assert imports_kazoo("import kazoo.exceptions\n", "top.py")
    assert not imports_kazoo("from . import kazoo\nimport kazoolike\n", "other.py")
