"""``kbroker audit``'s tier and duration arguments."""

from __future__ import annotations

import argparse

import pytest

from kbroker.cli.audit import Tier, parse_duration_ms, parse_tier


def test_tiers_take_several_brokers_an_optional_command_config_and_topic() -> None:
    assert parse_tier("src=a:9092,b:9093") == Tier("src", "a:9092,b:9093", None, "__audit")
    assert parse_tier("dst=a:9092,/etc/client.properties") == Tier(
        "dst", "a:9092", "/etc/client.properties"
    )
    assert parse_tier("spark=a:9092,topic=spark-reads,/etc/c.properties") == Tier(
        "spark", "a:9092", "/etc/c.properties", "spark-reads"
    )
    for bad in (
        "a:9092",
        "x=",
        "x=only.properties",
        "x=topic=t",
        "x=a:1,topic=",
        "x=a:1,topic=a,topic=b",
    ):
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
