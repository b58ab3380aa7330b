"""Types shared by the operations tests' fixtures (conftest.py) and the tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from compat_tests.broker_process import BrokerProcess


@dataclass
class OpsBroker:
    process: BrokerProcess
    metrics_port: int

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap


@dataclass
class CliResult:
    code: int
    out: str
    err: str


Cli = Callable[..., CliResult]
