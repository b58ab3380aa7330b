"""The request versions Kafka 4 removed from its specs (KIP-896) and kbroker still serves.

Kafka 4.0 raised the lowest version of many APIs and dropped the fields that only those
versions had. kbroker keeps answering the clients that send them (kcat 1.7 and librdkafka
2.0, kafka-python, aiokafka, the legacy message formats), so the generator applies this
table on top of the current specs:

- `LEGACY_FLOORS`: message name -> the lowest version kbroker keeps (the specs' `validVersions`
  is widened down to it; every field the specs still list keeps its own `versions`).
- `LEGACY_FIELDS`: message name -> fields that existed only in removed versions, each written
  in the specs' own field notation and placed after the sibling field named by `after`, in the
  struct reached by `path` (field names from the top-level struct; empty for the top).

Only facts (names, types, versions, defaults) are here, as Kafka 3.9 defined them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The removed versions of the APIs kbroker serves, requests and responses alike.
_FLOORS_BY_API = {
    "Produce": 0,
    "Fetch": 0,
    "ListOffsets": 0,
    "OffsetCommit": 0,
    "OffsetFetch": 0,
    "OffsetForLeaderEpoch": 0,
    "CreateTopics": 0,
    "DeleteTopics": 0,
    "CreateAcls": 0,
    "DescribeAcls": 0,
    "DeleteAcls": 0,
    "DescribeConfigs": 0,
    "DescribeLogDirs": 0,
    "WriteTxnMarkers": 0,
}

LEGACY_FLOORS: dict[str, int] = {
    f"{api}{kind}": floor
    for api, floor in _FLOORS_BY_API.items()
    for kind in ("Request", "Response")
}


@dataclass(frozen=True)
class LegacyField:
    path: tuple[str, ...]
    after: str
    spec: dict[str, Any]


LEGACY_FIELDS: dict[str, list[LegacyField]] = {
    "OffsetCommitRequest": [
        LegacyField(
            ("Topics", "Partitions"),
            "CommittedOffset",
            {"name": "CommitTimestamp", "type": "int64", "versions": "1", "default": "-1"},
        )
    ],
    "ListOffsetsRequest": [
        LegacyField(
            ("Topics", "Partitions"),
            "Timestamp",
            {"name": "MaxNumOffsets", "type": "int32", "versions": "0", "default": "1"},
        )
    ],
    "ListOffsetsResponse": [
        LegacyField(
            ("Topics", "Partitions"),
            "ErrorCode",
            {"name": "OldStyleOffsets", "type": "[]int64", "versions": "0", "ignorable": False},
        )
    ],
    "DescribeConfigsResponse": [
        LegacyField(
            ("Results", "Configs"),
            "ReadOnly",
            {"name": "IsDefault", "type": "bool", "versions": "0"},
        )
    ],
}


def with_legacy_versions(raw: dict[str, Any]) -> dict[str, Any]:
    """The spec `raw` (parsed JSON) widened to the versions kbroker keeps; `raw` is unchanged."""
    name = raw["name"]
    floor = LEGACY_FLOORS.get(name)
    extra = LEGACY_FIELDS.get(name, [])
    if floor is None and not extra:
        return raw
    out = dict(raw)
    if floor is not None:
        lo, _, hi = raw["validVersions"].partition("-")
        if floor < int(lo):
            out["validVersions"] = f"{floor}-{hi or lo}"
    for legacy in extra:
        out["fields"] = _insert(out["fields"], legacy.path, legacy.after, legacy.spec, name)
    return out


def _insert(
    fields: list[dict[str, Any]], path: tuple[str, ...], after: str, spec: dict[str, Any], msg: str
) -> list[dict[str, Any]]:
    """A copy of `fields` with `spec` placed after the field `after` of the struct at `path`."""
    names = [f["name"] for f in fields]
    if path:
        if path[0] not in names:
            raise ValueError(f"{msg}: no field {path[0]} to hold legacy field {spec['name']}")
        i = names.index(path[0])
        inner = dict(fields[i])
        inner["fields"] = _insert(inner["fields"], path[1:], after, spec, msg)
        return [*fields[:i], inner, *fields[i + 1 :]]
    if spec["name"] in names:
        raise ValueError(f"{msg}: legacy field {spec['name']} is in the specs again")
    if after not in names:
        raise ValueError(f"{msg}: no field {after} to place legacy field {spec['name']} after")
    i = names.index(after) + 1
    return [*fields[:i], dict(spec), *fields[i:]]
