"""docker/Dockerfile and both compose files, built and run for real with podman and
podman-compose (issue 14; `make docker-test`), checked from outside with our CLI and stock
clients (kcat, confluent-kafka) and from inside the compose network.

The tests need root, podman and its helpers, debootstrap and podman-compose, which `make
test` installs; where they are missing the tests skip, except under CI=true where that is a
failure. Base images are local stand-ins (tests/docker/podman_env.py). Figures (build times,
image size, stop times) are printed; `make docker-test` shows them.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.support import require
from tests.docker.podman_env import (
    KBROKER_IMAGE,
    REPO_ROOT,
    Podman,
    build_kbroker,
    build_stand_ins,
    missing_tools,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SINGLE = REPO_ROOT / "docker" / "docker-compose.single.yml"
CLUSTER = REPO_ROOT / "docker" / "docker-compose.yml"
CLUSTER_BOOTSTRAP = "localhost:19092,localhost:19093,localhost:19094"
BROKERS = ("kbroker-1", "kbroker-2", "kbroker-3")
# docker's and podman's default stop timeout: a broker must be down well before SIGKILL.
GRACE_SECONDS = 10
KBROKER_CLI = str(Path(os.environ.get("VIRTUAL_ENV", REPO_ROOT / ".venv")) / "bin" / "kbroker")


def report(line: str) -> None:
    print(f"[docker-test] {line}", flush=True)


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    require(os.geteuid() == 0, "the container tests run podman as root")
    missing = missing_tools()
    require(not missing, f"container tools missing: {', '.join(missing)} (make test installs them)")
    engine = Podman(tmp_path_factory.mktemp("podman"))
    try:
        info = engine.run("info", check=False)
        require(info.returncode == 0, f"podman cannot run here: {info.stderr[-500:]}")
        took = build_stand_ins(engine)
        report(
            "stand-ins: debian base (debootstrap + import) {base:.0f} s, python {python:.0f} s, "
            "zookeeper {zookeeper:.0f} s".format(**took)
        )
        cold = build_kbroker(engine)
        cached = build_kbroker(engine)
        report(
            f"kbroker image: cold build {cold:.1f} s, cached build {cached:.1f} s, "
            f"size {engine.image_size_mb(KBROKER_IMAGE):.0f} MB"
        )
        yield engine
    finally:
        engine.reset()


def container(project: str, service: str) -> str:
    return f"{project}_{service}_1"


def stop_and_check(podman: Podman, name: str) -> float:
    """Stop one container with the default grace period: it must exit 0 by itself, having
    logged its clean shutdown; returns the seconds it took."""
    before = podman.inspect(name)["State"]
    started = time.monotonic()
    stopped = podman.run("stop", "-t", str(GRACE_SECONDS), name, check=False)
    took = time.monotonic() - started
    state = podman.inspect(name)["State"]
    output = podman.run("logs", name)
    logs = output.stderr + output.stdout
    detail = f"before: {before}\nafter: {state}\n{stopped.stderr}\n{logs[-3000:]}"
    assert stopped.returncode == 0, f"podman stop {name} failed\n{detail}"
    assert state["ExitCode"] == 0, f"{name} exited with {state['ExitCode']}\n{detail}"
    assert "shut down cleanly" in logs, detail
    assert took < GRACE_SECONDS, f"{name} took {took:.1f} s to stop"
    return took


def kcat(*args: str, data: str | None = None) -> str:
    result = subprocess.run(
        ["kcat", *args], input=data, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout


def cli(*args: str) -> str:
    result = subprocess.run(
        [KBROKER_CLI, *args], capture_output=True, text=True, timeout=120, check=True
    )
    return result.stdout


def describe_line(text: str) -> dict[str, int]:
    """The counts of `kbroker cluster describe`'s summary line."""
    line = next(x for x in text.splitlines() if x.startswith("Topics:"))
    words = line.replace(":", "").split()
    return {
        "topics": int(words[1]),
        "partitions": int(words[3]),
        "under_replicated": int(words[5]),
        "offline": int(words[7]),
    }


def wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def test_single_broker(podman: Podman) -> None:
    project = "kbt-single"
    name = container(project, "kbroker")
    podman.compose(SINGLE, "-p", project, "up", "-d")
    try:
        started = time.monotonic()
        podman.wait_healthy([name])
        report(f"single broker healthy after {time.monotonic() - started:.1f} s")
        kcat("-b", "localhost:9092", "-t", "smoke", "-P", data="one\ntwo\nthree\n")
        out = kcat("-b", "localhost:9092", "-t", "smoke", "-C", "-e", "-q", "-o", "beginning")
        assert out.split() == ["one", "two", "three"]
        report("single broker: produced and consumed from the host with kcat")
        report(f"single broker stopped cleanly in {stop_and_check(podman, name):.2f} s")
    finally:
        podman.compose(SINGLE, "-p", project, "down", "-v", check=False)


