"""Run seeded fault schedules against ZooKeeper and three brokers in network namespaces.

    python -m chaos.run --seed 7 --duration 60          # one schedule
    python -m chaos.run --seed 7 --runs 5               # seeds 7..11, one after the other
    python -m chaos.run --seed 7 --acks 1 --kinds partition
    python -m chaos.run --seed 7 --runs 5 --overlap 3  # two or three faults at once

Needs root (namespaces, iptables, tmpfs mounts). Namespaces are named ``kbchaos-<pid>-*``;
every namespace, iptables rule, mount and process made here is removed when the run ends,
however it ends. Each run is bounded: the schedule ends by ``--duration``, then the workload
flushes and reads back for at most a few minutes. Prints the schedule, then the checker's
report and the availability per fault mix (chaos/availability.py) as JSON; exits 1 when an
acks=all run is not safe. Work files (history, node logs) stay under ``--dir`` (a temp dir
by default).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chaos.availability import aggregate_mixes, per_mix
from chaos.checker import aggregate, check
from chaos.schedule import KINDS, Fault, make_schedule, mix_name, mixes
from kbroker.broker import EXIT_LOG_DIRS_FAILED
from tests.cluster.local_cluster import FAST_FAILOVER
from tests.ops.compose_emulation import (
    REPO,
    Network,
    start_zookeeper,
    tool_env,
    wait_until,
    zookeeper_healthy,
)

ZOOKEEPER = "zookeeper"
BROKERS = ("broker-1", "broker-2", "broker-3")
CLIENT = "client"
BROKER_PORT = 9092
SESSION_TIMEOUT_MS = 6000
LOG_DIR_BYTES = 64 * 1024 * 1024
BROKER_SETTINGS = {
    **FAST_FAILOVER,
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "log.segment.bytes": str(8 * 1024 * 1024),
}


class ChaosCluster:
    """ZooKeeper, three brokers and a client host, each in its own namespace."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.net = Network(work_dir)
        self.net.tag = f"kbchaos-{os.getpid()}"
        self.net.switch = f"{self.net.tag}-sw"
        self.mounts: list[Path] = []
        self.unexpected_exits: list[str] = []
        # Brokers that shut down because their log directory failed, restarted once freed.
        self.disk_restarts: list[str] = []

    def address(self, host: str) -> str:
        return self.net.hosts[host][1]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.address(b)}:{BROKER_PORT}" for b in BROKERS)

    def log_dir(self, broker: str) -> Path:
        return self.work_dir / f"{broker}-logs"

    def open(self) -> None:
        self.net.open([ZOOKEEPER, *BROKERS, CLIENT])
        start_zookeeper(self.net, self.work_dir)
        wait_until(
            lambda: zookeeper_healthy(self.net, CLIENT), "zookeeper", 60, self.net, [ZOOKEEPER]
        )
        for broker in BROKERS:
            directory = self.log_dir(broker)
            directory.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={LOG_DIR_BYTES}", "tmpfs", str(directory)],
                check=True,
                capture_output=True,
            )
            self.mounts.append(directory)
            self.start_broker(broker)

    def start_broker(self, broker: str) -> None:
        settings = {
            **BROKER_SETTINGS,
            "broker.id": broker.removeprefix("broker-"),
            "listeners": f"PLAINTEXT://{self.address(broker)}:{BROKER_PORT}",
            "zookeeper.connect": f"{self.address(ZOOKEEPER)}:2181",
            "log.dirs": str(self.log_dir(broker)),
        }
        argv = [sys.executable, "-m", "kbroker", "start"]
        for key, value in settings.items():
            argv += ["--override", f"{key}={value}"]
        self.net.start(broker, argv, {**tool_env(), "PYTHONPATH": str(REPO)})

    def start_workload(self, duration: float, acks: str, out: Path) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable,
            "-m",
            "chaos.workload",
            "--bootstrap",
            self.bootstrap,
            "--duration",
            str(duration),
            "--acks",
            acks,
            "--out",
            str(out),
        ]
        self.net.start(CLIENT, argv, {**tool_env(), "PYTHONPATH": str(REPO)})
        return self.net.processes[CLIENT]

    # Faults -------------------------------------------------------------------------------

    def _iptables(self, host: str, *args: str) -> None:
        subprocess.run(
            ["ip", "netns", "exec", self.net.hosts[host][0], "iptables", *args],
            check=True,
            capture_output=True,
            timeout=30,
        )

    def partition(self, side: set[str], others: set[str]) -> list[tuple[str, ...]]:
        """Drop every packet between ``side`` and ``others`` (the client reaches all); the
        rules added, for ``heal_partition``."""
        rules: list[tuple[str, ...]] = []
        for a in side:
            for b in others:
                for host, peer in ((a, b), (b, a)):
                    rules.append((host, "INPUT", "-s", self.address(peer), "-j", "DROP"))
                    rules.append((host, "OUTPUT", "-d", self.address(peer), "-j", "DROP"))
        for host, *rule in rules:
            self._iptables(host, "-A", *rule)
        return rules

    def heal_partition(self, rules: list[tuple[str, ...]]) -> None:
        """Delete one copy of each rule: another fault's identical rules stay in force."""
        for host, *rule in rules:
            self._iptables(host, "-D", *rule)

    def signal(self, broker: str, signum: int) -> None:
        self.net.processes[broker].send_signal(signum)

    def kill(self, broker: str) -> None:
        self.net.kill(broker)

    def fill(self, broker: str) -> None:
        """Write a file until the log directory's file system is full."""
        chunk = b"\0" * (1 << 20)
        with open(self.log_dir(broker) / "filler", "wb") as f:
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise

    def free(self, broker: str) -> None:
        """Give the space back; a broker that shut down because its only log directory
        failed (KIP-112) is started again, as its supervisor would."""
        (self.log_dir(broker) / "filler").unlink(missing_ok=True)
        proc = self.net.processes.get(broker)
        if proc is not None and proc.poll() == EXIT_LOG_DIRS_FAILED:
            self.disk_restarts.append(broker)
            print(f"  .. {broker} had shut down on its full disk; restarting", flush=True)
            self.net.processes.pop(broker)
            self.start_broker(broker)

    def check_alive(self, expected_down: set[str]) -> None:
        """Restart (and record) any broker that exited by itself, except those whose active
        fault stops them (a full disk)."""
        for broker in BROKERS:
            proc = self.net.processes.get(broker)
            if broker in expected_down or proc is None or proc.poll() is None:
                continue
            self.unexpected_exits.append(f"{broker} exited with {proc.returncode}")
            print(f"  !! {broker} exited by itself ({proc.returncode}); restarting", flush=True)
            self.net.processes.pop(broker)
            self.start_broker(broker)

    def close(self) -> None:
        for proc in self.net.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        self.net.close()
        for directory in self.mounts:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)
        self.mounts.clear()


