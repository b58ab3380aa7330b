"""Spark's Python workers and the kbroker data source: `register()` on a session the user
built without PYSPARK_PYTHON, where the first `python3` on the PATH lacks kbroker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_conn.worker_python import WorkerPython, WorkerPythonError, choose
from tests.spark.conftest import REPO_ROOT
from tests.spark.helpers import make_topic, produce_values

# A user's script: their own session (not spark_conn.session.build_session), then register.
USER_SCRIPT = """
import sys
from pyspark.sql import SparkSession
import spark_conn
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    spark_conn.register(spark)
except spark_conn.worker_python.WorkerPythonError as exc:
    print("REFUSED", exc)
    sys.exit(3)
df = spark.read.format("kbroker").option("kafka.bootstrap.servers", sys.argv[1])
print("ROWS", df.option("subscribe", sys.argv[2]).load().count())
"""


def test_choose() -> None:
    assert choose(WorkerPython("/opt/py", chosen_by_user=True), importable=True) == "/opt/py"
    assert choose(WorkerPython("python3", chosen_by_user=False), importable=False) == (
        sys.executable
    )
    with pytest.raises(WorkerPythonError, match="set PYSPARK_PYTHON="):
        choose(WorkerPython("/opt/py", chosen_by_user=True), importable=False)


def _bare_python(directory: Path) -> Path:
    """A `python3` without site-packages, as a PATH's first python3 often is for a venv."""
    directory.mkdir()
    shim = directory / "python3"
    shim.write_text(f'#!/bin/sh\nexec {sys._base_executable} -S "$@"\n')
    shim.chmod(0o755)
    return shim


def _run_user_script(
    broker: Any, topic: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", USER_SCRIPT, broker.bootstrap, topic],
        cwd=REPO_ROOT,
        env={**env, "PYTHONPATH": REPO_ROOT},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_register_on_a_users_session(broker: Any, unique: str, tmp_path: Path) -> None:
    make_topic(broker.bootstrap, unique, 1)
    produce_values(broker.bootstrap, unique, 1, 3)
    shim = _bare_python(tmp_path / "bin")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["PATH"] = f"{shim.parent}:{env['PATH']}"
    # Nobody chose an interpreter: the workers run this one, and the read works.
    ran = _run_user_script(broker, unique, env)
    assert "ROWS 3" in ran.stdout, ran.stderr[-3000:]
    # The user chose one that cannot work: refused at register(), saying what to set.
    refused = _run_user_script(broker, unique, {**env, "PYSPARK_PYTHON": str(shim)})
    assert refused.returncode == 3, refused.stderr[-3000:]
    assert f"set PYSPARK_PYTHON={sys.executable}" in refused.stdout
