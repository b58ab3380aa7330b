"""A kbroker process for the operations tests (metrics endpoint on), and running the CLI
in-process with its output captured."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from compat_tests.broker_process import BrokerProcess, free_port
from kbroker.cli import main
from tests.ops.support import Cli, CliResult, OpsBroker


@pytest.fixture(scope="module")
def ops_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpsBroker]:
    metrics_port = free_port()
    process = BrokerProcess(
        tmp_path_factory.mktemp("ops-broker"),
        overrides={
            "metrics.port": str(metrics_port),
            # find-hanging needs a hanging transaction, which KIP-890's verification (on by
            # default) no longer lets a late or orphan transactional batch open.
            "transaction.partition.verification.enable": "false",
        },
    )
    process.start(timeout=60.0)
    try:
        yield OpsBroker(process, metrics_port)
    finally:
        process.stop()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``cli("topics", "list", stdin=...)`` runs ``kbroker`` in this process."""

    def run(*argv: str, stdin: str = "") -> CliResult:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        capsys.readouterr()
        try:
            main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
        else:
            code = 0
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
