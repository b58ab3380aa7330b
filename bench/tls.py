"""What TLS costs: produce and consume throughput through a TLS listener and a plaintext
listener of the same kbroker in one run (kcat on confluent-kafka's librdkafka, one
partition, acks=1, 100-byte and 1 KB records, medians of alternating runs).

Tansu 0.6 (the bench extra) is left out: it accepts ``--cert`` (and ``--key``, though not
both together), but its listener still speaks plaintext (a TLS handshake times out).

Over plaintext kbroker sends fetched file data with sendfile; over TLS it must read it and
encrypt it in the process (Kafka loses zero-copy there too), so consume shows the
difference most.

    .venv/bin/python bench/tls.py [--repeat 3] [--records 1000000] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import throughput  # noqa: E402

from compat_tests.broker_process import BrokerProcess, free_port  # noqa: E402
from tests.security.certs import Pki, write_pki  # noqa: E402

Target = tuple[str, str, tuple[tuple[str, str], ...]]  # name, bootstrap, client security


@contextmanager
def kbroker_targets(work: Path, pki: Pki) -> Iterator[list[Target]]:
    plain, tls = free_port(), free_port()
    broker = BrokerProcess(work / "kbroker", port=plain)
    broker.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
    }
    broker.start(timeout=30)
    try:
        yield [
            ("kbroker-plaintext", broker.bootstrap, ()),
            ("kbroker-tls", f"127.0.0.1:{tls}", client_tls(pki)),
        ]
    finally:
        broker.stop()


def client_tls(pki: Pki) -> tuple[tuple[str, str], ...]:
    return (("security.protocol", "SSL"), ("ssl.ca.location", str(pki.ca)))


def measure(target: Target, records: int, size: int) -> dict[str, float]:
    name, bootstrap, security = target
    settings = throughput.Settings(
        bootstrap=bootstrap,
        topic=f"tls-{uuid.uuid4().hex[:10]}",
        records=records,
        record_size=size,
        producers=1,
        partitions=1,
        acks="1",
        linger_ms=5,
        batch_size=1_000_000,
        compression="none",
        security=security,
    )
    phases = throughput.run(settings, "kcat")
    throughput.delete_topic(settings)
    return {phase: result.msgs_per_s for phase, result in phases.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000, help="100-byte records")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = {100: args.records, 1000: max(1, args.records // 4)}
    runs: dict[str, dict[int, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-tls-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        pki = write_pki(work / "pki")
        targets = stack.enter_context(kbroker_targets(work, pki))
        for round_ in range(args.repeat):
            # Alternate the order from round to round, so neither side always goes first.
            ordered = targets if round_ % 2 == 0 else list(reversed(targets))
            for target in ordered:
                for size, records in sizes.items():
                    result = measure(target, records, size)
                    runs.setdefault(target[0], {}).setdefault(size, []).append(result)
                    print(f"round {round_ + 1} {target[0]:>17} {size:>5} B: {result}", flush=True)
    medians = {
        name: {
            size: {p: statistics.median(r[p] for r in results) for p in ("produce", "consume")}
            for size, results in by_size.items()
        }
        for name, by_size in runs.items()
    }
    print("\nmedian msgs/s (ratio TLS / plaintext)")
    for size in sizes:
        for phase in ("produce", "consume"):
            tls = medians["kbroker-tls"][size][phase]
            plain = medians["kbroker-plaintext"][size][phase]
            print(
                f"{size:>5} B {phase:>8}: TLS {tls:12,.0f}  plaintext {plain:12,.0f}  "
                f"ratio {tls / plain:.2f}"
            )
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "medians": medians}, indent=2) + "\n")


if __name__ == "__main__":
    main()
