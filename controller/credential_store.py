"""SCRAM credentials as both metadata backends store them (KIP-84, KIP-554).

The table maps a user to its credentials by mechanism (kbroker.security.scram). ZooKeeper
keeps them where Kafka does: in the user's config znode ``/config/users/<user>``, next to
the user's quotas, as ``{"version": 1, "config": {"SCRAM-SHA-256": "salt=...,stored_key=
...,server_key=...,iterations=4096"}}``, followed by a ``/config/changes/config_change_``
notification naming ``users/<user>``. The embedded backend keeps
``{"<user>": {"SCRAM-SHA-256": "salt=..."}}`` in its state file.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from controller import zk_paths
from kbroker.security.scram import (
    MECHANISMS,
    ScramCredential,
    credential_from_string,
    credential_to_string,
)

# (user, mechanism, credential); a None credential deletes the user's mechanism.
ScramChange = tuple[str, str, ScramCredential | None]
CredentialTable = Mapping[str, Mapping[str, ScramCredential]]


def apply_changes(
    table: CredentialTable, changes: Iterable[ScramChange]
) -> dict[str, dict[str, ScramCredential]]:
    """A new table with ``changes`` applied; users left without credentials go."""
    out = {user: dict(creds) for user, creds in table.items()}
    for user, mechanism, credential in changes:
        creds = out.setdefault(user, {})
        if credential is None:
            creds.pop(mechanism, None)
        else:
            creds[mechanism] = credential
        if not creds:
            del out[user]
    return out


def credentials_of_config(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM entries of a user's config map; malformed ones are left out."""
    out: dict[str, ScramCredential] = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            out[mechanism] = credential_from_string(text)
        except ValueError:
            continue
    return out


def with_credentials(
    config: Mapping[str, str], credentials: Mapping[str, ScramCredential]
) -> dict[str, str]:
    """A user's config map with its SCRAM entries replaced by ``credentials`` and every
    other entry (the user's quotas) kept."""
    out = {k: v for k, v in config.items() if k not in MECHANISMS}
    out.update({m: credential_to_string(c) for m, c in credentials.items()})
    return out


def to_json(table: CredentialTable) -> dict[str, dict[str, str]]:
    return {
        user: {m: credential_to_string(c) for m, c in creds.items()}
        for user, creds in table.items()
    }


def from_json(data: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, ScramCredential]]:
    return {user: credentials_of_config(creds) for user, creds in data.items()}


def user_path(user: str) -> str:
    """The user's config znode; the name URL-encoded as Kafka's Sanitizer does."""
    return f"/config/users/{urllib.parse.quote(user, safe='').replace('~', '%7E')}"


def write_to_zookeeper(zk: Any, changes: Iterable[ScramChange]) -> None:
    """Apply ``changes`` to the users' znodes through a connected KazooClient (the ZooKeeper
    backend, and ``kbroker users --zookeeper`` before any broker runs), each followed by the
    change notification Kafka's brokers watch."""
    changes = list(changes)
    for user in dict.fromkeys(user for user, _, _ in changes):
        path = user_path(user)
        data = zk.get(path)[0] if zk.exists(path) else b""
        config = zk_paths.decode_config(data)
        current = {user: credentials_of_config(config)}
        table = apply_changes(current, [c for c in changes if c[0] == user])
        encoded = zk_paths.encode_config(with_credentials(config, table.get(user, {})))
        if zk.exists(path):
            zk.set(path, encoded)
        else:
            zk.create(path, encoded, makepath=True)
        zk.create(
            "/config/changes/config_change_",
            zk_paths.dump_json({"version": 2, "entity_path": path.removeprefix("/config/")}),
            sequence=True,
            makepath=True,
        )
