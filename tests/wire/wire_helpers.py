"""Builds message instances from the generated FIELDS metadata, for round-trip tests."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from pathlib import Path

from wire.codegen.runtime import FieldInfo, Message

MESSAGES_DIR = Path(__file__).resolve().parents[2] / "wire" / "messages"

# A non-default value of each primitive type, and a second one for when the first is the default.
SAMPLES: dict[str, tuple[object, object]] = {
    "bool": (True, False),
    "int8": (-7, 5),
    "int16": (-12345, 3),
    "uint16": (65001, 9),
    "int32": (-123456789, 42),
    "uint32": (4000000000, 17),
    "int64": (-(2**40) - 5, 99),
    "float64": (-1.5, 2.25),
    "string": ("héllo-✓", "x"),
    "bytes": (b"\x00\x01\xfe", b"y"),
    "records": (b"\x00" * 3 + b"rec", b"r"),
    "uuid": (uuid.UUID(int=0x0123456789ABCDEF0011223344556677), uuid.UUID(int=5)),
}


def present(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


def sample(elem: str, default: object) -> object:
    first, second = SAMPLES[elem]
    return second if first == default else first


def populate(cls: type, version: int, *, nulls: bool = False) -> object:
    """An instance with a non-default value in every field present at `version`.

    With nulls=True, fields nullable at `version` are None instead.
    """
    obj = cls()
    for f in cls.FIELDS:
        if not present(f.versions, version):
            continue
        if nulls and present(f.nullable_versions, version):
            setattr(obj, f.name, None)
            continue
        setattr(obj, f.name, value_for(f, version, getattr(obj, f.name), nulls))
    return obj


def value_for(f: FieldInfo, version: int, default: object, nulls: bool) -> object:
    if f.type.startswith("[]"):
        elem = f.type[2:]
        if f.struct is not None:
            return [populate(f.struct, version, nulls=nulls) for _ in range(2)]
        return [SAMPLES[elem][0], SAMPLES[elem][1]]
    if f.struct is not None:
        return populate(f.struct, version, nulls=nulls)
    return sample(f.type, default)


def message_modules() -> Iterator[str]:
    for path in sorted(MESSAGES_DIR.glob("*.py")):
        if path.stem not in ("__init__", "registry"):
            yield f"wire.messages.{path.stem}"


def top_level_classes() -> list[type[Message]]:
    """The top-level class of every generated module (requests, responses, headers, data)."""
    out = []
    for name in message_modules():
        module = importlib.import_module(name)
        classes = [
            c
            for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, Message) and c is not Message
        ]
        assert len(classes) == 1, name
        out.append(classes[0])
    return out


def class_versions() -> list[tuple[type[Message], int]]:
    return [
        (cls, v) for cls in top_level_classes() for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
    ]
