"""Which Python runs the ``kbroker`` data source in Spark's Python workers.

PySpark starts its workers with the interpreter named by PYSPARK_PYTHON (or
``spark.pyspark.python``), else the first ``python3`` on the PATH, and ships every Python
function with that choice (``SparkContext.pythonExec``). The data source lives in the
interpreter kbroker is installed in, often a virtual environment, so a session the user built
without setting either would fail in its first task with ``No module named 'crc32c'``.

``choose`` decides, for a local session (whose workers run on this machine, where the choice
can be checked): keep the configured interpreter when it can import the data source; use this
very interpreter when nobody chose one; and refuse, saying what to set, when the user's own
choice cannot work. For a cluster the workers' interpreter cannot be checked from here.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

# What the data source's worker side imports first; its dependencies come with it.
WORKER_IMPORTS = "import crc32c, kbroker.data_client, spark_conn.options"
PROBE_TIMEOUT_SECONDS = 60.0


class WorkerPythonError(RuntimeError):
    """The interpreter the user chose for Spark's workers cannot run the data source."""


@dataclass(frozen=True)
class WorkerPython:
    executable: str
    chosen_by_user: bool


def can_import_data_source(executable: str) -> bool:
    """Whether `executable` imports the data source (a subprocess; about 0.2 s)."""
    try:
        probe = subprocess.run(
            [executable, "-c", WORKER_IMPORTS],
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def choose(configured: WorkerPython, importable: bool) -> str:
    """The interpreter the workers should run, given the configured one and whether it can
    import the data source."""
    if importable:
        return configured.executable
    if not configured.chosen_by_user:
        return sys.executable
    raise WorkerPythonError(
        f"Spark's Python workers run {configured.executable!r} (PYSPARK_PYTHON or "
        f"spark.pyspark.python), which cannot import the kbroker data source "
        f"({WORKER_IMPORTS!r} fails there); set PYSPARK_PYTHON={sys.executable} before the "
        "session starts, or install kbroker in that interpreter"
    )
