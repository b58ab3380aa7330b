"""kcat (Debian's build, librdkafka 2.0) in metadata, producer, consumer and query modes.

kcat's consumer here is librdkafka's simple (legacy) consumer: no group at all.
"""

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compat_tests.support import CODECS, assert_stored_codec, compressible_value

pytestmark = pytest.mark.timeout(60)


def run_kcat(kcat: str, bootstrap: str, *args: str, stdin: bytes = b"") -> str:
    """Run kcat against the broker; fail with its stderr if it exits non-zero."""
    cmd = [kcat, "-b", bootstrap, *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=45)
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} exited {proc.returncode}\n"
            f"stderr: {proc.stderr.decode(errors='replace')[-4000:]}"
        )
    return proc.stdout.decode()


def consume_json(kcat: str, bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every message of partition 0 from the beginning, as kcat's -J envelopes."""
    out = run_kcat(kcat, bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_metadata_list(kcat: str, bootstrap: str, create_topic: Callable[..., str]) -> None:
    topic = create_topic(partitions=3)
    meta = json.loads(run_kcat(kcat, bootstrap, "-L", "-J", "-t", topic))
    assert meta["brokers"], "no broker in metadata"
    broker_ids = {b["id"] for b in meta["brokers"]}
    (entry,) = meta["topics"]
    assert entry["topic"] == topic
    assert "error" not in entry
    assert sorted(p["partition"] for p in entry["partitions"]) == [0, 1, 2]
    assert all(p["leader"] in broker_ids for p in entry["partitions"])


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_with_codec(
    kcat: str, bootstrap: str, create_topic: Callable[..., str], log_dir: Path | None, codec: str
) -> None:
    topic = create_topic()
    lines = [f"key-{i}:".encode() + compressible_value(i) for i in range(100)]
    codec_args = [] if codec == "none" else ["-z", codec]
    run_kcat(
        kcat,
        bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K",
        ":",
        "-H",
        f"codec={codec}",
        "-X",
        "linger.ms=50",
        *codec_args,
        stdin=b"\n".join(lines) + b"\n",
    )
    got = consume_json(kcat, bootstrap, topic)
    assert [m["offset"] for m in got] == list(range(100))
    assert [m["key"] for m in got] == [f"key-{i}" for i in range(100)]
    assert [m["payload"].encode() for m in got] == [compressible_value(i) for i in range(100)]
    assert all(m["headers"] == ["codec", codec] for m in got)
    assert_stored_codec(log_dir, topic, 0, codec)


def test_query_offset_by_timestamp(
    kcat: str, bootstrap: str, create_topic: Callable[..., str]
) -> None:
    topic = create_topic()
    run_kcat(kcat, bootstrap, "-P", "-t", topic, "-p", "0", stdin=b"a\nb\nc\n")
    got = consume_json(kcat, bootstrap, topic)
    assert [m["payload"] for m in got] == ["a", "b", "c"]
    first_ts = got[0]["ts"]
    # -Q asks ListOffsets for the first offset with a timestamp >= the one given.
    out = run_kcat(kcat, bootstrap, "-Q", "-t", f"{topic}:0:{first_ts}")
    assert out.split() == [topic, "[0]", "offset", "0"], out
