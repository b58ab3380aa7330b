"""Support code the generated message modules import (kept out of the generated files).

`FieldInfo` describes one field of a generated class (its facts from the spec, version ranges
clipped to the message's valid versions; a range (lo, hi) with lo > hi means "never"); every
generated class lists them in its `FIELDS` tuple so tests and tools can walk the schema
without parsing the JSON specs. `Message` is the base of the top-level generated classes and
provides `encode`/`decode` on top of the generated `write`/`read`.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple, Self

from wire.errors import DecodeError, EncodeError, UnsupportedVersionError
from wire.primitives import Reader, Writer


class FieldInfo(NamedTuple):
    name: str  # Python attribute name
    type: str  # spec type: a primitive, "[]elem", or a struct name
    versions: tuple[int, int]
    nullable_versions: tuple[int, int]
    tagged_versions: tuple[int, int]
    tag: int | None
    ignorable: bool
    struct: type | None  # generated class of a struct (or struct array element) type


class Message:
    """Base of generated top-level classes (requests, responses, headers, data)."""

    __slots__ = ()

    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_MIN: ClassVar[int | None]
    FIELDS: ClassVar[tuple[FieldInfo, ...]]

    def write(self, w: Writer, version: int) -> None:
        raise NotImplementedError

    @classmethod
    def read(cls, r: Reader, version: int) -> Self:
        raise NotImplementedError

    def encode(self, version: int) -> bytes:
        if not self.MIN_VERSION <= version <= self.MAX_VERSION:
            raise EncodeError(f"{type(self).__name__} has no version {version}")
        w = Writer()
        self.write(w, version)
        return w.getvalue()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Self:
        """Decodes exactly `data` (trailing bytes are an error)."""
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(f"{cls.__name__} has no version {version}")
        r = Reader(data)
        obj = cls.read(r, version)
        if r.pos != r.end:
            raise DecodeError(f"{r.end - r.pos} trailing bytes after {cls.__name__}")
        return obj


def _name(owner: object) -> str:
    """Class name of an instance or class, for error messages."""
    return owner.__name__ if isinstance(owner, type) else type(owner).__name__


def not_in_version(owner: object, attr: str, version: int) -> EncodeError:
    return EncodeError(f"{_name(owner)}.{attr} is set but does not exist in version {version}")


def not_nullable(owner: object, attr: str, version: int) -> EncodeError:
    return EncodeError(f"{_name(owner)}.{attr} is None but not nullable in version {version}")


def null_in_non_nullable(owner: object, attr: str, version: int) -> DecodeError:
    return DecodeError(f"{_name(owner)}.{attr} is null but not nullable in version {version}")
