"""Podman for the container tests: a private container engine state, and local stand-ins for
the base images, which these machines cannot pull.

Everything lives under one work folder (images, containers, volumes, networks, the engine's
configuration), so the machine's own podman set-up is never touched and the folder is
removed afterwards. The engine settings are what this kind of VM needs: runc (crun refuses
its hybrid cgroups), cgroupfs, default ulimits no higher than the VM allows, and events in a
file (no systemd). Podman schedules healthchecks with systemd timers, which are absent, so
`wait_healthy` runs `podman healthcheck run` itself.

Stand-ins, tagged with the exact names docker/Dockerfile's FROM and the compose files'
`image:` use: a Debian bookworm root filesystem from debootstrap (the machine's apt sources
and CA certificates copied in, so apt and pip work inside builds) imported as the base; on
it `python:3.11-slim-bookworm` (Debian's Python 3.11 as a venv at /usr/local, so python and
pip are in /usr/local/bin as in the official image) and `zookeeper:3.8` (Debian's ZooKeeper
and a JRE, started like the official image and answering `zkServer.sh status`). On a normal
Docker host none of this is needed: the real images are pulled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBIAN_SUITE = "bookworm"
BASE_IMAGE = "localhost/kbroker-test/debian:bookworm"
PYTHON_IMAGE = "python:3.11-slim-bookworm"
ZOOKEEPER_IMAGE = "zookeeper:3.8"
KBROKER_IMAGE = "kbroker:latest"
# Where Debian's netavark package puts the binary podman runs (not on the PATH).
NETAVARK_PATHS = (Path("/usr/lib/podman/netavark"), Path("/usr/libexec/podman/netavark"))

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "{tmp}"

[network]
network_backend = "netavark"
network_config_dir = "{networks}"
"""

STORAGE_CONF = """\
[storage]
driver = "overlay"
graphroot = "{graphroot}"
runroot = "{runroot}"
"""

PYTHON_CONTAINERFILE = f"""\
FROM {BASE_IMAGE}
RUN apt-get update -q \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \\
       python3 python3-venv \\
    && rm -rf /var/lib/apt/lists/* \\
    && python3 -m venv /usr/local
# The machine's CA bundle (copied into the base), for pip's build subprocesses too.
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
"""

# The official image's entrypoint writes zoo.cfg from ZOO_* variables and runs ZooKeeper in
# the foreground; `zkServer.sh status` must find the same configuration.
ZOOKEEPER_ENTRYPOINT = """\
#!/bin/sh
set -eu
mkdir -p /data /datalog
# Debian's zkEnv.sh reads its configuration from /etc/zookeeper/conf only.
cat > /etc/zookeeper/conf/zoo.cfg <<EOF
dataDir=/data
dataLogDir=/datalog
clientPort=2181
tickTime=2000
initLimit=5
syncLimit=2
4lw.commands.whitelist=*
admin.enableServer=false
EOF
echo "${ZOO_MY_ID:-1}" > /data/myid
exec zkServer.sh start-foreground
"""

ZOOKEEPER_CONTAINERFILE = f"""\
FROM {BASE_IMAGE}
RUN apt-get update -q \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \\
       zookeeper default-jre-headless netcat-openbsd \\
    && rm -rf /var/lib/apt/lists/*
COPY --chmod=0755 entrypoint.sh /docker-entrypoint.sh
ENV PATH=/usr/share/zookeeper/bin:/usr/sbin:/usr/bin:/sbin:/bin
EXPOSE 2181
ENTRYPOINT ["/docker-entrypoint.sh"]
"""


def missing_tools() -> list[str]:
    """The tools the container tests need that this machine lacks."""
    found = {name: shutil.which(name) for name in ("podman", "buildah", "runc", "debootstrap")}
    found["netavark"] = next((str(p) for p in NETAVARK_PATHS if p.exists()), None)
    found["podman-compose"] = shutil.which("podman-compose") or shutil.which(
        "podman-compose", path=str(Path(sys.executable).parent)
    )
    return [name for name, path in found.items() if path is None]


