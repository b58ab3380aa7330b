"""``kbroker audit``'s tier and duration arguments."""

from __future__ import annotations

import argparse

import pytest

from kbroker.cli.audit import parse_duration_ms, parse_tier


def test_tiers_take_several_brokers_and_an_optional_command_config() -> None:
    assert parse_tier("src=a:9092,b:9093") == ("src", "a:9092,b:9093", None)
    assert parse_tier("dst=a:9092,/etc/client.properties") == (
        "dst",
        "a:9092",
        "/etc/client.properties",
    )
    for bad in ("a:9092", "x=", "x=only.properties"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_tier(bad)


def test_durations_take_units() -> None:
    assert [parse_duration_ms(t) for t in ("10m", "30s", "1h", "250ms", "600000")] == [
        600_000,
        30_000,
        3_600_000,
        250,
        600_000,
    ]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration_ms("0m")
