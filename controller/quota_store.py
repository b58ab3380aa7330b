"""Client quota entities as both metadata backends store them.

The table maps an entity (kbroker.quotas.QuotaEntity: sorted (type, name) pairs, a None
name being the type's default entity) to its quotas. ZooKeeper keeps them where Kafka does:

- ``/config/users/<user>``, ``/config/clients/<client-id>``,
  ``/config/users/<user>/clients/<client-id>`` and ``/config/ips/<ip>``: each
  ``{"version":1,"config":{"producer_byte_rate":"1048576","request_percentage":"50.0"}}``,
  values written as Kafka writes its quota configs: the byte rates and
  ``connection_creation_rate`` as whole numbers, the others as Java prints a double;
  ``<default>`` names the default entity, other names are URL-encoded as Kafka's
  Sanitizer does;
- after each change, a sequential ``/config/changes/config_change_`` znode naming the
  entity, and an entity left without quotas loses its znode (controller/config_znodes.py).

The embedded backend keeps a list of ``{"entity": [[type, name], ...], "quotas": {...}}``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from controller.zk_paths import znode_name_problem
from kbroker.quotas import CLIENT_ID, IP, USER, WHOLE_NUMBER_KEYS, QuotaEntity

DEFAULT = "<default>"
USERS = "/config/users"
CLIENTS = "/config/clients"
IPS = "/config/ips"
QuotaChange = tuple[QuotaEntity, Mapping[str, float | None]]


def apply_changes(
    table: Mapping[QuotaEntity, Mapping[str, float]], changes: Iterable[QuotaChange]
) -> dict[QuotaEntity, dict[str, float]]:
    """A new table with `changes` applied (None removes a key); empty entities go."""
    out = {k: dict(v) for k, v in table.items()}
    for key, ops in changes:
        quotas = out.setdefault(key, {})
        for name, value in ops.items():
            if value is None:
                quotas.pop(name, None)
            else:
                quotas[name] = float(value)
        if not quotas:
            del out[key]
    return out


def to_json(table: Mapping[QuotaEntity, Mapping[str, float]]) -> list[dict[str, Any]]:
    return [{"entity": [list(p) for p in k], "quotas": dict(v)} for k, v in table.items()]


def from_json(items: Iterable[Mapping[str, Any]]) -> dict[QuotaEntity, dict[str, float]]:
    return {
        tuple((str(t), None if n is None else str(n)) for t, n in item["entity"]): {
            str(k): float(v) for k, v in item["quotas"].items()
        }
        for item in items
    }


def sanitize(name: str | None) -> str:
    """A znode name for an entity name (Kafka's Sanitizer: URL encoding, `*` as %2A)."""
    if name is None:
        return DEFAULT
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(node: str) -> str | None:
    return None if node == DEFAULT else urllib.parse.unquote(node)


def entity_path(key: QuotaEntity) -> str:
    """``users/alice/clients/app``: the path below /config, as change notifications name it."""
    names = dict(key)
    if USER in names:
        path = f"users/{sanitize(names[USER])}"
        if CLIENT_ID in names:
            path += f"/clients/{sanitize(names[CLIENT_ID])}"
        return path
    if CLIENT_ID in names:
        return f"clients/{sanitize(names[CLIENT_ID])}"
    return f"ips/{sanitize(names[IP])}"


def zookeeper_problem(key: QuotaEntity) -> str | None:
    """Why an entity name cannot name its znode (``.`` and ``..`` stay as they are when
    sanitized), or None."""
    for _, name in key:
        problem = znode_name_problem(sanitize(name))
        if problem is not None:
            return f"Invalid entity name for ZooKeeper: {problem}"
    return None


def java_double(value: float) -> str:
    """`value` as Java's Double.toString prints it: ``50.0``, ``12.5``, ``1.0E7``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent + len(digits) - 1}"


def encode_quota(key: str, value: float) -> str:
    return str(int(value)) if key in WHOLE_NUMBER_KEYS else java_double(value)


def decode_quotas(config: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in config.items():
        try:
            out[k] = float(v)
        except ValueError:
            continue
    return out
