"""The registry's state, pure: built by applying the records of ``_schemas`` in log order, and
asked what a request means (its answer, and the records a write must append).

No parsing happens here: the registry (kbroker/schema_registry/registry.py) parses schemas and
checks compatibility, and hands this state the outcome. Nothing here does I/O or reads a clock.

Ids are global, the same schema (type, text and references) under any subject has one id, and
a new schema gets one more than the highest id ever applied (soft-deleted versions keep theirs).
Only the registry leader writes, and only once it has applied everything the log held when it
became leader, so two schemas never get the same id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from kbroker.schema_registry import errors
from kbroker.schema_registry.records import (
    ClearSubjectKey,
    ConfigKey,
    DeleteSubjectKey,
    ModeKey,
    RecordFormatError,
    Reference,
    SchemaKey,
    SchemaValue,
    decode_config_value,
    decode_delete_subject_value,
    decode_key,
    decode_mode_value,
    decode_schema_value,
    encode_config_value,
    encode_key,
    encode_mode_value,
    encode_schema_value,
)

log = logging.getLogger(__name__)

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
MAX_VERSION = 2**31 - 1

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """A schema by id: what ``/schemas/ids/{id}`` answers."""

    id: int
    schema_type: str
    text: str
    references: tuple[Reference, ...]


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    subject: str
    version: int
    schema: StoredSchema
    deleted: bool


Identity = tuple[str, str, tuple[Reference, ...]]


def identity_of(schema_type: str, text: str, references: tuple[Reference, ...]) -> Identity:
    return (schema_type, text, references)


@dataclass
class RegistryState:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    subjects: dict[str, dict[int, SubjectVersion]] = field(default_factory=dict)
    ids: dict[Identity, int] = field(default_factory=dict)
    max_id: int = 0
    compatibility: str | None = None
    subject_compatibility: dict[str, str] = field(default_factory=dict)
    mode: str | None = None
    subject_mode: dict[str, str] = field(default_factory=dict)
    # Offset of the last record applied (-1: none).
    offset: int = -1

    # --- applying _schemas ---------------------------------------------------------------

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """One record of ``_schemas``; a record that cannot be read is logged and skipped (a
        registry must not stop serving over one bad record another writer left)."""
        self.offset = max(self.offset, offset)
        if key is None:
            return
        try:
            decoded = decode_key(key)
            if isinstance(decoded, SchemaKey):
                self._apply_schema(decoded, value)
            elif isinstance(decoded, ConfigKey):
                self._apply_config(decoded, value)
            elif isinstance(decoded, ModeKey):
                self._apply_mode(decoded, value)
            elif isinstance(decoded, DeleteSubjectKey) and value is not None:
                upto = decode_delete_subject_value(value)
                for version, entry in self.subjects.get(decoded.subject, {}).items():
                    if version <= upto:
                        self.subjects[decoded.subject][version] = replace(entry, deleted=True)
            elif isinstance(decoded, ClearSubjectKey) and value is not None:
                versions = self.subjects.get(decoded.subject, {})
                for version in [v for v, e in versions.items() if e.deleted]:
                    del versions[version]
                if not versions:
                    self.subjects.pop(decoded.subject, None)
        except RecordFormatError as exc:
            log.warning("_schemas offset %d skipped: %s", offset, exc)

    def _apply_schema(self, key: SchemaKey, value: bytes | None) -> None:
        versions = self.subjects.setdefault(key.subject, {})
        if value is None:
            versions.pop(key.version, None)
            if not versions:
                del self.subjects[key.subject]
            return
        decoded = decode_schema_value(value)
        stored = self.schemas.get(decoded.id)
        if stored is None:
            stored = StoredSchema(
                decoded.id, decoded.schema_type, decoded.schema, decoded.references
            )
            self.schemas[decoded.id] = stored
            self.ids.setdefault(
                identity_of(stored.schema_type, stored.text, stored.references), stored.id
            )
        self.max_id = max(self.max_id, decoded.id)
        versions[key.version] = SubjectVersion(key.subject, key.version, stored, decoded.deleted)

    def _apply_config(self, key: ConfigKey, value: bytes | None) -> None:
        level = None if value is None else decode_config_value(value)
        if key.subject is None:
            self.compatibility = level
        elif level is None:
            self.subject_compatibility.pop(key.subject, None)
        else:
            self.subject_compatibility[key.subject] = level

    def _apply_mode(self, key: ModeKey, value: bytes | None) -> None:
        mode = None if value is None else decode_mode_value(value)
        if key.subject is None:
            self.mode = mode
        elif mode is None:
            self.subject_mode.pop(key.subject, None)
        else:
            self.subject_mode[key.subject] = mode

    # --- reads ---------------------------------------------------------------------------

    def subject_names(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            name
            for name, versions in self.subjects.items()
            if name.startswith(prefix) and any(deleted or not v.deleted for v in versions.values())
        )

    def versions(self, subject: str, deleted: bool = False) -> list[SubjectVersion]:
        """The subject's versions in order; 40401 when it has none to show."""
        entries = [
            v for _, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted
        ]
        if not entries:
            raise errors.subject_not_found(subject)
        return entries

    def version(self, subject: str, version: str | int, deleted: bool = False) -> SubjectVersion:
        """``version``: a number, ``latest`` or -1 (the latest)."""
        number = parse_version(version)
        if subject not in self.subjects:
            raise errors.subject_not_found(subject)
        if number == -1:
            live = self.versions(subject, deleted)
            return live[-1]
        entry = self.subjects[subject].get(number)
        if entry is None or (entry.deleted and not deleted):
            raise errors.version_not_found(subject, number)
        return entry

    def schema(self, schema_id: int) -> StoredSchema:
        stored = self.schemas.get(schema_id)
        if stored is None or not self.subject_versions_of(schema_id, deleted=True):
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return stored

    def subject_versions_of(self, schema_id: int, deleted: bool = False) -> list[SubjectVersion]:
        return [
            entry
            for subject in sorted(self.subjects)
            for _, entry in sorted(self.subjects[subject].items())
            if entry.schema.id == schema_id and (deleted or not entry.deleted)
        ]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that reference the subject's version."""
        return sorted(
            {
                entry.schema.id
                for versions in self.subjects.values()
                for entry in versions.values()
                if not entry.deleted
                and any(
                    r.subject == subject and r.version == version for r in entry.schema.references
                )
            }
        )

    def compatibility_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_compatibility:
            return self.subject_compatibility[subject]
        return self.compatibility or DEFAULT_COMPATIBILITY

    def mode_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_mode:
            return self.subject_mode[subject]
        return self.mode or DEFAULT_MODE

    def find(
        self, subject: str, identity: Identity, canonical_ids: set[int], deleted: bool = False
    ) -> SubjectVersion | None:
        """The subject's version holding this schema: by stored form, or by an id whose schema
        parses to the same canonical form (``canonical_ids``)."""
        for _, entry in sorted(self.subjects.get(subject, {}).items(), reverse=True):
            if entry.deleted and not deleted:
                continue
            stored = entry.schema
            if (
                stored.id in canonical_ids
                or identity_of(stored.schema_type, stored.text, stored.references) == identity
            ):
                return entry
        return None

    def compared_versions(self, subject: str, level: str) -> list[SubjectVersion]:
        """The live versions a new schema is checked against under ``level``."""
        if level == "NONE":
            return []
        live = [v for _, v in sorted(self.subjects.get(subject, {}).items()) if not v.deleted]
        return live if level.endswith("_TRANSITIVE") else live[-1:]

    # --- writes: the records to append -----------------------------------------------------

    def check_writable(self, subject: str | None) -> None:
        mode = self.mode_of(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def plan_register(
        self,
        subject: str,
        schema_type: str,
        text: str,
        references: tuple[Reference, ...],
        canonical_ids: set[int],
        requested_id: int | None = None,
        requested_version: int | None = None,
    ) -> tuple[int, int, list[Record]]:
        """The id and version a new schema gets, and the record that registers it. An id given
        by the caller is honoured only in IMPORT mode (and must not name another schema)."""
        mode = self.mode_of(subject)
        if requested_id is not None and requested_id >= 0:
            if mode != "IMPORT":
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
            existing = self.schemas.get(requested_id)
            if existing is not None and (
                existing.schema_type,
                existing.text,
                existing.references,
            ) != (
                schema_type,
                text,
                references,
            ):
                raise errors.RegistryError(
                    422,
                    42207,
                    f"Overwrite new schema with id {requested_id} is not permitted.",
                )
            schema_id = requested_id
        else:
            identity = identity_of(schema_type, text, references)
            schema_id = self.ids.get(identity) or next(
                (i for i in sorted(canonical_ids) if i in self.schemas), 0
            )
            if not schema_id:
                schema_id = self.max_id + 1
        versions = self.subjects.get(subject, {})
        if requested_version is not None and requested_version > 0:
            if mode != "IMPORT" and requested_version != max(versions, default=0) + 1:
                raise errors.invalid_version(requested_version)
            version = requested_version
        else:
            version = max(versions, default=0) + 1
        value = SchemaValue(subject, version, schema_id, schema_type, text, references)
        record = (encode_key(SchemaKey(subject, version)), encode_schema_value(value))
        return schema_id, version, [record]

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        versions = self.subjects.get(subject)
        if not versions:
            raise errors.subject_not_found(subject)
        live = [v for _, v in sorted(versions.items()) if not v.deleted]
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            records: list[Record] = [
                (encode_key(SchemaKey(subject, v.version)), None)
                for _, v in sorted(versions.items())
            ]
            return sorted(versions), records
        if not live:
            raise errors.subject_soft_deleted(subject)
        for entry in live:
            self._check_unreferenced(entry)
        records = [self._soft_delete_record(entry) for entry in live]
        return [v.version for v in live], records

    def plan_delete_version(
        self, subject: str, version: str | int, permanent: bool
    ) -> tuple[int, list[Record]]:
        number = parse_version(version)
        if subject not in self.subjects:
            raise errors.subject_not_found(subject)
        if number == -1:
            entry = self.versions(subject, deleted=permanent)[-1]
        else:
            found = self.subjects[subject].get(number)
            if found is None:
                raise errors.version_not_found(subject, number)
            entry = found
        self._check_unreferenced(entry)
        if permanent:
            if not entry.deleted:
                raise errors.version_not_soft_deleted(subject, entry.version)
            return entry.version, [(encode_key(SchemaKey(subject, entry.version)), None)]
        if entry.deleted:
            raise errors.version_soft_deleted(subject, entry.version)
        return entry.version, [self._soft_delete_record(entry)]

    def _check_unreferenced(self, entry: SubjectVersion) -> None:
        users = self.referenced_by(entry.subject, entry.version)
        if users:
            raise errors.reference_exists(
                f"One or more references exist to the schema "
                f"{{subject={entry.subject},version={entry.version}}}."
            )

    def _soft_delete_record(self, entry: SubjectVersion) -> Record:
        stored = entry.schema
        value = SchemaValue(
            entry.subject,
            entry.version,
            stored.id,
            stored.schema_type,
            stored.text,
            stored.references,
            deleted=True,
        )
        return encode_key(SchemaKey(entry.subject, entry.version)), encode_schema_value(value)

    def plan_config(self, subject: str | None, level: str | None) -> list[Record]:
        """Set (or, with None, remove) a compatibility level."""
        if level is not None and level not in COMPATIBILITY_LEVELS:
            raise errors.invalid_compatibility_level(level)
        value = None if level is None else encode_config_value(level)
        return [(encode_key(ConfigKey(subject)), value)]

    def plan_mode(self, subject: str | None, mode: str | None, force: bool = False) -> list[Record]:
        if mode is not None and mode not in MODES:
            raise errors.invalid_mode(mode)
        if mode == "IMPORT" and not force:
            has_schemas = (
                bool(self.subject_names()) if subject is None else subject in self.subject_names()
            )
            if has_schemas:
                raise errors.operation_not_permitted("Cannot import since found existing subjects")
        value = None if mode is None else encode_mode_value(mode)
        return [(encode_key(ModeKey(subject)), value)]


def parse_version(version: str | int) -> int:
    """A version in a path: 1..2^31-1, or ``latest``/-1 (returned as -1); else 42202."""
    if isinstance(version, int):
        number = version
    elif version == "latest":
        return -1
    else:
        try:
            number = int(version)
        except ValueError:
            raise errors.invalid_version(version) from None
    if number == -1:
        return -1
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(version)
    return number
