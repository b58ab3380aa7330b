"""SCRAM credentials as both metadata backends store them (KIP-84, KIP-554).

The table maps a user to its credentials by mechanism (kbroker.security.scram). ZooKeeper
keeps them where Kafka does: in the user's config znode ``/config/users/<user>``, next to
the user's quotas, as ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=
...,server_key=...,iterations=4096"}}``, followed by a ``/config/changes/config_change_``
notification naming ``users/<user>`` (controller/config_znodes.py: a user left without
credentials and quotas loses its znode). The embedded backend keeps
``{"<user>": {"SCRAM-SHA-256": "salt=..."}}`` in its state file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller import quota_store
from kbroker.quotas import USER
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


def entity_path(user: str) -> str:
    """The user's config entity (controller/config_znodes.py): ``users/<sanitized user>``."""
    return f"users/{quota_store.sanitize(user)}"


def zookeeper_problem(user: str) -> str | None:
    """Why the user's name cannot name its znode, or None."""
    return quota_store.zookeeper_problem(((USER, user),))


def changed_config(
    config: Mapping[str, str], user: str, changes: Iterable[ScramChange]
) -> dict[str, str]:
    """The user's config map (``/config/users/<user>``) with the user's changes applied,
    its other entries (quotas) kept."""
    current = {user: credentials_of_config(config)}
    table = apply_changes(current, [c for c in changes if c[0] == user])
    return with_credentials(config, table.get(user, {}))
