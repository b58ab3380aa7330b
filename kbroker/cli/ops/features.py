"""Feature versions (KIP-584) as a broker reports them in ApiVersions: what it supports, and
the levels finalized for its cluster (what ``kafka-features.sh describe`` shows)."""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.cli.ops.admin import OpsError
from kbroker.client import KafkaClient
from wire.api_keys import ApiKey
from wire.errors import ErrorCode
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import ApiVersionsResponse

# Supported and finalized features are in ApiVersions from v3.
FIRST_FEATURES_VERSION = 3


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    supported_min: int
    supported_max: int
    finalized: int  # 0: not finalized


@dataclass(frozen=True, slots=True)
class Features:
    features: list[Feature]
    epoch: int


async def describe_features(client: KafkaClient) -> Features:
    """The features of a broker of the cluster, sorted by name."""
    connection = await client.any_connection()
    version = connection.version(ApiKey.API_VERSIONS)
    if version < FIRST_FEATURES_VERSION:
        raise OpsError("the broker does not report features (ApiVersions v3 or later needed)")
    request = ApiVersionsRequest(client_software_name="kbroker-cli", client_software_version="1.0")
    response = await connection.call(ApiKey.API_VERSIONS, version, request)
    assert isinstance(response, ApiVersionsResponse)
    if response.error_code != ErrorCode.NONE:
        raise OpsError(f"ApiVersions failed: {ErrorCode(response.error_code).name}")
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    return Features(
        [
            Feature(s.name, s.min_version, s.max_version, finalized.get(s.name, 0))
            for s in sorted(response.supported_features, key=lambda s: s.name)
        ],
        response.finalized_features_epoch,
    )
