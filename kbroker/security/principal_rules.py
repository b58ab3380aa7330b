"""`ssl.principal.mapping.rules` (KIP-371): a certificate's DN to a principal name.

Rules are tried in order; the first whose pattern matches the whole DN wins.
`DEFAULT` yields the DN unchanged. `RULE:pattern/replacement/` rewrites it
(Java-style `$1` groups), with an optional `L` or `U` to change the case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None is DEFAULT
    replacement: str
    case: str


def _read_until_slash(text: str, pos: int) -> tuple[str, int]:
    out: list[str] = []
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            out.append(text[pos : pos + 2])
            pos += 2
            continue
        if ch == "/":
            return "".join(out), pos + 1
        out.append(ch)
        pos += 1
    raise ValueError(f"ssl.principal.mapping.rules: unterminated rule in {text!r}")


def _java_replacement(replacement: str) -> str:
    # Java writes groups as $1; Python's re.sub wants \g<1>.
    escaped = replacement.replace("\\", "\\\\")
    return re.sub(r"\$(\d+)", r"\\g<\1>", escaped)


def parse_rules(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    pos = 0
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\n,":
            pos += 1
        if pos >= len(text):
            break
        if text.startswith("DEFAULT", pos):
            rules.append(_Rule(None, "", ""))
            pos += len("DEFAULT")
        elif text.startswith("RULE:", pos):
            pattern, pos = _read_until_slash(text, pos + len("RULE:"))
            replacement, pos = _read_until_slash(text, pos)
            case = text[pos] if pos < len(text) and text[pos] in "LU" else ""
            pos += len(case)
            rules.append(_Rule(re.compile(pattern), _java_replacement(replacement), case))
        else:
            raise ValueError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] not in ",\n":
            raise ValueError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
    return rules


def map_principal(rules: list[_Rule], dn: str) -> str:
    for rule in rules:
        if rule.pattern is None:
            return dn
        if rule.pattern.fullmatch(dn):
            name = rule.pattern.sub(rule.replacement, dn)
            return name.lower() if rule.case == "L" else name.upper() if rule.case == "U" else name
    # Kafka refuses a DN no rule maps, so the connection fails its authentication.
    raise ValueError(f"No ssl.principal.mapping.rules rule matches {dn!r}")


# Short names Java's X500Principal.getName() (RFC 2253) prints for the attributes
# Python's ssl module reports by their long names.
_SHORT = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def dn_of_subject(subject: tuple[tuple[tuple[str, str], ...], ...]) -> str:
    """RFC 2253 DN of `SSLObject.getpeercert()["subject"]`: most specific RDN first."""
    rdns = [
        "+".join(f"{_SHORT.get(name, name)}={_escape(value)}" for name, value in rdn)
        for rdn in subject
    ]
    return ",".join(reversed(rdns))
