"""Kafka framing and request/response envelopes (protocol guide, "Common Request and Response
Structure").

On the wire every message is `int32 size` followed by `size` bytes. A request payload is a
request header (RequestHeader v0-v2, see wire.api_keys for which) and the request body; a
response payload is a response header (v0 or v1) and the response body. Bodies are encoded at
the API version the request header names.

`FrameDecoder` splits a byte stream into payloads; `decode_request`/`encode_response` are the
server side, `encode_request`/`decode_response` the client side (our own client and tests).
"""

from __future__ import annotations

import struct
from typing import Protocol

from wire.api_keys import (
    REQUEST_CLASSES,
    RESPONSE_CLASSES,
    request_header_version,
    response_header_version,
)
from wire.codegen.runtime import Message
from wire.errors import DecodeError, EncodeError, UnsupportedVersionError
from wire.messages.request_header import RequestHeader
from wire.messages.response_header import ResponseHeader
from wire.primitives import Reader, Writer

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


class FrameError(DecodeError):
    """A size prefix that is negative or larger than the allowed maximum."""


class UnknownApiKeyError(DecodeError):
    """A request for an API key this code does not know; no header can be parsed."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown API key {api_key}")
        self.api_key = api_key


class UnsupportedRequestVersion(UnsupportedVersionError):
    """A known API at a version outside its range; `header` lets the server answer."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(
            f"API key {header.request_api_key} has no version {header.request_api_version}"
        )
        self.header = header


class MemoryBudget(Protocol):
    """The memory a frame decoder may hold for payloads (the broker's
    ``queued.max.request.bytes`` pool). Every payload a decoder returns is charged to it for
    its length; whoever is done with the payload releases that many bytes."""

    def try_reserve(self, nbytes: int) -> bool:
        """Charge ``nbytes`` if the budget has them; False (nothing charged) otherwise."""
        ...

    def force_reserve(self, nbytes: int) -> None:
        """Charge ``nbytes`` even past the budget: for bytes that already arrived."""
        ...

    def release(self, nbytes: int) -> None: ...


class UnboundedBudget:
    """A budget that never runs out (clients, tests)."""

    def try_reserve(self, nbytes: int) -> bool:
        return True

    def force_reserve(self, nbytes: int) -> None:
        pass

    def release(self, nbytes: int) -> None:
        pass


