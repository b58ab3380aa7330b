"""A scripted broker for the client core's scenario tests: it decodes the client's bytes
into requests and encodes the answers it is given into response bytes."""

from __future__ import annotations

from typing import Any

from wire.api_keys import ApiKey
from wire.frame import FrameDecoder, decode_request, encode_response
from wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from wire.messages.request_header import RequestHeader


class FakeBroker:
    """One broker end of a connection."""

    def __init__(self, versions: dict[int, tuple[int, int]] | None = None) -> None:
        self.versions = versions or {
            ApiKey.API_VERSIONS: (0, 3),
            ApiKey.METADATA: (0, 12),
            ApiKey.PRODUCE: (3, 11),
            ApiKey.FETCH: (4, 17),
            ApiKey.FIND_COORDINATOR: (0, 5),
            ApiKey.OFFSET_COMMIT: (0, 9),
            ApiKey.SASL_HANDSHAKE: (0, 1),
            ApiKey.SASL_AUTHENTICATE: (0, 2),
        }
        self._decoder = FrameDecoder(1 << 30)
        self.raw_frames: list[bytes] = []
        self.sasl_raw = False

    def receive(self, data: bytes) -> list[tuple[RequestHeader, Any]]:
        """The requests in ``data`` (raw SASL tokens go to ``raw_frames`` instead)."""
        requests = []
        for frame in self._decoder.feed(data):
            if self.sasl_raw:
                self.raw_frames.append(bytes(frame))
            else:
                requests.append(decode_request(frame))
        return requests

    def answer(self, header: RequestHeader, body: Any, version: int | None = None) -> bytes:
        parts = encode_response(
            header.correlation_id,
            header.request_api_key,
            header.request_api_version if version is None else version,
            body,
        )
        return b"".join(bytes(p) for p in parts)  # type: ignore[call-overload]

    def api_versions(self, error: int = 0) -> ApiVersionsResponse:
        return ApiVersionsResponse(
            error_code=error,
            api_keys=[
                ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in self.versions.items()
            ],
        )
