"""An in-process broker on a free loopback port (one with a TLS listener too), and a raw
protocol client."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from tests.security.certs import write_pki
from wire.api_keys import RESPONSE_CLASSES
from wire.frame import decode_response, encode_request
from wire.messages.request_header import RequestHeader


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broker_config(log_dir: Path, port: int, **overrides: str) -> BrokerConfig:
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(log_dir),
        **{key.replace("_", "."): value for key, value in overrides.items()},
    }
    return BrokerConfig.from_properties(props)


async def start_tls_broker(
    tmp_path: Path, listener: str, **props: str
) -> tuple[Broker, ssl.SSLContext]:
    """A started broker with a PLAINTEXT listener and a ``listener`` one (SSL or SASL_SSL)
    whose certificate comes from a test PKI under ``tmp_path``, ``props`` added; and a client
    context that trusts it. The caller stops the broker."""
    pki = write_pki(tmp_path / "pki")
    config = BrokerConfig.from_properties(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},{listener}://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker_keystore),
            **props,
        }
    )
    broker = Broker(config)
    await broker.start()
    client = ssl.create_default_context(cafile=str(pki.ca))
    client.check_hostname = False
    return broker, client


class RawClient:
    """A bare Kafka protocol client over one connection, for tests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._correlation = 0

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, api_key: int, version: int, body: object) -> int:
        self._correlation += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation,
            client_id="kbroker-tests",
        )
        self.writer.write(encode_request(header, body, version))
        await self.writer.drain()
        return self._correlation

    async def receive(self, api_key: int, version: int, correlation_id: int) -> object:
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        frame = await self.reader.readexactly(size)
        header, body = decode_response(frame, api_key, version)
        assert header.correlation_id == correlation_id
        assert isinstance(body, RESPONSE_CLASSES[api_key])
        return body

    async def call(self, api_key: int, version: int, body: object) -> object:
        correlation_id = await self.send(api_key, version, body)
        return await asyncio.wait_for(self.receive(api_key, version, correlation_id), 10)

    async def closed_by_peer(self, timeout: float = 5) -> bool:
        try:
            data = await asyncio.wait_for(self.reader.read(1), timeout)
        except (ConnectionError, TimeoutError):
            return isinstance(self.reader.exception(), ConnectionError)
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    instance = Broker(broker_config(tmp_path / "data", free_port()))
    await instance.start()
    try:
        yield instance
    finally:
        await instance.stop()


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[RawClient]:
    connection = await RawClient.connect(broker.port)
    try:
        yield connection
    finally:
        await connection.close()