class Injector:
    """Applies faults and heals them, several at once when their mixes overlap."""

    def __init__(self, cluster: ChaosCluster) -> None:
        self.cluster = cluster
        self.rules: dict[Fault, list[tuple[str, ...]]] = {}
        self.active: set[Fault] = set()

    def apply(self, fault: Fault) -> None:
        node = fault.nodes[0]
        if fault.kind == "partition":
            others = {ZOOKEEPER, *BROKERS} - set(fault.nodes)
            self.rules[fault] = self.cluster.partition(set(fault.nodes), others)
        elif fault.kind == "zk-cut":
            self.rules[fault] = self.cluster.partition({node}, {ZOOKEEPER})
        elif fault.kind == "pause":
            self.cluster.signal(node, signal.SIGSTOP)
        elif fault.kind == "kill":
            self.cluster.kill(node)
        elif fault.kind == "disk":
            self.cluster.fill(node)
        else:
            raise ValueError(fault.kind)
        self.active.add(fault)

    def heal(self, fault: Fault) -> None:
        node = fault.nodes[0]
        self.active.discard(fault)
        if fault.kind in ("partition", "zk-cut"):
            self.cluster.heal_partition(self.rules.pop(fault))
        elif fault.kind == "pause":
            self.cluster.signal(node, signal.SIGCONT)
        elif fault.kind == "kill":
            self.cluster.start_broker(node)
        elif fault.kind == "disk":
            self.cluster.free(node)

    def expected_down(self) -> set[str]:
        """Brokers that may have stopped because of an active fault."""
        return {f.nodes[0] for f in self.active if f.kind == "disk"}


