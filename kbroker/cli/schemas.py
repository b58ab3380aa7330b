"""``kbroker schemas``: a client of a schema registry's REST API (kbroker's, or Confluent's).

    kbroker schemas list [--deleted] [--prefix P]
    kbroker schemas get (--subject S [--version V] | --id N)
    kbroker schemas register --subject S (--schema TEXT | --schema-file F) [--type T]
                             [--reference NAME=SUBJECT:VERSION ...] [--normalize]
    kbroker schemas delete --subject S [--version V] [--permanent]
    kbroker schemas compatibility --subject S (--schema TEXT | --schema-file F) [--type T]
                                  [--version V]
    kbroker schemas compatibility [--subject S] [--set LEVEL]

``--url`` is the registry (``schema.registry.url``; default ``$SCHEMA_REGISTRY_URL`` or
http://127.0.0.1:8081), ``--user USER:PASSWORD`` its basic credentials
(``basic.auth.user.info``), ``--ca-location`` the CA that signed an https registry's
certificate. An error answer is printed with its Confluent error code, exit status 1.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from kbroker.cli.ops.output import EXIT_FAILED, EXIT_OK, emit_json, table

DEFAULT_URL = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryCallError(Exception):
    pass


class RegistryClient:
    def __init__(self, url: str, user: str | None, ca_location: str | None, timeout: float) -> None:
        self._base = url.rstrip("/")
        self._timeout = timeout
        self._headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        if user:
            token = base64.b64encode(user.encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._ssl = ssl.create_default_context(cafile=ca_location) if ca_location else None

    def call(self, method: str, path: str, body: Any = None, **query: object) -> Any:
        params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items()}
        url = self._base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout, context=self._ssl
            ) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                detail = json.loads(raw)
                message = f"{detail.get('message')} (error code {detail.get('error_code')})"
            except (ValueError, AttributeError):
                message = raw.decode("utf-8", "replace") or exc.reason
            raise RegistryCallError(f"HTTP {exc.code}: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryCallError(f"cannot reach {self._base}: {exc}") from None
        return json.loads(raw) if raw else None


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    if (args.schema is None) == (args.schema_file is None):
        raise RegistryCallError("give exactly one of --schema and --schema-file")
    text = args.schema if args.schema is not None else Path(args.schema_file).read_text()
    body: dict[str, Any] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    references = []
    for ref in args.reference or ():
        name, _, target = ref.partition("=")
        subject, _, version = target.rpartition(":")
        if not name or not subject or not version:
            raise RegistryCallError(f"--reference {ref!r}: expected NAME=SUBJECT:VERSION")
        references.append({"name": name, "subject": subject, "version": int(version)})
    if references:
        body["references"] = references
    return body


def _list(args: argparse.Namespace, client: RegistryClient) -> int:
    subjects = client.call("GET", "/subjects", deleted=args.deleted, subjectPrefix=args.prefix)
    rows = []
    found = []
    for subject in subjects:
        latest = client.call("GET", f"/subjects/{_quote(subject)}/versions/latest", deleted=True)
        versions = client.call("GET", f"/subjects/{_quote(subject)}/versions", deleted=args.deleted)
        found.append({"subject": subject, "versions": versions, "latest": latest})
        rows.append(
            (
                subject,
                ",".join(str(v) for v in versions),
                latest["id"],
                latest.get("schemaType", "AVRO"),
            )
        )
    if args.json:
        emit_json(found)
    else:
        print(table(("SUBJECT", "VERSIONS", "LATEST ID", "TYPE"), rows))
    return EXIT_OK


def _get(args: argparse.Namespace, client: RegistryClient) -> int:
    if (args.subject is None) == (args.id is None):
        raise RegistryCallError("give exactly one of --subject and --id")
    if args.id is not None:
        answer = client.call("GET", f"/schemas/ids/{args.id}")
        answer["id"] = args.id
    else:
        answer = client.call("GET", f"/subjects/{_quote(args.subject)}/versions/{args.version}")
    if args.json:
        emit_json(answer)
        return EXIT_OK
    schema = answer["schema"]
    try:
        schema = json.dumps(json.loads(schema), indent=2)
    except ValueError:
        pass
    where = (
        f"subject {answer['subject']} version {answer['version']}, " if "subject" in answer else ""
    )
    print(f"# {where}id {answer['id']}, {answer.get('schemaType', 'AVRO')}")
    print(schema)
    return EXIT_OK


def _register(args: argparse.Namespace, client: RegistryClient) -> int:
    answer = client.call(
        "POST",
        f"/subjects/{_quote(args.subject)}/versions",
        _schema_body(args),
        normalize=args.normalize,
    )
    if args.json:
        emit_json(answer)
    else:
        print(f"registered under {args.subject}: id {answer['id']}")
    return EXIT_OK


def _delete(args: argparse.Namespace, client: RegistryClient) -> int:
    path = f"/subjects/{_quote(args.subject)}"
    if args.version is not None:
        path += f"/versions/{args.version}"
    answer = client.call("DELETE", path, permanent=args.permanent)
    if args.json:
        emit_json(answer)
    else:
        versions = answer if isinstance(answer, list) else [answer]
        how = "permanently deleted" if args.permanent else "deleted"
        print(f"{args.subject}: {how} version(s) {', '.join(str(v) for v in versions)}")
    return EXIT_OK


def _compatibility(args: argparse.Namespace, client: RegistryClient) -> int:
    config_path = "/config" + (f"/{_quote(args.subject)}" if args.subject else "")
    if args.set is not None:
        answer = client.call("PUT", config_path, {"compatibility": args.set.upper()})
        print(json.dumps(answer) if args.json else f"compatibility: {answer['compatibility']}")
        return EXIT_OK
    if args.schema is None and args.schema_file is None:
        answer = client.call("GET", config_path, defaultToGlobal=True)
        print(json.dumps(answer) if args.json else f"compatibility: {answer['compatibilityLevel']}")
        return EXIT_OK
    if not args.subject:
        raise RegistryCallError("checking a schema needs --subject")
    answer = client.call(
        "POST",
        f"/compatibility/subjects/{_quote(args.subject)}/versions/{args.version}",
        _schema_body(args),
        verbose=True,
    )
    if args.json:
        emit_json(answer)
    else:
        print("compatible" if answer["is_compatible"] else "NOT compatible")
        for message in answer.get("messages") or ():
            print(f"  {message}")
    return EXIT_OK if answer["is_compatible"] else EXIT_FAILED


def _run(command: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        client = RegistryClient(args.url, args.user, args.ca_location, args.timeout)
        try:
            return int(command(args, client))
        except (RegistryCallError, OSError, ValueError) as exc:
            print(f"kbroker: error: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return run


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=os.environ.get("SCHEMA_REGISTRY_URL", DEFAULT_URL),
        help=f"the registry (default $SCHEMA_REGISTRY_URL or {DEFAULT_URL})",
    )
    parser.add_argument("--user", metavar="USER:PASSWORD", help="HTTP basic credentials")
    parser.add_argument("--ca-location", metavar="FILE", help="CA certificates (PEM) for https")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")


def _schema_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", help="the schema text")
    parser.add_argument("--schema-file", metavar="FILE", help="a file holding the schema")
    parser.add_argument("--type", default="AVRO", choices=("AVRO", "JSON", "PROTOBUF"))
    parser.add_argument(
        "--reference",
        action="append",
        metavar="NAME=SUBJECT:VERSION",
        help="a schema it references (repeatable)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("schemas", help="schemas in a schema registry (REST API)")
    commands = parser.add_subparsers(dest="schemas_command", metavar="ACTION", required=True)

    p = commands.add_parser("list", help="subjects, their versions and latest schema ids")
    _common(p)
    p.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    p.add_argument("--prefix", default="", help="only subjects starting with this")
    p.set_defaults(func=_run(_list))

    p = commands.add_parser("get", help="a schema, by subject and version or by id")
    _common(p)
    p.add_argument("--subject")
    p.add_argument("--version", default="latest")
    p.add_argument("--id", type=int)
    p.set_defaults(func=_run(_get))

    p = commands.add_parser("register", help="register a schema under a subject")
    _common(p)
    p.add_argument("--subject", required=True)
    _schema_options(p)
    p.add_argument("--normalize", action="store_true")
    p.set_defaults(func=_run(_register))

    p = commands.add_parser("delete", help="delete a subject or one version (soft, or permanent)")
    _common(p)
    p.add_argument("--subject", required=True)
    p.add_argument("--version")
    p.add_argument("--permanent", action="store_true", help="after a soft delete: for good")
    p.set_defaults(func=_run(_delete))

    p = commands.add_parser(
        "compatibility", help="check a schema against a subject, or show or set a level"
    )
    _common(p)
    p.add_argument("--subject", help="the subject (without: the global level)")
    _schema_options(p)
    p.add_argument("--version", default="latest", help="the version to check against")
    p.add_argument("--set", metavar="LEVEL", help="set the compatibility level instead")
    p.set_defaults(func=_run(_compatibility))
