"""The registry's async shell around its pure parts: the store's state, a worker thread for the
slow part of each operation (parsing, compatibility: kbroker/schema_registry/registry.py's
``analyse``), the parsed-schema cache, and one write at a time.

Writes are serialised by a lock held from reading the state to applying the appended records,
so every write is planned on a state holding every earlier write: ids and versions follow one
another. Only one thread does the slow work, so a flood of large schemas queues up instead of
taking the broker's CPU from its clients; the event loop itself only plans and answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

from kbroker.schema_registry import errors, registry
from kbroker.schema_registry.parsed import ParsedSchema
from kbroker.schema_registry.protobuf import serialized
from kbroker.schema_registry.records import PROTOBUF, SCHEMA_TYPES
from kbroker.schema_registry.registry import Analysis, NewSchema, Work
from kbroker.schema_registry.state import (
    DEFAULT_COMPATIBILITY,
    RegistryState,
    StoredSchema,
    SubjectVersion,
)
from kbroker.schema_registry.store import SchemaStore

T = TypeVar("T")


class RegistryService:
    def __init__(self, store: SchemaStore) -> None:
        self.store = store
        self._parsed: dict[int, ParsedSchema] = {}
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="schema-registry"
        )
        self._write_lock = asyncio.Lock()

    @property
    def state(self) -> RegistryState:
        return self.store.state

    async def start(self) -> None:
        await self.store.start()

    async def stop(self) -> None:
        await self.store.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def is_writer(self) -> bool:
        return self.store.is_writer()

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _analyse(self, work: Work) -> Analysis:
        analysis = await self._in_worker(registry.analyse, work, dict(self._parsed))
        self._parsed.update(analysis.parsed_stored)
        return analysis

    async def _write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        if records:
            await self.store.write(records)

    # --- schemas -------------------------------------------------------------------------

    async def register(self, subject: str, body: Any, normalize: bool) -> dict[str, Any]:
        async with self._write_lock:
            new = registry.new_schema(body, normalize=normalize, state=self.state)
            work = registry.prepare_register(self.state, subject, new)
            analysis = await self._analyse(work)
            answer, records = registry.finish_register(self.state, subject, work, analysis)
            await self._write(records)
            self._parsed.setdefault(answer["id"], analysis.parsed)
            return answer

    async def lookup(
        self, subject: str, body: Any, normalize: bool, deleted: bool
    ) -> SubjectVersion:
        new = registry.new_schema(body, normalize=normalize, state=self.state)
        work = registry.prepare_lookup(self.state, subject, new, deleted)
        analysis = await self._analyse(work)
        return registry.finish_lookup(self.state, subject, work, analysis, deleted)

    async def check(
        self, subject: str, version: str | None, body: Any, normalize: bool, verbose: bool
    ) -> dict[str, Any]:
        new = registry.new_schema(body, normalize=normalize, state=self.state)
        work = registry.prepare_compatibility(self.state, subject, version, new)
        analysis = await self._analyse(work)
        return registry.compatibility_answer(analysis, verbose)

    async def schema_text(self, schema: StoredSchema, fmt: str | None) -> str:
        """The schema as stored, or for Protobuf with ``format=serialized`` its base64
        descriptor."""
        if fmt != "serialized" or schema.schema_type != PROTOBUF:
            return schema.text
        parsed = self._parsed.get(schema.id)
        if parsed is None:
            tree = registry.tree_of(self.state, schema)
            work = Work(
                NewSchema(
                    schema.schema_type, schema.text, schema.references, tree.references, False
                ),
                "NONE",
            )
            analysis = await self._analyse(work)
            parsed = analysis.parsed
            self._parsed[schema.id] = parsed
        return serialized(parsed)

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._write_lock:
            self.state.check_writable(subject)
            versions, records = self.state.plan_delete_subject(subject, permanent)
            await self._write(records)
            return versions

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        async with self._write_lock:
            self.state.check_writable(subject)
            number, records = self.state.plan_delete_version(subject, version, permanent)
            await self._write(records)
            return number

    # --- config and mode -----------------------------------------------------------------

    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.unprocessable("Unrecognized request body: expected a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str):
            raise errors.invalid_compatibility_level(level)
        level = level.upper()
        async with self._write_lock:
            await self._write(self.state.plan_config(subject, level))
        return {"compatibility": level}

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        if subject is not None and subject not in self.state.subject_compatibility:
            if not default_to_global:
                raise errors.subject_compatibility_not_configured(subject)
        return {"compatibilityLevel": self.state.compatibility_of(subject)}

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        async with self._write_lock:
            if subject is None:
                previous = self.state.compatibility or DEFAULT_COMPATIBILITY
            elif subject in self.state.subject_compatibility:
                previous = self.state.subject_compatibility[subject]
            else:
                raise errors.subject_not_found(subject)
            await self._write(self.state.plan_config(subject, None))
        return {"compatibilityLevel": previous}

    async def set_mode(self, subject: str | None, body: Any, force: bool) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("mode"), str):
            raise errors.invalid_mode(body.get("mode") if isinstance(body, dict) else body)
        mode = body["mode"].upper()
        async with self._write_lock:
            await self._write(self.state.plan_mode(subject, mode, force))
        return {"mode": mode}

    def get_mode(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        if subject is not None and subject not in self.state.subject_mode:
            if not default_to_global:
                raise errors.subject_mode_not_configured(subject)
        return {"mode": self.state.mode_of(subject)}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        async with self._write_lock:
            previous = self.state.subject_mode.get(subject)
            if previous is None:
                raise errors.subject_not_found(subject)
            await self._write(self.state.plan_mode(subject, None))
        return {"mode": previous}

    @staticmethod
    def schema_types() -> list[str]:
        return sorted(SCHEMA_TYPES)
