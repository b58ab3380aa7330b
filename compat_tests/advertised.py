"""What a broker advertises in ApiVersions: each API's newest version and the finalized
feature levels (KIP-584), read with ApiVersions v3 (the first version that carries features).

The Java tests derive the request versions they expect from kbroker from this, so that the
expectations follow what kbroker serves as new versions land.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kbroker.client import BrokerConnection, parse_address
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.api_versions_request import ApiVersionsRequest

API_VERSIONS_V3 = 3


@dataclass(frozen=True)
class Advertised:
    """API name (Kafka's ApiKeys name, e.g. "LIST_OFFSETS") -> newest version, and
    finalized feature name -> level."""

    max_versions: dict[str, int]
    finalized_features: dict[str, int]


async def _advertised(bootstrap: str) -> Advertised:
    connection = await BrokerConnection.open(parse_address(bootstrap), "kbroker-compat-versions")
    try:
        response = await connection.call(
            ApiKey.API_VERSIONS,
            API_VERSIONS_V3,
            ApiVersionsRequest(client_software_name="kbroker-compat", client_software_version="1"),
        )
    finally:
        await connection.close()
    if response.error_code != ErrorCode.NONE:
        raise RuntimeError(f"ApiVersions v3 failed with error {response.error_code}")
    known = {int(key): key.name for key in ApiKey}
    return Advertised(
        max_versions={
            known[entry.api_key]: entry.max_version
            for entry in response.api_keys
            if entry.api_key in known
        },
        finalized_features={f.name: f.max_version_level for f in response.finalized_features},
    )


def advertised(bootstrap: str) -> Advertised:
    """Ask the broker at `bootstrap` (host:port)."""
    return asyncio.run(_advertised(bootstrap))
