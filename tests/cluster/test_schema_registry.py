"""The schema registry on three brokers and ZooKeeper: registrations through every broker at
once never give one id to two schemas nor two ids to one; the broker leading ``_schemas`` killed
with kill -9, registration goes on through the others; everything survives a restart of the
whole cluster."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import partition_view, wait_for
from local_cluster import LocalCluster

from compat_tests.broker_process import free_port
from compat_tests.support import require
from compat_tests.zookeeper_process import java_available

pytestmark = pytest.mark.slow

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str = "GET", body: Any = None, retry_for: float = 60.0) -> Any:
    """One request, retried on 5xx and connection errors (as confluent-kafka's client
    retries) for up to ``retry_for`` seconds; the decoded answer of a 2xx."""
    deadline = time.monotonic() + retry_for
    while True:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": CONTENT_TYPE}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or time.monotonic() > deadline:
                raise AssertionError(f"{method} {url}: {exc.code} {exc.read()!r}") from None
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@pytest.fixture(scope="module")
def registry_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    require(java_available(), "ZooKeeper (Debian package) and java are needed")
    local = LocalCluster(Path(tmp_path_factory.mktemp("registry-cluster")))
    for broker in local.brokers.values():
        broker.overrides["schema.registry.listeners"] = f"http://127.0.0.1:{free_port()}"
    try:
        local.start()
        for url in urls(local):
            call(f"{url}/subjects")
        yield local
    finally:
        local.kill_all()


def urls(cluster: LocalCluster, running_only: bool = False) -> list[str]:
    return [
        b.overrides["schema.registry.listeners"]
        for b in cluster.brokers.values()
        if b.running() or not running_only
    ]


def record_schema(name: str) -> dict[str, str]:
    return {
        "schema": json.dumps(
            {"type": "record", "name": name, "fields": [{"name": "f", "type": "string"}]}
        )
    }


def test_concurrent_registrations_through_every_broker(registry_cluster: LocalCluster) -> None:
    endpoints = urls(registry_cluster)
    # Unrelated record types share subjects here: no compatibility rules between them.
    call(f"{endpoints[1]}/config", "PUT", {"compatibility": "NONE"})
    jobs = []
    for i in range(300):
        # Every schema twice, through different brokers and under different subjects.
        schema = record_schema(f"R{i % 150}")
        subject = f"concurrent-{i % 10}-value" if i < 150 else f"again-{i % 7}-value"
        jobs.append((endpoints[i % 3], subject, schema))

    def register(job: tuple[str, str, dict[str, str]]) -> tuple[str, int]:
        url, subject, schema = job
        answer = call(f"{url}/subjects/{subject}/versions", "POST", schema)
        return schema["schema"], int(answer["id"])

    started = time.monotonic()
    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(register, jobs))
    took = time.monotonic() - started
    ids_of: dict[str, set[int]] = {}
    for schema, schema_id in results:
        ids_of.setdefault(schema, set()).add(schema_id)
    assert all(len(ids) == 1 for ids in ids_of.values()), "one schema got several ids"
    all_ids = [next(iter(ids)) for ids in ids_of.values()]
    assert len(set(all_ids)) == 150, "two schemas got one id"
    print(f"\n300 registrations (150 schemas) through 3 brokers in {took:.1f} s")
    # Every broker answers the same, once it has read the writes.
    for url in endpoints:
        for schema, (schema_id,) in list(ids_of.items())[:20]:
            got = wait_for(
                lambda url=url, schema_id=schema_id: call(f"{url}/schemas/ids/{schema_id}"),
                30,
                "the id on every broker",
            )
            assert json.loads(got["schema"]) == json.loads(schema)


def test_registration_goes_on_when_the_registry_leader_is_killed(
    registry_cluster: LocalCluster,
) -> None:
    before = max(s["id"] for s in call(f"{urls(registry_cluster)[0]}/schemas"))
    view = partition_view(registry_cluster, "_schemas")
    assert view is not None
    leader = registry_cluster.brokers[view.leader]
    leader.kill()
    survivors = urls(registry_cluster, running_only=True)
    started = time.monotonic()
    first = call(f"{survivors[0]}/subjects/after-kill-value/versions", "POST", record_schema("K0"))
    print(f"\nfirst registration {time.monotonic() - started:.1f} s after the kill -9")
    ids = {first["id"]}
    for i in range(1, 20):
        answer = call(
            f"{survivors[i % 2]}/subjects/after-kill-value/versions",
            "POST",
            record_schema(f"K{i}"),
        )
        ids.add(answer["id"])
    assert len(ids) == 20 and min(ids) > before
    new_view = partition_view(registry_cluster, "_schemas")
    assert new_view is not None and new_view.leader != view.leader
    leader.start(timeout=60)
    registry_cluster.wait_registered()


def test_all_data_survives_a_restart_of_the_cluster(registry_cluster: LocalCluster) -> None:
    url = urls(registry_cluster)[0]
    call(f"{url}/config/after-kill-value", "PUT", {"compatibility": "FULL"})
    subjects = call(f"{url}/subjects")
    versions = {s: call(f"{url}/subjects/{s}/versions") for s in subjects}
    registry_cluster.stop()
    registry_cluster.zookeeper.start()
    for broker in registry_cluster.brokers.values():
        broker.start(timeout=60)
    registry_cluster.wait_registered()
    for url in urls(registry_cluster):
        assert wait_for(lambda url=url: call(f"{url}/subjects") == subjects, 60, "subjects back")
        assert {s: call(f"{url}/subjects/{s}/versions") for s in subjects} == versions
        assert call(f"{url}/config/after-kill-value") == {"compatibilityLevel": "FULL"}
