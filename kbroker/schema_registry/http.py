"""The registry's REST API, Confluent Schema Registry's, on aiohttp: a thin shell that turns
requests into calls of ``RegistryService`` and ``RegistryError`` into Confluent's JSON error
bodies.

Writes (register, delete, config and mode changes) are served by the registry's writer, the
broker leading ``_schemas``-0; another broker forwards them to it (its URL comes from the
cluster metadata, ``X-Kbroker-Forwarded`` keeps a request from being forwarded twice) and
passes its answer back unchanged. Reads are served by every broker from its own state.

Security (``schema.registry.authentication.method=BASIC``): HTTP basic authentication checked
against the broker's SASL users (PLAIN users of its JAAS configuration, SCRAM users of the
cluster metadata); the principal is ``User:<name>``. With an authorizer configured, Kafka ACLs
decide (a subject is the TOPIC resource it is named after: the subject without its ``-key`` or
``-value`` suffix, or the whole name for other subjects):

===========================================================  ===================================
request                                                      needs
===========================================================  ===================================
read a subject's versions, look a schema up, compatibility   READ on the subject's topic
register a schema                                            WRITE on the subject's topic
delete a subject or version                                  DELETE on the subject's topic
``GET /config/{s}``, ``/mode/{s}``                           DESCRIBE_CONFIGS on the topic
``PUT``/``DELETE /config/{s}``, ``/mode/{s}``                ALTER_CONFIGS on the topic
``GET /config``, ``/mode``                                   DESCRIBE_CONFIGS on the cluster
``PUT``/``DELETE /config``, ``PUT /mode``                    ALTER_CONFIGS on the cluster
``GET /schemas/ids/{id}``                                    READ on a subject holding the id
``GET /subjects``, ``GET /schemas``                          (lists what READ allows)
===========================================================  ===================================
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from kbroker.schema_registry import errors
from kbroker.schema_registry.registry import schema_fields, version_answer
from kbroker.schema_registry.service import RegistryService
from kbroker.security.acls import AclOperation, ResourceType

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED = "X-Kbroker-Forwarded"
MAX_BODY_BYTES = 16 << 20
FORWARD_TIMEOUT_SECONDS = 30.0
CLUSTER = "kafka-cluster"

# principal, host, operation, resource type, name -> allowed
Authorize = Callable[[str, str, AclOperation, ResourceType, str], bool]
# user, password -> principal (None: refused)
CheckPassword = Callable[[str, str], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    check_password: CheckPassword | None = None
    authorize: Authorize | None = None


def subject_topic(subject: str) -> str:
    """The TOPIC resource a subject is authorized as."""
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    if value is None:
        return default
    return value.strip().lower() == "true"


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        content_type=CONTENT_TYPE,
    )


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise errors.RegistryError(400, 400, f"Unexpected JSON: {exc}") from exc


class RegistryApp:
    def __init__(
        self,
        service: RegistryService,
        security: HttpSecurity,
        writer_url: Callable[[], Awaitable[str | None]],
        client_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.service = service
        self.security = security
        self._writer_url = writer_url
        self._client_ssl = client_ssl
        self._session: aiohttp.ClientSession | None = None
        self.app = web.Application(
            client_max_size=MAX_BODY_BYTES, middlewares=[self._errors, self._authenticate]
        )
        self._routes()
        self._runner: web.AppRunner | None = None
        self.ports: list[int] = []

    # --- lifecycle -------------------------------------------------------------------------

    async def start(
        self, listeners: list[tuple[str, str, int]], server_ssl: ssl.SSLContext | None
    ) -> list[int]:
        """Serve on each (scheme, host, port); returns the bound ports."""
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        for scheme, host, port in listeners:
            site = web.TCPSite(
                self._runner,
                host or None,
                port,
                ssl_context=server_ssl if scheme == "https" else None,
            )
            await site.start()
            server = site._server
            assert server is not None
            sockets = getattr(server, "sockets", None) or []
            bound = int(sockets[0].getsockname()[1]) if sockets else port
            self.ports.append(bound)
            log.info("schema registry listening on %s://%s:%d", scheme, host or "*", bound)
        return self.ports

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- middlewares -----------------------------------------------------------------------

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except errors.RegistryError as exc:
            headers = {"WWW-Authenticate": 'Basic realm="kbroker"'} if exc.status == 401 else None
            response = _json(exc.body(), exc.status)
            if headers:
                response.headers.update(headers)
            return response
        except web.HTTPNotFound:
            return _json(errors.not_found(request.path).body(), 404)
        except web.HTTPMethodNotAllowed:
            return _json(errors.method_not_allowed().body(), 405)
        except web.HTTPRequestEntityTooLarge:
            return _json({"error_code": 413, "message": "Request body too large"}, 413)
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.path)
            return _json({"error_code": 500, "message": "Internal Server Error"}, 500)

    @web.middleware
    async def _authenticate(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        principal = "User:ANONYMOUS"
        check = self.security.check_password
        if check is not None:
            header = request.headers.get("Authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "basic":
                raise errors.unauthorized()
            try:
                user, sep, password = base64.b64decode(token, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise errors.unauthorized() from None
            found = await check(user, password) if sep else None
            if found is None:
                raise errors.unauthorized()
            principal = found
        request["principal"] = principal
        return await handler(request)

    # --- authorization ---------------------------------------------------------------------

    def _allowed(
        self, request: web.Request, operation: AclOperation, kind: ResourceType, name: str
    ) -> bool:
        authorize = self.security.authorize
        if authorize is None:
            return True
        host = request.remote or ""
        return authorize(request["principal"], host, operation, kind, name)

    def _require_subject(self, request: web.Request, operation: AclOperation, subject: str) -> None:
        if not self._allowed(request, operation, ResourceType.TOPIC, subject_topic(subject)):
            raise errors.forbidden(operation.name, f"subject {subject}")

    def _require_cluster(self, request: web.Request, operation: AclOperation) -> None:
        if not self._allowed(request, operation, ResourceType.CLUSTER, CLUSTER):
            raise errors.forbidden(operation.name, "the global configuration")

    def _readable(self, request: web.Request, subject: str) -> bool:
        return self._allowed(request, AclOperation.READ, ResourceType.TOPIC, subject_topic(subject))

    # --- forwarding ------------------------------------------------------------------------

    async def _write(
        self, request: web.Request, act: Callable[[], Awaitable[Any]], status: int = 200
    ) -> web.StreamResponse:
        """Run a write here if this registry is the writer, else forward it there."""
        if self.service.is_writer():
            return _json(await act(), status)
        if request.headers.get(FORWARDED):
            raise errors.forwarding_error("the registry leader moved; retry")
        url = await self._writer_url()
        if url is None:
            raise errors.forwarding_error("no registry leader is known yet; retry")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_SECONDS)
            )
        headers = {FORWARDED: "1", "Content-Type": CONTENT_TYPE}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._session.request(
                request.method,
                url.rstrip("/") + request.path_qs,
                data=await request.read(),
                headers=headers,
                ssl=self._client_ssl if url.startswith("https") else None,
            ) as answer:
                body = await answer.read()
                return web.Response(status=answer.status, body=body, content_type=CONTENT_TYPE)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise errors.forwarding_error(f"{url}: {exc}") from exc

    # --- routes ----------------------------------------------------------------------------

    def _routes(self) -> None:
        r = self.app.router
        r.add_get("/", self.root)
        r.add_get("/schemas/types", self.schema_types)
        r.add_get("/schemas", self.list_schemas)
        r.add_get("/schemas/ids/{id}", self.schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self.schema_by_id_raw)
        r.add_get("/schemas/ids/{id}/versions", self.schema_versions)
        r.add_get("/schemas/ids/{id}/subjects", self.schema_subjects)
        r.add_get("/subjects", self.subjects)
        r.add_post("/subjects/{subject}", self.lookup)
        r.add_delete("/subjects/{subject}", self.delete_subject)
        r.add_get("/subjects/{subject}/versions", self.versions)
        r.add_post("/subjects/{subject}/versions", self.register)
        r.add_get("/subjects/{subject}/versions/{version}", self.version)
        r.add_delete("/subjects/{subject}/versions/{version}", self.delete_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self.version_raw)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions", self.compatibility_all)
        r.add_get("/config", self.get_global_config)
        r.add_put("/config", self.put_global_config)
        r.add_delete("/config", self.delete_global_config)
        r.add_get("/config/{subject}", self.get_config)
        r.add_put("/config/{subject}", self.put_config)
        r.add_delete("/config/{subject}", self.delete_config)
        r.add_get("/mode", self.get_global_mode)
        r.add_put("/mode", self.put_global_mode)
        r.add_get("/mode/{subject}", self.get_mode)
        r.add_put("/mode/{subject}", self.put_mode)
        r.add_delete("/mode/{subject}", self.delete_mode)
        r.add_get("/contexts", self.contexts)

    async def root(self, request: web.Request) -> web.Response:
        return _json({})

    async def contexts(self, request: web.Request) -> web.Response:
        return _json(["."])

    async def schema_types(self, request: web.Request) -> web.Response:
        return _json(self.service.schema_types())

    def _schema_id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise errors.schema_not_found(f"Schema {request.match_info['id']} not found") from None

    def _readable_schema(self, request: web.Request) -> Any:
        schema = self.service.state.schema(self._schema_id(request))
        holders = self.service.state.subject_versions_of(schema.id, deleted=True)
        if not any(self._readable(request, v.subject) for v in holders):
            raise errors.forbidden("READ", f"schema {schema.id}")
        return schema

    async def schema_by_id(self, request: web.Request) -> web.Response:
        schema = self._readable_schema(request)
        body = schema_fields(schema)
        body["schema"] = await self.service.schema_text(schema, request.query.get("format"))
        return _json(body)

    async def schema_by_id_raw(self, request: web.Request) -> web.Response:
        schema = self._readable_schema(request)
        text = await self.service.schema_text(schema, request.query.get("format"))
        return web.Response(text=text, content_type=CONTENT_TYPE)

    async def schema_versions(self, request: web.Request) -> web.Response:
        schema = self._readable_schema(request)
        deleted = _flag(request, "deleted")
        entries = self.service.state.subject_versions_of(schema.id, deleted=deleted)
        return _json(
            [
                {"subject": v.subject, "version": v.version}
                for v in entries
                if self._readable(request, v.subject)
            ]
        )

    async def schema_subjects(self, request: web.Request) -> web.Response:
        schema = self._readable_schema(request)
        deleted = _flag(request, "deleted")
        entries = self.service.state.subject_versions_of(schema.id, deleted=deleted)
        names = dict.fromkeys(v.subject for v in entries if self._readable(request, v.subject))
        return _json(list(names))

    async def list_schemas(self, request: web.Request) -> web.Response:
        state = self.service.state
        prefix = request.query.get("subjectPrefix", "")
        deleted = _flag(request, "deleted")
        latest_only = _flag(request, "latestOnly")
        out = []
        for subject in state.subject_names(deleted=deleted, prefix=prefix):
            if not self._readable(request, subject):
                continue
            versions = state.versions(subject, deleted=deleted)
            for entry in versions[-1:] if latest_only else versions:
                out.append(version_answer(entry))
        return _json(out)

    async def subjects(self, request: web.Request) -> web.Response:
        names = self.service.state.subject_names(
            deleted=_flag(request, "deleted"), prefix=request.query.get("subjectPrefix", "")
        )
        return _json([n for n in names if self._readable(request, n)])

    async def versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.READ, subject)
        entries = self.service.state.versions(subject, deleted=_flag(request, "deleted"))
        return _json([v.version for v in entries])

    async def version(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.READ, subject)
        entry = self.service.state.version(
            subject, request.match_info["version"], deleted=_flag(request, "deleted")
        )
        text = await self.service.schema_text(entry.schema, request.query.get("format"))
        return _json(version_answer(entry, text))

    async def version_raw(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.READ, subject)
        entry = self.service.state.version(
            subject, request.match_info["version"], deleted=_flag(request, "deleted")
        )
        text = await self.service.schema_text(entry.schema, request.query.get("format"))
        return web.Response(text=text, content_type=CONTENT_TYPE)

    async def referenced_by(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.READ, subject)
        entry = self.service.state.version(subject, request.match_info["version"], deleted=True)
        return _json(self.service.state.referenced_by(subject, entry.version))

    async def register(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.WRITE, subject)
        body = await _body(request)
        normalize = _flag(request, "normalize")
        return await self._write(request, lambda: self.service.register(subject, body, normalize))

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.READ, subject)
        body = await _body(request)
        entry = await self.service.lookup(
            subject, body, _flag(request, "normalize"), _flag(request, "deleted")
        )
        text = await self.service.schema_text(entry.schema, request.query.get("format"))
        return _json(version_answer(entry, text))

    async def delete_subject(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.DELETE, subject)
        permanent = _flag(request, "permanent")
        return await self._write(request, lambda: self.service.delete_subject(subject, permanent))

    async def delete_version(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.DELETE, subject)
        version = request.match_info["version"]
        permanent = _flag(request, "permanent")
        return await self._write(
            request, lambda: self.service.delete_version(subject, version, permanent)
        )

    async def compatibility(self, request: web.Request) -> web.Response:
        return await self._compatibility(request, request.match_info["version"])

    async def compatibility_all(self, request: web.Request) -> web.Response:
        return await self._compatibility(request, None)

    async def _compatibility(self, request: web.Request, version: str | None) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.READ, subject)
        body = await _body(request)
        answer = await self.service.check(
            subject, version, body, _flag(request, "normalize"), _flag(request, "verbose")
        )
        return _json(answer)

    async def get_global_config(self, request: web.Request) -> web.Response:
        self._require_cluster(request, AclOperation.DESCRIBE_CONFIGS)
        return _json(self.service.get_config(None, True))

    async def put_global_config(self, request: web.Request) -> web.StreamResponse:
        self._require_cluster(request, AclOperation.ALTER_CONFIGS)
        body = await _body(request)
        return await self._write(request, lambda: self.service.set_config(None, body))

    async def delete_global_config(self, request: web.Request) -> web.StreamResponse:
        self._require_cluster(request, AclOperation.ALTER_CONFIGS)
        return await self._write(request, lambda: self.service.delete_config(None))

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.DESCRIBE_CONFIGS, subject)
        return _json(self.service.get_config(subject, _flag(request, "defaultToGlobal")))

    async def put_config(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.ALTER_CONFIGS, subject)
        body = await _body(request)
        return await self._write(request, lambda: self.service.set_config(subject, body))

    async def delete_config(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.ALTER_CONFIGS, subject)
        return await self._write(request, lambda: self.service.delete_config(subject))

    async def get_global_mode(self, request: web.Request) -> web.Response:
        self._require_cluster(request, AclOperation.DESCRIBE_CONFIGS)
        return _json(self.service.get_mode(None, True))

    async def put_global_mode(self, request: web.Request) -> web.StreamResponse:
        self._require_cluster(request, AclOperation.ALTER_CONFIGS)
        body = await _body(request)
        force = _flag(request, "force")
        return await self._write(request, lambda: self.service.set_mode(None, body, force))

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.DESCRIBE_CONFIGS, subject)
        return _json(self.service.get_mode(subject, _flag(request, "defaultToGlobal")))

    async def put_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.ALTER_CONFIGS, subject)
        body = await _body(request)
        force = _flag(request, "force")
        return await self._write(request, lambda: self.service.set_mode(subject, body, force))

    async def delete_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self._require_subject(request, AclOperation.ALTER_CONFIGS, subject)
        return await self._write(request, lambda: self.service.delete_mode(subject))
