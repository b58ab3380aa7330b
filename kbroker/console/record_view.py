"""Record keys, values and headers shown to a person: as text, JSON, hex, or decoded through
the schema a serializer named in the record (Confluent's wire format: a zero byte, the
schema id as a big-endian int32, then the Avro, Protobuf or JSON payload).

Everything here returns plain strings; the templates escape them (record contents are
untrusted input). Large values are cut at ``MAX_SHOWN_BYTES``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

TEXT = "text"
JSON = "json"
HEX = "hex"
AUTO = "auto"
FORMATS = (AUTO, TEXT, JSON, HEX)
MAX_SHOWN_BYTES = 64 * 1024
HEX_BYTES_PER_LINE = 16
_SCHEMA_HEADER = struct.Struct(">bI")


@dataclass(frozen=True)
class Shown:
    """What to display for one key, value or header, and how it was read."""

    kind: str  # null, text, json, hex, avro, protobuf, json-schema
    text: str
    note: str = ""
    schema_id: int | None = None


def schema_framed(data: bytes) -> tuple[int, bytes] | None:
    """(schema id, payload) of a value in the schema registry's wire format, else None."""
    if len(data) < _SCHEMA_HEADER.size or data[0] != 0:
        return None
    _, schema_id = _SCHEMA_HEADER.unpack_from(data)
    return schema_id, data[_SCHEMA_HEADER.size :]


def as_text(data: bytes) -> str:
    """UTF-8 (invalid bytes replaced), other control characters than newline and tab written
    as \\xNN so that nothing invisible hides in what is shown."""
    text = data.decode("utf-8", "replace")
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" for c in text)


def as_hex(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), HEX_BYTES_PER_LINE):
        chunk = data[start : start + HEX_BYTES_PER_LINE]
        lines.append(f"{start:08x}  {chunk.hex(' ')}")
    return "\n".join(lines)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)


def _looks_like_json(data: bytes) -> Any:
    stripped = data.strip()
    if not stripped or stripped[:1] not in b'{["':
        raise ValueError("not JSON")
    return json.loads(stripped)


def _mostly_text(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    controls = sum(1 for c in text if not c.isprintable() and c not in "\n\t\r")
    return controls * 10 <= len(text)


def show(data: bytes | None, wanted: str) -> Shown:
    """``data`` as ``wanted`` (text, json, hex, or auto: JSON if it parses, text if it is
    mostly printable UTF-8, else hex). Schema-framed values are decoded by the caller, which
    has the registry."""
    if data is None:
        return Shown("null", "null")
    note = ""
    if len(data) > MAX_SHOWN_BYTES:
        note = f"first {MAX_SHOWN_BYTES} of {len(data)} bytes"
        data = data[:MAX_SHOWN_BYTES]
    if wanted == HEX:
        return Shown(HEX, as_hex(data), note)
    if wanted in (JSON, AUTO):
        try:
            return Shown(JSON, pretty_json(_looks_like_json(data)), note)
        except ValueError:
            if wanted == JSON:
                return Shown(TEXT, as_text(data), note or "not JSON: shown as text")
    if wanted == TEXT or _mostly_text(data):
        return Shown(TEXT, as_text(data), note)
    return Shown(HEX, as_hex(data), note)
