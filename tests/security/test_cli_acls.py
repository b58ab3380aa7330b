"""``kbroker acls add|list|remove`` against a real broker process (issue 12, item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from compat_tests.broker_process import BrokerProcess

SECURED = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    # The CLI connects over PLAINTEXT, as User:ANONYMOUS.
    "super.users": "User:ANONYMOUS",
}


def acls_cli(broker: BrokerProcess, *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "kbroker", "acls", *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def listed(broker: BrokerProcess, *args: str) -> list[dict[str, Any]]:
    code, out, err = acls_cli(broker, "list", *args, "--json")
    assert code == 0, err
    result: list[dict[str, Any]] = json.loads(out)
    return result


def row(kind: str, name: str, principal: str, op: str, **kw: str) -> dict[str, str]:
    return {
        "resource_type": kind,
        "name": name,
        "pattern": kw.get("pattern", "Literal"),
        "principal": principal,
        "host": kw.get("host", "*"),
        "operation": op,
        "permission": kw.get("permission", "Allow"),
    }


def test_add_list_remove_and_persistence(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "secured", overrides=SECURED) as broker:
        code, out, err = acls_cli(
            broker, "add", "--allow-principal", "User:alice", "--operation", "Read",
            "--operation", "Write", "--topic", "t", "--group", "g",
        )  # fmt: skip
        assert code == 0, err
        assert "User:alice" in out and "Write" in out
        code, _, err = acls_cli(
            broker, "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1",
            "--topic", "fin", "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert code == 0, err
        everything = listed(broker)
        assert len(everything) == 5
        assert row("Topic", "fin", "User:bob", "All", pattern="Prefixed", host="10.0.0.1",
                   permission="Deny") in everything  # fmt: skip
        assert listed(broker, "--topic", "t") == [
            row("Topic", "t", "User:alice", "Read"),
            row("Topic", "t", "User:alice", "Write"),
        ]
        assert [r["name"] for r in listed(broker, "--topic", "finance", "--resource-pattern-type",
                                          "match")] == ["fin"]  # fmt: skip
        bob = [r for r in everything if r["principal"] == "User:bob"]
        assert len(bob) == 1 and listed(broker, "--principal", "User:bob") == bob

        code, out, err = acls_cli(
            broker, "remove", "--topic", "t", "--allow-principal", "User:alice",
            "--operation", "Write", "--json",
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out) == [row("Topic", "t", "User:alice", "Write")]
        code, _, err = acls_cli(broker, "remove", "--group", "g")
        assert code == 0, err
        remaining = listed(broker)
        assert sorted(r["name"] for r in remaining) == ["fin", "t"]

        code, _, err = acls_cli(broker, "add", "--allow-principal", "User:a", "--topic", "t",
                                "--operation", "Fly")  # fmt: skip
        assert code == 1 and "unknown AclOperation 'Fly'" in err

        broker.restart()
        assert listed(broker) == remaining


def test_refused_without_an_authorizer(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "open") as broker:
        code, _, err = acls_cli(broker, "list")
        assert code == 1
        assert "SECURITY_DISABLED" in err and "No Authorizer is configured." in err
