"""The kbroker command line: help, configuration errors, hand-off to the broker."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from kbroker.cli import main
from kbroker.config import BrokerConfig


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(argv)
    code = info.value.code
    assert isinstance(code, int)
    return code


def test_help_lists_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == 0
    assert "start" in capsys.readouterr().out


def test_unknown_property_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["start", "--override", "log.dirz=/x"]) == 2
    assert "log.dirz" in capsys.readouterr().err


def test_bad_value_from_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBROKER_NUM_PARTITIONS", "zero")
    assert run(["start"]) == 2
    assert "num.partitions" in capsys.readouterr().err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["start", str(tmp_path / "missing.properties")]) == 2
    assert "missing.properties" in capsys.readouterr().err


def test_start_hands_the_config_to_run_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[BrokerConfig] = []
    fake = types.ModuleType("kbroker.broker")
    fake.run_broker = lambda config: seen.append(config) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kbroker.broker", fake)
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.dirs=/from/file\n")
    monkeypatch.setenv("KBROKER_NUM_PARTITIONS", "3")
    assert run(["start", str(path), "--override", "log.dirs=/from/flag"]) == 0
    [config] = seen
    assert config.num_partitions == 3
    assert config.log_dirs == [Path("/from/flag")]