def timeline(schedule: list[Fault]) -> list[tuple[float, bool, Fault]]:
    """(time, is_apply, fault) for every apply and heal, in order; at the same instant a
    heal comes first, so a fault never outlives its end."""
    events = [(f.at, True, f) for f in schedule] + [(f.end, False, f) for f in schedule]
    return sorted(events, key=lambda e: (e[0], e[1]))


def run_schedule(
    seed: int,
    duration: float,
    acks: str,
    kinds: tuple[str, ...],
    work_dir: Path,
    overlap: int = 1,
) -> dict[str, Any]:
    """One schedule on a fresh cluster; the checker's summary."""
    schedule = make_schedule(
        seed, duration, ZOOKEEPER, BROKERS, SESSION_TIMEOUT_MS / 1000, kinds, overlap
    )
    print(
        f"seed {seed}: {len(schedule)} faults over {duration:.0f}s, acks={acks}, overlap={overlap}",
        flush=True,
    )
    for fault in schedule:
        print("  " + fault.describe(), flush=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / "history.json"
    cluster = ChaosCluster(work_dir)
    applied: dict[Fault, list[Any]] = {}
    try:
        cluster.open()
        workload = cluster.start_workload(duration, acks, out)
        ready = Path(f"{out}.ready")
        wait_until(
            lambda: ready.exists() or workload.poll() is not None,
            "workload ready",
            180,
            cluster.net,
            [*BROKERS, CLIENT],
        )
        if not ready.exists():
            raise RuntimeError(cluster.net.log_tail(CLIENT))
        injector = Injector(cluster)
        t0 = time.monotonic()
        for at, is_apply, fault in timeline(schedule):
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            if is_apply:
                cluster.check_alive(injector.expected_down())
                applied[fault] = [time.time()]
                injector.apply(fault)
            else:
                injector.heal(fault)
                applied[fault].append(time.time())
        time.sleep(max(0.0, t0 + duration - time.monotonic()))
        cluster.check_alive(set())
        Path(f"{out}.healed").touch()
        workload.wait(300)
        if workload.returncode != 0:
            raise RuntimeError(cluster.net.log_tail(CLIENT))
    finally:
        cluster.close()
    history = json.loads(out.read_text())
    history["faults"] = [[*applied[f], f.kind, list(f.nodes)] for f in schedule]
    history["mixes"] = [
        [min(applied[f][0] for f in mix), max(applied[f][1] for f in mix), mix_name(mix)]
        for mix in mixes(schedule)
    ]
    out.write_text(json.dumps(history))
    summary = check(history).summary()
    summary.update(
        seed=seed,
        acks=acks,
        overlap=overlap,
        faults=_counts(schedule),
        mixes=per_mix(history),
        unexpected_exits=cluster.unexpected_exits,
        disk_restarts=cluster.disk_restarts,
    )
    return summary


def _counts(schedule: list[Fault]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for fault in schedule:
        counts[fault.kind] = counts.get(fault.kind, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--acks", choices=["all", "1"], default="all")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument(
        "--overlap",
        type=int,
        default=1,
        help="faults active at once: 1 is one at a time; N > 1 gives mixes of 2..N faults",
    )
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    kinds = tuple(args.kinds.split(","))
    base = args.dir or Path(tempfile.mkdtemp(prefix="kbchaos-"))
    # SIGTERM cleans up like Ctrl-C (the finally blocks run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    summaries = []
    for seed in range(args.seed, args.seed + args.runs):
        work_dir = base / f"seed-{seed}"
        summary = run_schedule(seed, args.duration, args.acks, kinds, work_dir, args.overlap)
        print(json.dumps(summary), flush=True)
        summaries.append(summary)
    print("all runs: " + json.dumps(aggregate(summaries)))
    windows = [window for s in summaries for window in s["mixes"]]
    print("per fault mix: " + json.dumps(aggregate_mixes(windows)))
    failed = sum(args.acks == "all" and not s["safe"] for s in summaries)
    verdict = (
        f"{args.runs - failed} of {args.runs} schedules safe"
        if args.acks == "all"
        else ("acks=1: loss is expected under leader partitions (see each run's lost count)")
    )
    print(f"{verdict}; work files under {base}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