class FrameDecoder:
    """Splits a byte stream into frame payloads (size prefixes removed).

    It works as a receive buffer: `get_buffer()` hands out the writable space the next read
    should fill (asyncio.BufferedProtocol reads the socket straight into it) and
    `buffer_updated(n)` returns the payloads completed by those `n` bytes. `feed(data)` does
    both for bytes received elsewhere.

    Small payloads are read into a staging area and copied out as immutable bytes. A server
    with many connections passes one `shared_staging` area to all their decoders: a decoder
    reads into it while it holds no partial frame and moves a partial frame into a staging
    area of its own only until the frame completes, so an idle connection holds no buffer.
    (Sharing is safe where each `get_buffer()` is followed by its `buffer_updated()` before
    another decoder's, as on one asyncio event loop.)
    A payload of LARGE_FRAME_BYTES or more is read straight into buffers of its own, handed
    out as one writable bytearray, so offsets can be assigned in place in a produce request.

    Memory follows the bytes that arrived, never the size prefix alone: a large payload
    starts with a buffer holding the bytes received, and each time its buffers fill, one
    more is added that doubles the total (GROW_MIN_BYTES at least), reserved from the budget
    first. A payload that came in more than one buffer is joined once when complete. When
    the budget refuses, `starved` is set and the reader should stop reading until
    `retry_grow()` succeeds (a client announcing 100 MB and sending 10 bytes costs 10 bytes,
    not 100 MB).
    """

    __slots__ = (
        "max_frame_size",
        "starved",
        "_budget",
        "_shared",
        "_staging",
        "_start",
        "_end",
        "_chunks",
        "_size",
        "_capacity",
        "_filled",
    )

    STAGING_BYTES = 64 * 1024
    LARGE_FRAME_BYTES = 16 * 1024
    GROW_MIN_BYTES = 64 * 1024

    def __init__(
        self,
        max_frame_size: int,
        budget: MemoryBudget | None = None,
        shared_staging: bytearray | None = None,
    ) -> None:
        self.max_frame_size = max_frame_size
        self._budget: MemoryBudget = budget if budget is not None else UnboundedBudget()
        # True while a large payload's buffers are full and the budget refused to grow them.
        self.starved = False
        if shared_staging is not None and len(shared_staging) < self.STAGING_BYTES:
            raise ValueError(f"a shared staging area needs {self.STAGING_BYTES} bytes")
        self._shared = shared_staging
        # The staging area in use: the shared one while nothing is held back, else our own.
        self._staging = shared_staging if shared_staging is not None else self.new_staging()
        # Unconsumed bytes of the staging area are _staging[_start:_end].
        self._start = 0
        self._end = 0
        # A large payload being filled: its buffers (all but the last full), announced size,
        # the bytes its buffers hold room for (all reserved) and the bytes received so far.
        self._chunks: list[bytearray] | None = None
        self._size = 0
        self._capacity = 0
        self._filled = 0

    @classmethod
    def new_staging(cls) -> bytearray:
        return bytearray(cls.STAGING_BYTES)

    def _check(self, size: int) -> None:
        if size < 0 or size > self.max_frame_size:
            raise FrameError(f"frame size {size} outside 0..{self.max_frame_size}")

    def get_buffer(self) -> memoryview:
        """Writable space for the next read (never empty; a starved payload is grown past
        the budget if a read comes anyway)."""
        chunks = self._chunks
        if chunks is not None:
            if self._filled == self._capacity:
                self._grow(force=True)
            chunk = chunks[-1]
            return memoryview(chunk)[len(chunk) - (self._capacity - self._filled) :]
        return memoryview(self._staging)[self._end :]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """`nbytes` were written at the start of the last `get_buffer()`; returns the
        payloads now complete, in order."""
        chunks = self._chunks
        if chunks is not None:
            self._filled += nbytes
            if self._filled < self._size:
                if self._filled == self._capacity:
                    self._grow()
                return []
            self._chunks = None
            return [memoryview(chunks[0] if len(chunks) == 1 else bytearray().join(chunks))]
        self._end += nbytes
        return self._split()

    def _grow(self, force: bool = False) -> bool:
        """Add the large payload's next buffer (doubling its room), reserved first."""
        assert self._chunks is not None
        have = self._capacity
        extra = min(self._size, max(2 * have, self.GROW_MIN_BYTES)) - have
        if force:
            self._budget.force_reserve(extra)
        elif not self._budget.try_reserve(extra):
            self.starved = True
            return False
        self._chunks.append(bytearray(extra))
        self._capacity += extra
        self.starved = False
        return True

    def retry_grow(self) -> bool:
        """Try again to grow a starved payload's buffer; True when reading may go on."""
        return not self.starved or self._grow()

    def _split(self) -> list[memoryview]:
        frames: list[memoryview] = []
        staging = self._staging
        budget = self._budget
        pos = self._start
        end = self._end
        while end - pos >= 4:
            size = _SIZE.unpack_from(staging, pos)[0]
            self._check(size)
            body = pos + 4
            if size >= self.LARGE_FRAME_BYTES:
                have = min(size, end - body)
                frame = bytearray(staging[body : body + have])
                budget.force_reserve(have)
                pos = body + have
                if have < size:
                    self._chunks = [frame]
                    self._size = size
                    self._filled = self._capacity = have
                    self._grow()
                    break
                frames.append(memoryview(frame))
                continue
            if end - body < size:
                break
            budget.force_reserve(size)
            frames.append(memoryview(bytes(staging[body : body + size])))
            pos = body + size
        # Keep the partial prefix or small payload (under LARGE_FRAME_BYTES + 4 bytes) at the
        # front, so the staging area always has room for it to complete; in a staging area
        # of our own when the shared one was in use, and back to the shared one once empty.
        left = end - pos
        shared = self._shared
        if left and staging is shared:
            own = self.new_staging()
            own[:left] = staging[pos:end]
            self._staging = own
        elif left and pos:
            staging[:left] = staging[pos:end]
        elif not left and shared is not None:
            self._staging = shared
        self._start = 0
        self._end = left
        return frames

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Payloads completed by `data` (bytes received by some other means)."""
        src = memoryview(data).cast("B")
        frames: list[memoryview] = []
        while src:
            buf = self.get_buffer()
            n = min(len(buf), len(src))
            buf[:n] = src[:n]
            del buf
            src = src[n:]
            frames += self.buffer_updated(n)
        return frames

    @property
    def partial_size(self) -> int:
        """The announced size of the large payload being filled (0: none)."""
        return self._size if self._chunks is not None else 0

    @property
    def partial_reserved(self) -> int:
        """The bytes reserved for the large payload being filled (0: none)."""
        return self._capacity if self._chunks is not None else 0

    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return self._end - self._start + (self._filled if self._chunks is not None else 0)

    def close(self) -> None:
        """Give back what a partial payload holds (the connection is gone)."""
        if self._chunks is not None:
            self._budget.release(self._capacity)
            self._chunks = None
        self.starved = False


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Message]:
    """Header and body of one request payload. Only DecodeError (and subclasses) escape.

    Trailing bytes after the body are ignored, as Kafka does.
    """
    r = Reader(frame)
    if r.remaining() < 4:
        raise DecodeError("request shorter than its api key and version")
    api_key, api_version = _KEY_VERSION.unpack_from(r.data, 0)
    cls = REQUEST_CLASSES.get(api_key)
    if cls is None:
        raise UnknownApiKeyError(api_key)
    header = RequestHeader.read(r, request_header_version(api_key, api_version))
    if not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
        raise UnsupportedRequestVersion(header)
    try:
        body = cls.read(r, api_version)
    except DecodeError as e:
        e.header = header
        raise
    return header, body


def _check_version(cls: type[Message], version: int) -> None:
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise EncodeError(f"{cls.__name__} has no version {version}")


def encode_response(
    correlation_id: int, api_key: int, api_version: int, body: Message
) -> list[bytes | object]:
    """Size prefix, response header and body, as Writer parts (external regions kept)."""
    cls = RESPONSE_CLASSES[api_key]
    if type(body) is not cls:
        raise EncodeError(f"{type(body).__name__} is not the response of API key {api_key}")
    _check_version(cls, api_version)
    w = Writer()
    w.int32(0)
    ResponseHeader(correlation_id=correlation_id).write(
        w, response_header_version(api_key, api_version)
    )
    body.write(w, api_version)
    w.patch_int32(0, w.nbytes - 4)
    return w.parts()


def encode_request(header: RequestHeader, body: Message, version: int) -> bytes:
    """A whole request frame (size prefix included) for our own client and tests."""
    api_key = header.request_api_key
    if body.API_KEY != api_key or REQUEST_CLASSES.get(api_key) is not type(body):
        raise EncodeError(f"{type(body).__name__} is not the request of API key {api_key}")
    if header.request_api_version != version:
        raise EncodeError(f"header says version {header.request_api_version}, body {version}")
    _check_version(type(body), version)
    w = Writer()
    w.int32(0)
    header.write(w, request_header_version(api_key, version))
    body.write(w, version)
    w.patch_int32(0, w.nbytes - 4)
    return w.getvalue()


def decode_response(
    data: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[ResponseHeader, Message]:
    """Header and body of one response payload (size prefix already removed)."""
    cls = RESPONSE_CLASSES.get(api_key)
    if cls is None:
        raise UnknownApiKeyError(api_key)
    if not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
        raise UnsupportedVersionError(f"{cls.__name__} has no version {api_version}")
    r = Reader(data)
    header = ResponseHeader.read(r, response_header_version(api_key, api_version))
    return header, cls.read(r, api_version)
