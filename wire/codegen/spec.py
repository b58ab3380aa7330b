"""Load Kafka's JSON message specs into a small model the emitter walks.

Spec format (Kafka's clients/src/main/resources/common/message/README.md): one JSON object per
file, with `//` comment lines. Top level: `name`, `type` (request, response, header, data),
`apiKey`, `validVersions`, `flexibleVersions`, `fields`, optional `commonStructs`. A field has
`name`, `type` (a primitive, `[]T` for an array, or a struct name), `versions`, and optional
`nullableVersions`, `taggedVersions` + `tag`, `default`, `ignorable`, `flexibleVersions`
(a per-field override, "none" on RequestHeader.ClientId), and `fields` when it defines a
struct inline. A struct type named without `fields` refers to a commonStruct.

Versions Kafka 4 removed (KIP-896) but kbroker still serves are put back by `legacy` before
loading. Version ranges are "N", "N-M", "N+" or "none". Everything here is clipped to the message's
valid versions, so a range is a pair (lo, hi) with lo > hi meaning "never".

Attribute naming: CamelCase spec names become snake_case, splitting before an upper-case letter
that follows a lower-case letter or digit, and before the last upper-case letter of an acronym
followed by lower case (`ISRNodes` -> `isr_nodes`). "KRaft" counts as one word (`kraft`).
Python keywords get a trailing underscore. Module names follow the same rule on the file name.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

from wire.codegen.legacy import with_legacy_versions

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)

NEVER = (1, 0)

_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    out = _SPLIT.sub("_", name.replace("KRaft", "Kraft")).lower()
    return out + "_" if keyword.iskeyword(out) else out


def parse_versions(text: str, valid: tuple[int, int]) -> tuple[int, int]:
    """A version range string clipped to `valid`."""
    text = text.strip()
    if text == "none":
        return NEVER
    if text.endswith("+"):
        lo, hi = int(text[:-1]), valid[1]
    elif "-" in text:
        a, b = text.split("-")
        lo, hi = int(a), int(b)
    else:
        lo = hi = int(text)
    lo, hi = max(lo, valid[0]), min(hi, valid[1])
    return (lo, hi) if lo <= hi else NEVER


def is_empty(r: tuple[int, int]) -> bool:
    return r[0] > r[1]


def intersect(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else NEVER


def subtract(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """a minus b, which must leave one contiguous range."""
    if is_empty(a) or is_empty(intersect(a, b)):
        return a
    if b[0] <= a[0] and b[1] >= a[1]:
        return NEVER
    if b[0] <= a[0]:
        return (b[1] + 1, a[1])
    if b[1] >= a[1]:
        return (a[0], b[0] - 1)
    raise ValueError(f"range {a} minus {b} is not contiguous")


def contains(outer: tuple[int, int], inner: tuple[int, int]) -> bool:
    return is_empty(inner) or (outer[0] <= inner[0] and inner[1] <= outer[1])


@dataclass
class FieldSpec:
    name: str
    attr: str
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int]
    tagged: tuple[int, int]
    tag: int | None
    ignorable: bool
    compact: tuple[int, int]
    default: object
    struct: StructSpec | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def regular(self) -> tuple[int, int]:
        """Versions in which the field is written in place (not as a tagged field)."""
        return subtract(self.versions, self.tagged)


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)


@dataclass
class MessageSpec:
    file_stem: str
    name: str
    kind: str
    api_key: int
    valid: tuple[int, int]
    flexible: tuple[int, int]
    top: StructSpec
    structs: list[StructSpec]  # every struct, dependencies before their users, top last

    @property
    def module(self) -> str:
        return snake_case(self.file_stem)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


class _Loader:
    def __init__(self, raw: dict, stem: str) -> None:
        self.raw = raw
        self.stem = stem
        lo, _, hi = raw["validVersions"].partition("-")
        self.valid = (int(lo), int(hi or lo))
        self.flexible = parse_versions(raw.get("flexibleVersions", "none"), self.valid)
        self.structs: dict[str, StructSpec] = {}
        self.order: list[StructSpec] = []
        self.common = {c["name"]: c for c in raw.get("commonStructs", [])}

    def struct(self, name: str, fields: list[dict]) -> StructSpec:
        if name in self.structs:
            raise ValueError(f"{self.stem}: struct {name} defined twice")
        spec = StructSpec(name)
        self.structs[name] = spec
        spec.fields = [self.field(f) for f in fields]
        self.order.append(spec)
        return spec

    def field(self, raw: dict) -> FieldSpec:
        valid = self.valid
        versions = parse_versions(raw["versions"], valid)
        ftype = raw["type"]
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        struct = None
        if elem not in PRIMITIVES:
            if "fields" in raw:
                struct = self.struct(elem, raw["fields"])
            elif elem in self.structs:
                struct = self.structs[elem]
            elif elem in self.common:
                struct = self.struct(elem, self.common[elem]["fields"])
            else:
                raise ValueError(f"{self.stem}: unknown type {ftype}")
        tag = raw.get("tag")
        tagged = parse_versions(raw.get("taggedVersions", "none"), valid)
        if (tag is None) != ("taggedVersions" not in raw):
            raise ValueError(f"{self.stem}: field {raw['name']} needs both tag and taggedVersions")
        compact = self.flexible
        if "flexibleVersions" in raw:
            compact = intersect(compact, parse_versions(raw["flexibleVersions"], valid))
        return FieldSpec(
            name=raw["name"],
            attr=snake_case(raw["name"]),
            type=ftype,
            versions=versions,
            nullable=parse_versions(raw.get("nullableVersions", "none"), valid),
            tagged=tagged,
            tag=tag,
            ignorable=bool(raw.get("ignorable", False)),
            compact=compact,
            default=raw.get("default"),
            struct=struct,
        )

    def load(self) -> MessageSpec:
        raw = self.raw
        # commonStructs come first so the classes exist before the structs that use them.
        for name, common in self.common.items():
            if name not in self.structs:
                self.struct(name, common["fields"])
        top = self.struct(raw["name"], raw["fields"])
        return MessageSpec(
            file_stem=self.stem,
            name=raw["name"],
            kind=raw["type"],
            api_key=int(raw.get("apiKey", -1)),
            valid=self.valid,
            flexible=self.flexible,
            top=top,
            structs=self.order,
        )


def load_spec(path: Path) -> MessageSpec | None:
    """The spec at `path` with the legacy versions kbroker keeps, or None for a message Kafka
    retired (`validVersions` "none": the ZooKeeper-era inter-broker APIs)."""
    raw = json.loads(_strip_comments(path.read_text(encoding="utf-8")))
    if raw["validVersions"] == "none":
        return None
    return _Loader(with_legacy_versions(raw), path.stem).load()


def load_all(spec_dir: Path) -> list[MessageSpec]:
    specs = (load_spec(p) for p in sorted(spec_dir.glob("*.json")))
    return [s for s in specs if s is not None]
