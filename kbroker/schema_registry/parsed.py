"""What every schema type gives the registry once a schema is parsed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class SchemaParseError(ValueError):
    """The schema is not valid for its type (the registry answers 42201)."""


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    """A parsed schema. ``text`` is the form stored and answered; ``canonical`` decides whether
    two registrations are the same schema (same text once normalized); ``native`` is the schema
    library's object; ``dependencies`` are the parsed schemas it references (transitively, each
    before the schemas that use it), under the names the schema uses for them."""

    schema_type: str
    text: str
    canonical: str
    native: Any = field(compare=False, repr=False)
    dependencies: tuple[tuple[str, ParsedSchema], ...] = field(default=(), compare=False)


class SchemaFormat(Protocol):
    """One schema type: parsing and the compatibility of a reader with a writer."""

    name: str

    def parse(
        self, text: str, references: list[tuple[str, ParsedSchema]], normalize: bool
    ) -> ParsedSchema:
        """``references``: (name used by the schema, the referenced schema parsed), with each
        reference's own dependencies already inside it."""
        ...

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can)."""
        ...