class Podman:
    """Podman and podman-compose with all state under `work`."""

    def __init__(self, work: Path) -> None:
        self.work = work
        for sub in ("storage", "run", "tmp", "networks"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        conf = work / "containers.conf"
        conf.write_text(CONTAINERS_CONF.format(tmp=work / "tmp", networks=work / "networks"))
        storage = work / "storage.conf"
        storage.write_text(STORAGE_CONF.format(graphroot=work / "storage", runroot=work / "run"))
        self.env = {
            **os.environ,
            "CONTAINERS_CONF": str(conf),
            "CONTAINERS_STORAGE_CONF": str(storage),
        }
        compose = shutil.which("podman-compose") or str(
            Path(sys.executable).parent / "podman-compose"
        )
        self._compose = compose

    def run(
        self, *args: str, check: bool = True, timeout: float = 900, cwd: Path = REPO_ROOT
    ) -> subprocess.CompletedProcess[str]:
        return self._command(["podman", *args], cwd, check, timeout)

    def compose(
        self, file: Path, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        command = [self._compose, "--podman-path", "podman", "-f", str(file), *args]
        return self._command(command, file.parent, check, timeout)

    def _command(
        self, command: list[str], cwd: Path, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            command, env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{Path(command[0]).name} {' '.join(command[1:])} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result

    def image_size_mb(self, image: str) -> float:
        return int(self.run("image", "inspect", "--format", "{{.Size}}", image).stdout) / 1e6

    def inspect(self, container: str) -> dict:
        return json.loads(self.run("inspect", container).stdout)[0]

    def wait_healthy(self, containers: list[str], timeout: float = 180) -> None:
        """Run each container's healthcheck until all pass (podman's timers need systemd)."""
        deadline = time.monotonic() + timeout
        waiting = list(containers)
        while waiting:
            waiting = [
                c for c in waiting if self.run("healthcheck", "run", c, check=False).returncode
            ]
            if waiting and time.monotonic() > deadline:
                logs = {c: self.run("logs", c, check=False).stderr[-2000:] for c in waiting}
                raise TimeoutError(f"not healthy after {timeout:.0f} s: {waiting}\n{logs}")
            if waiting:
                time.sleep(2)

    def reset(self) -> None:
        """Remove every container, image, volume and network of this state, then the folder."""
        self.run("system", "reset", "--force", check=False, timeout=300)
        subprocess.run(["umount", "-R", str(self.work / "storage")], capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)


def debootstrap_rootfs(target: Path) -> None:
    """A minimal Debian bookworm from the machine's own package archive, with its apt
    sources and CA certificates, so builds reach the package registries as the machine
    does."""
    mirror = _machine_mirror()
    subprocess.run(
        ["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(target), mirror],
        check=True,
        capture_output=True,
        timeout=900,
    )
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        (target / "etc/apt/sources.list").unlink(missing_ok=True)
        shutil.copy(sources, target / "etc/apt/sources.list.d/debian.sources")
    certs = Path("/etc/ssl/certs/ca-certificates.crt")
    (target / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
    shutil.copy(certs, target / "etc/ssl/certs/ca-certificates.crt")
    # And the local authorities the bundle was made from: installing ca-certificates in a
    # build regenerates the bundle from them.
    local = Path("/usr/local/share/ca-certificates")
    if local.is_dir():
        shutil.copytree(local, target / "usr/local/share/ca-certificates", dirs_exist_ok=True)


def _machine_mirror() -> str:
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    return "http://deb.debian.org/debian"


def build_stand_ins(podman: Podman) -> dict[str, float]:
    """Import the base and build the python and zookeeper stand-ins; seconds per step."""
    took: dict[str, float] = {}
    started = time.monotonic()
    rootfs = podman.work / "rootfs"
    debootstrap_rootfs(rootfs)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        ["podman", "import", "-", BASE_IMAGE],
        stdin=tar.stdout,
        env=podman.env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert tar.wait() == 0
    shutil.rmtree(rootfs, ignore_errors=True)
    took["base"] = time.monotonic() - started
    for name, image, containerfile, extra in (
        ("python", PYTHON_IMAGE, PYTHON_CONTAINERFILE, {}),
        (
            "zookeeper",
            ZOOKEEPER_IMAGE,
            ZOOKEEPER_CONTAINERFILE,
            {"entrypoint.sh": ZOOKEEPER_ENTRYPOINT},
        ),
    ):
        context = podman.work / f"context-{name}"
        context.mkdir()
        (context / "Containerfile").write_text(containerfile)
        for filename, text in extra.items():
            (context / filename).write_text(text)
        started = time.monotonic()
        podman.run("build", "--format", "docker", "-t", image, str(context), cwd=context)
        took[name] = time.monotonic() - started
    return took


def build_kbroker(podman: Podman) -> float:
    """Build docker/Dockerfile as `kbroker:latest` (Docker format, so HEALTHCHECK stays);
    seconds taken."""
    started = time.monotonic()
    podman.run("build", "--format", "docker", "-f", "docker/Dockerfile", "-t", KBROKER_IMAGE, ".")
    return time.monotonic() - started
