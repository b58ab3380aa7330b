"""A listener's server-side TLS context from Kafka's `ssl.*` properties.

Key and trust stores are PEM (files, or inline PEM as KIP-651 allows) or PKCS12 files;
JKS is refused with a message (no maintained Python library reads it: convert it with
`keytool -importkeystore -deststoretype PKCS12`).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping

_PROTOCOLS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def _load_chain(ctx: ssl.SSLContext, chain: str, key: str | None, password: str | None) -> None:
    # ssl only loads certificates from files: inline PEM goes through a private temp file.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write((key or "") + "\n" + chain)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _store_type(props: Mapping[str, str], store: str) -> str:
    kind = props.get(f"ssl.{store}.type", "PEM").upper()
    if kind not in ("PEM", "PKCS12"):
        raise ValueError(
            f"ssl.{store}.type={kind} is not supported: use PEM or PKCS12 (keytool "
            "-importkeystore -deststoretype PKCS12 converts a JKS store)"
        )
    return kind


def _pkcs12(path: str, password: str | None) -> tuple[str | None, str]:
    """(private key, certificates) of a PKCS12 file as PEM text."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    with open(path, "rb") as fh:
        store = pkcs12.load_pkcs12(fh.read(), password.encode() if password else None)
    certificates = [store.cert] if store.cert is not None else []
    certificates += store.additional_certs
    chain = "".join(c.certificate.public_bytes(Encoding.PEM).decode() for c in certificates)
    key = None
    if store.key is not None:
        key = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    return key, chain


def pkcs12_certificates(path: str, password: str | None) -> str:
    """The certificates of a PKCS12 trust store, as PEM text."""
    return _pkcs12(path, password)[1]


def server_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """`props` holds one listener's effective `ssl.*` settings (overrides already applied)."""
    keystore_type = _store_type(props, "keystore")
    # The trust store's type matters only when there is a trust store file.
    truststore_type = (
        _store_type(props, "truststore") if "ssl.truststore.location" in props else "PEM"
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [p.strip() for p in props.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",")]
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise ValueError(f"ssl.enabled.protocols: unsupported {unknown or enabled}")
    ctx.minimum_version = min(_PROTOCOLS[p] for p in enabled)
    ctx.maximum_version = max(_PROTOCOLS[p] for p in enabled)
    password = props.get("ssl.key.password") or None
    if keystore_type == "PKCS12":
        if "ssl.keystore.location" not in props:
            raise ValueError("ssl.keystore.type=PKCS12 needs ssl.keystore.location")
        key, chain = _pkcs12(props["ssl.keystore.location"], props.get("ssl.keystore.password"))
        if key is None:
            raise ValueError("the PKCS12 key store holds no private key")
        _load_chain(ctx, chain, key, None)
    elif "ssl.keystore.certificate.chain" in props:
        _load_chain(
            ctx, props["ssl.keystore.certificate.chain"], props.get("ssl.keystore.key"), password
        )
    elif "ssl.keystore.location" in props:
        # A PEM keystore file holds the private key followed by the certificate chain.
        ctx.load_cert_chain(props["ssl.keystore.location"], password=password)
    else:
        raise ValueError("an SSL listener needs ssl.keystore.location or ssl.keystore.key")
    client_auth = props.get("ssl.client.auth", "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ValueError(f"ssl.client.auth={client_auth} (none, requested or required)")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    if truststore_type == "PKCS12" and "ssl.truststore.location" in props:
        trusted = pkcs12_certificates(
            props["ssl.truststore.location"], props.get("ssl.truststore.password")
        )
        ctx.load_verify_locations(cadata=trusted)
    elif "ssl.truststore.certificates" in props:
        ctx.load_verify_locations(cadata=props["ssl.truststore.certificates"])
    elif "ssl.truststore.location" in props:
        ctx.load_verify_locations(cafile=props["ssl.truststore.location"])
    elif client_auth != "none":
        raise ValueError("ssl.client.auth needs ssl.truststore.location or certificates")
    if props.get("ssl.cipher.suites"):
        # OpenSSL names; TLS 1.3 suites are not configurable through this call.
        ctx.set_ciphers(":".join(c.strip() for c in props["ssl.cipher.suites"].split(",")))
    return ctx