def _produce(topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": CLUSTER_BOOTSTRAP, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"record-%d" % i)
    assert producer.flush(60) == 0


def _consume_all(topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": CLUSTER_BOOTSTRAP, "group.id": f"check-{time.time()}"}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < expected and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(500, timeout=1) if m.error() is None]
    consumer.close()
    return values


def test_cluster(podman: Podman) -> None:
    project = "kbt-cluster"
    names = [container(project, s) for s in ("zookeeper", *BROKERS)]
    zookeeper, brokers = names[0], names[1:]
    podman.compose(CLUSTER, "-p", project, "up", "-d")
    try:
        started = time.monotonic()
        podman.wait_healthy(names)
        report(f"ZooKeeper and three brokers healthy after {time.monotonic() - started:.1f} s")

        outside = cli("cluster", "describe", "--bootstrap-server", "localhost:19092")
        assert [line.split()[0] for line in outside.splitlines()[3:6]] == ["1", "2", "3"]
        inside = podman.run(
            "exec",
            brokers[0],
            "kbroker",
            "cluster",
            "describe",
            "--bootstrap-server",
            "kbroker-2:9092",
        ).stdout
        assert "kbroker-1" in inside and "kbroker-3" in inside
        report("cluster describe shows brokers 1, 2, 3 from the host and from inside")

        cli(
            "topics",
            "create",
            "--bootstrap-server",
            "localhost:19092",
            "--topic",
            "replicated",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        )
        _produce("replicated", 300)
        assert len(_consume_all("replicated", 3, 300)) == 300
        report("RF=3 topic: 300 records written with acks=all and read back")

        podman.run("stop", "-t", str(GRACE_SECONDS), brokers[1])
        wait_for(
            lambda: (
                describe_line(cli("cluster", "describe", "--bootstrap-server", "localhost:19092"))[
                    "under_replicated"
                ]
                > 0
            ),
            60,
            "under-replicated partitions",
        )
        podman.run("start", brokers[1])
        wait_for(
            lambda: (
                describe_line(cli("cluster", "describe", "--bootstrap-server", "localhost:19092"))[
                    "under_replicated"
                ]
                == 0
            ),
            120,
            "the ISR to be full again",
        )
        report("broker 2 stopped (under-replicated > 0) and started (back to 0)")

        # Brokers first (compose's order), then down and up: the named volumes keep the data.
        podman.compose(CLUSTER, "-p", project, "stop")
        for name in brokers:
            assert podman.inspect(name)["State"]["ExitCode"] == 0, name
        podman.compose(CLUSTER, "-p", project, "down")
        podman.compose(CLUSTER, "-p", project, "up", "-d")
        podman.wait_healthy(names)
        assert sorted(_consume_all("replicated", 3, 300)) == sorted(
            b"record-%d" % i for i in range(300)
        )
        report("down then up: the 300 records are still there")

        # ZooKeeper first: the brokers still stop cleanly and in time.
        podman.run("stop", "-t", str(GRACE_SECONDS), zookeeper)
        for name in brokers:
            report(
                f"{name} stopped cleanly in {stop_and_check(podman, name):.2f} s (ZooKeeper down)"
            )
    finally:
        podman.compose(CLUSTER, "-p", project, "down", "-v", check=False)


SECURE = REPO_ROOT / "docker" / "docker-compose.secure.yml"


def test_secure_cluster(podman: Podman, tmp_path: Path) -> None:
    """docker/make-certs.sh, then the SASL_SSL compose file: the brokers' SCRAM user is made
    in ZooKeeper first, they replicate over SASL_SSL, and clients on the host get in with
    the admin user and the CA, and not without them."""
    secrets = tmp_path / "secrets"
    subprocess.run(["sh", str(REPO_ROOT / "docker" / "make-certs.sh"), str(secrets)], check=True)
    secrets.chmod(0o755)  # the brokers run as uid 10001
    podman.env["KBROKER_SECRETS"] = str(secrets)
    project = "kbt-secure"
    names = [container(project, s) for s in ("zookeeper", *BROKERS)]
    podman.compose(SECURE, "-p", project, "up", "-d")
    try:
        started = time.monotonic()
        podman.wait_healthy(names)
        report(f"secure cluster healthy after {time.monotonic() - started:.1f} s")
        client = [
            "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512",
            "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret",
            "-X", f"ssl.ca.location={secrets / 'ca.pem'}",
        ]  # fmt: skip
        properties = tmp_path / "admin.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.username=admin\nsasl.password=admin-secret\n"
            f"ssl.ca.location={secrets / 'ca.pem'}\n"
        )
        cli(
            "topics", "create", "--topic", "secure", "--partitions", "3",
            "--replication-factor", "3", "--bootstrap-server", "localhost:19092",
            "--command-config", str(properties),
        )  # fmt: skip
        kcat("-b", CLUSTER_BOOTSTRAP, *client, "-t", "secure", "-P", "-X", "acks=all",
             data="".join(f"r{i}\n" for i in range(100)))  # fmt: skip
        out = kcat(
            "-b", CLUSTER_BOOTSTRAP, *client, "-t", "secure", "-C", "-e", "-q", "-o", "beginning"
        )
        assert sorted(out.split()) == sorted(f"r{i}" for i in range(100))
        described = cli(
            "cluster", "describe", "--bootstrap-server", "localhost:19092",
            "--command-config", str(properties),
        )  # fmt: skip
        assert describe_line(described)["under_replicated"] == 0
        report("secure cluster: topic RF=3 written with acks=all and read back over SASL_SSL")
        wrong = [*client[:6], "-X", "sasl.password=wrong", *client[8:]]
        refused = subprocess.run(
            ["kcat", "-b", "localhost:19092", *wrong, "-L", "-m", "5"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert refused.returncode != 0 and "Authentication failed" in refused.stderr
        plaintext = subprocess.run(
            ["kcat", "-b", "localhost:19092", "-L", "-m", "5"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert plaintext.returncode != 0
        report("secure cluster: a wrong password and a plaintext client are refused")
    finally:
        podman.compose(SECURE, "-p", project, "down", "-v", check=False)
        podman.env.pop("KBROKER_SECRETS", None)
