"""Run compat_tests' columns side by side: one pytest process per broker kind.

``python -m compat_tests.columns [PYTEST OPTIONS...]`` starts ``pytest compat_tests`` once for
each kind in KBROKER_COMPAT_BROKERS (default: kbroker, Kafka 3.9, Kafka 4.3), each with
KBROKER_COMPAT_BROKERS set to its one kind, so that each process starts only its own broker
and a session fixture never sees two kinds. The columns mostly wait on brokers, JVMs and
timeouts, so they overlap well even on two cores. Each column's output goes to a file and is
printed whole when that column ends; the exit status is the first failing column's, 0
when every column passed or selected nothing (a ``-k`` that matches only 4.3 tools selects
nothing against Kafka 3.9), 5 when no column selected anything.

Separate processes rather than pytest-xdist's ``--dist loadgroup``: under pytest 9, xdist
3.8 no longer sends a group's tests to one worker (its renamed node ids are ignored), and
workers that mix kinds hand a test the broker of another column.

Under KBROKER_BOOTSTRAP there is one column, the external broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from compat_tests.conftest import BOOTSTRAP_ENV, BROKERS_ENV, brokers_under_test

NO_TESTS_COLLECTED = int(pytest.ExitCode.NO_TESTS_COLLECTED)


def column_command(pytest_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *pytest_args, "compat_tests"]


def main(pytest_args: list[str]) -> int:
    kinds = ["external"] if os.environ.get(BOOTSTRAP_ENV) else brokers_under_test()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="compat-columns-") as work:
        running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        for kind in kinds:
            log = Path(work) / f"{kind}.log"
            env = dict(os.environ)
            if kind != "external":
                env[BROKERS_ENV] = kind
            with log.open("wb") as out:
                process = subprocess.Popen(
                    column_command(pytest_args), env=env, stdout=out, stderr=subprocess.STDOUT
                )
            running[kind] = (process, log)
        statuses: dict[str, int] = {}
        while running:
            for kind, (process, log) in list(running.items()):
                status = process.poll()
                if status is None:
                    continue
                del running[kind]
                statuses[kind] = status
                minutes = (time.monotonic() - started) / 60
                print(f"==== compat_tests [{kind}]: exit {status} after {minutes:.1f} min ====")
                sys.stdout.write(log.read_text(errors="replace"))
                sys.stdout.flush()
            time.sleep(1.0)
    print(f"==== compat_tests columns: {statuses} ====")
    failed = [status for status in statuses.values() if status not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return 0 if 0 in statuses.values() else NO_TESTS_COLLECTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
