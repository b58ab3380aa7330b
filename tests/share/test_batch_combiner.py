"""Combining a write's state batches with the stored ones: scenarios, a per-offset model, and
Kafka 4.3's own combiner (its PersisterStateBatchCombiner class, run from ../shared/kafka-4.3's
jars) on random cases."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compat_tests.kafka_process import KAFKA43_HOME, kafka43_available
from compat_tests.support import require
from kbroker.share.batch_combiner import combine_batches
from kbroker.share.persister_api import StateBatch

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def b(first: int, last: int, state: int, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


@pytest.mark.parametrize(
    ("stored", "written", "start", "combined"),
    [
        # Nothing, or one batch, stays as it is.
        ([], [], -1, []),
        ([b(0, 9, AVAILABLE, 1)], [], -1, [b(0, 9, AVAILABLE, 1)]),
        # Acknowledging part of an available batch splits it.
        (
            [b(0, 9, AVAILABLE, 1)],
            [b(3, 5, ACKNOWLEDGED, 1)],
            -1,
            [b(0, 2, AVAILABLE, 1), b(3, 5, ACKNOWLEDGED, 1), b(6, 9, AVAILABLE, 1)],
        ),
        # A later delivery wins whatever its state (Kafka 4.3 answered the same).
        (
            [b(5, 9, ACKNOWLEDGED, 1)],
            [b(7, 12, AVAILABLE, 2)],
            -1,
            [b(5, 6, ACKNOWLEDGED, 1), b(7, 12, AVAILABLE, 2)],
        ),
        # Adjacent batches in the same state merge; gaps stay gaps.
        (
            [b(0, 4, ACKNOWLEDGED, 1), b(10, 12, ARCHIVED, 1)],
            [b(5, 6, ACKNOWLEDGED, 1)],
            -1,
            [b(0, 6, ACKNOWLEDGED, 1), b(10, 12, ARCHIVED, 1)],
        ),
        # The start offset drops what ends before it and cuts what straddles it.
        (
            [b(0, 4, ACKNOWLEDGED, 1), b(5, 9, AVAILABLE, 1)],
            [b(12, 12, ARCHIVED, 3)],
            7,
            [b(7, 9, AVAILABLE, 1), b(12, 12, ARCHIVED, 3)],
        ),
        # Kafka's write of [1, 10] after an initialize at 4, replayed: cut to the start.
        ([], [b(1, 10, ACKNOWLEDGED, 1)], 4, [b(4, 10, ACKNOWLEDGED, 1)]),
        # An empty batch covers nothing.
        ([b(5, 4, AVAILABLE, 1)], [b(0, 1, AVAILABLE, 1)], -1, [b(0, 1, AVAILABLE, 1)]),
    ],
)
def test_scenarios(
    stored: list[StateBatch], written: list[StateBatch], start: int, combined: list[StateBatch]
) -> None:
    assert combine_batches(stored, written, start) == tuple(combined)


def per_offset(batches: list[StateBatch], start: int) -> dict[int, tuple[int, int]]:
    """The model: each offset from the start on takes the greatest (count, state) covering it."""
    best: dict[int, tuple[int, int]] = {}
    for batch in batches:
        for offset in range(max(batch.first_offset, start), batch.last_offset + 1):
            best[offset] = max(
                best.get(offset, (-1, -1)), (batch.delivery_count, batch.delivery_state)
            )
    return best


def expand(batches: tuple[StateBatch, ...]) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for batch in batches:
        for offset in range(batch.first_offset, batch.last_offset + 1):
            assert offset not in out, f"overlapping batches {batches}"
            out[offset] = (batch.delivery_count, batch.delivery_state)
    return out


small_batches = st.lists(
    st.builds(
        lambda first, length, state, count: StateBatch(first, first + length, state, count),
        st.integers(0, 40),
        st.integers(0, 10),
        st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
        st.integers(1, 4),
    ),
    max_size=8,
)


@given(small_batches, small_batches, st.one_of(st.just(-1), st.integers(0, 45)))
def test_every_offset_takes_the_latest_delivery_and_runs_are_maximal(
    stored: list[StateBatch], written: list[StateBatch], start: int
) -> None:
    combined = combine_batches(stored, written, start)
    assert expand(combined) == per_offset([*stored, *written], start)
    for before, after in zip(combined, combined[1:], strict=False):
        assert before.last_offset < after.first_offset
        if before.last_offset + 1 == after.first_offset:
            assert (before.delivery_count, before.delivery_state) != (
                after.delivery_count,
                after.delivery_state,
            )


ORACLE = """
import java.io.*;
import java.util.*;
import org.apache.kafka.coordinator.share.PersisterStateBatchCombiner;
import org.apache.kafka.server.share.persister.PersisterStateBatch;

public class CombineOracle {
    static List<PersisterStateBatch> batches(String text) {
        List<PersisterStateBatch> out = new ArrayList<>();
        for (String b : text.trim().split(" ")) {
            if (b.isEmpty()) continue;
            String[] f = b.split(":");
            out.add(new PersisterStateBatch(Long.parseLong(f[0]), Long.parseLong(f[1]),
                Byte.parseByte(f[2]), Short.parseShort(f[3])));
        }
        return out;
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String[] parts = line.split("[|]", -1);
            for (PersisterStateBatch b : new PersisterStateBatchCombiner(batches(parts[1]),
                    batches(parts[2]), Long.parseLong(parts[0])).combineStateBatches())
                out.append(b.firstOffset()).append(':').append(b.lastOffset()).append(':')
                    .append(b.deliveryState()).append(':').append(b.deliveryCount()).append(' ');
            out.append('\\n');
        }
        System.out.print(out);
    }
}
"""


def _text(batches: list[StateBatch]) -> str:
    return " ".join(
        f"{x.first_offset}:{x.last_offset}:{x.delivery_state}:{x.delivery_count}" for x in batches
    )


def _parse(line: str) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(*map(int, item.split(":"))) for item in line.split())


@pytest.mark.slow
def test_kafka_combiner_gives_every_offset_the_same_state(tmp_path: Path) -> None:
    """Kafka's combiner may leave two neighbours with the same state apart where this one
    merges them; offset by offset the outcome is the same."""
    require(
        kafka43_available() and shutil.which("javac") is not None,
        "javac and Apache Kafka 4.3 (../shared/kafka-4.3) are needed",
    )
    classpath = str(KAFKA43_HOME / "libs" / "*")
    (tmp_path / "CombineOracle.java").write_text(ORACLE)
    subprocess.run(
        ["javac", "-d", str(tmp_path), "-cp", classpath, str(tmp_path / "CombineOracle.java")],
        check=True,
        timeout=120,
    )
    rng = random.Random(932)

    def batch() -> StateBatch:
        first = rng.randint(0, 40)
        return StateBatch(
            first, first + rng.randint(0, 12), rng.choice([0, 2, 4]), rng.randint(1, 4)
        )

    cases = [
        (
            rng.choice([-1, -1, rng.randint(0, 45)]),
            [batch() for _ in range(rng.randint(0, 6))],
            [batch() for _ in range(rng.randint(0, 6))],
        )
        for _ in range(5000)
    ]
    answers = subprocess.run(
        ["java", "-Xshare:auto", "-cp", f"{tmp_path}:{classpath}", "CombineOracle"],
        input="".join(f"{start}|{_text(s)}|{_text(w)}\n" for start, s, w in cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    assert len(answers) == len(cases)
    for (start, stored, written), answer in zip(cases, answers, strict=True):
        ours = combine_batches(stored, written, start)
        assert expand(ours) == expand(_parse(answer)), (start, stored, written, answer)
