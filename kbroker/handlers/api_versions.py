"""ApiVersions: what this broker speaks (KIP-35, KIP-511), and from v3 its features and the
levels finalized for the cluster (KIP-584, kbroker/features.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kbroker.features import SUPPORTED
from kbroker.server.connection import CLIENT_SOFTWARE
from wire.errors import ErrorCode
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.api_versions_response import (
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker

# KIP-511: client software name and version must match this from v3 on.
_SOFTWARE_FIELD = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle_api_versions(
    broker: Broker, header: RequestHeader, request: ApiVersionsRequest, version: int
) -> ApiVersionsResponse:
    error = ErrorCode.NONE
    if version >= 3:
        if not (
            _SOFTWARE_FIELD.fullmatch(request.client_software_name)
            and _SOFTWARE_FIELD.fullmatch(request.client_software_version)
        ):
            error = ErrorCode.INVALID_REQUEST
        else:
            # Remembered for the connection: telemetry subscriptions match on it (KIP-714).
            software = CLIENT_SOFTWARE.get()
            if software is not None:
                software.name = request.client_software_name
                software.version = request.client_software_version
    finalized = broker.features
    return ApiVersionsResponse(
        error_code=error,
        api_keys=broker.dispatcher.supported_versions(),
        supported_features=[
            SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in SUPPORTED.items()
        ],
        finalized_features_epoch=finalized.epoch,
        finalized_features=[
            FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
            for name, level in finalized.levels.items()
        ],
    )
