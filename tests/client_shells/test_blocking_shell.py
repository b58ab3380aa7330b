"""The blocking shell when the broker breaks the protocol."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from kbroker.client_core.connection import ProtocolError
from kbroker.data_client import Connection
from wire.api_keys import ApiKey
from wire.frame import FrameDecoder, decode_request, encode_response
from wire.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from wire.messages.metadata_request import MetadataRequest


def serve_once(listener: socket.socket) -> None:
    """Answer ApiVersions properly, then a request with someone else's correlation id."""
    conn, _ = listener.accept()
    decoder = FrameDecoder(1 << 20)
    answered = 0
    with conn:
        while answered < 2:
            data = conn.recv(65536)
            if not data:
                return
            for frame in decoder.feed(data):
                header, _ = decode_request(frame)
                if answered == 0:
                    versions = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(api_key=ApiKey.API_VERSIONS, max_version=3),
                            ApiVersion(api_key=ApiKey.METADATA, max_version=12),
                        ]
                    )
                    parts = encode_response(
                        header.correlation_id,
                        ApiKey.API_VERSIONS,
                        header.request_api_version,
                        versions,
                    )
                    conn.sendall(b"".join(bytes(p) for p in parts))  # type: ignore[call-overload]
                else:
                    conn.sendall(struct.pack(">ii", 4, header.correlation_id + 100))
                answered += 1
        conn.recv(1)


def test_a_connection_that_broke_the_protocol_stays_broken() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        thread = threading.Thread(target=serve_once, args=(listener,), daemon=True)
        thread.start()
        connection = Connection(listener.getsockname(), "test", 5)
        try:
            with pytest.raises(ProtocolError):
                connection.call(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
            with pytest.raises(ConnectionError, match="broken"):
                connection.call(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        finally:
            connection.close()
        thread.join(5)


def test_a_fetch_answer_without_the_partition_means_no_records() -> None:
    """Tansu answers a Fetch with max_wait_ms 0 and nothing new by leaving the partition
    out; that is no data, not an unknown partition."""
    from kbroker.data_client import DataClient
    from wire.messages.fetch_response import FetchResponse

    class Answers:
        def request(self, api_key: int, body: object) -> tuple[object, int]:
            assert api_key == ApiKey.FETCH
            return FetchResponse(responses=[]), 12

    client = DataClient("127.0.0.1:1")
    result = client._fetch_one(Answers(), ("t", 0), 7, 1 << 20, 0, 0)  # type: ignore[arg-type]
    assert (result.records, result.next_offset, result.high_watermark) == ([], 7, -1)
