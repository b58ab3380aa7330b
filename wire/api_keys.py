"""API keys, their message classes, and which header version each API version uses.

Header versions (protocol guide, "Headers"; KIP-482): requests use header v2 in flexible
versions and v1 otherwise (header v0 served only ControlledShutdown v0, a ZooKeeper-era
inter-broker API that Kafka 4 retired and kbroker never served). Responses use header v1 in
flexible versions and v0 otherwise, except ApiVersions,
whose response always uses v0 so a client can read it before it knows the broker's versions.
"""

from __future__ import annotations

from wire.messages.registry import REQUEST_CLASSES, RESPONSE_CLASSES, ApiKey

__all__ = [
    "REQUEST_CLASSES",
    "RESPONSE_CLASSES",
    "ApiKey",
    "request_header_version",
    "response_header_version",
]


def request_header_version(api_key: int, api_version: int) -> int:
    """Raises KeyError for an unknown API key."""
    flexible_min = REQUEST_CLASSES[api_key].FLEXIBLE_MIN
    return 2 if flexible_min is not None and api_version >= flexible_min else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Raises KeyError for an unknown API key."""
    flexible_min = RESPONSE_CLASSES[api_key].FLEXIBLE_MIN
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if flexible_min is not None and api_version >= flexible_min else 0
