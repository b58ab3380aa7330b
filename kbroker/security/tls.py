"""A listener's server-side TLS context from Kafka's `ssl.*` properties (PEM keystores)."""

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


def server_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """`props` holds one listener's effective `ssl.*` settings (overrides already applied)."""
    store_type = props.get("ssl.keystore.type", "PEM").upper()
    if store_type != "PEM":
        raise ValueError(f"ssl.keystore.type={store_type} is not supported (PEM only)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [p.strip() for p in props.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",")]
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise ValueError(f"ssl.enabled.protocols: unsupported {unknown or enabled}")
    ctx.minimum_version = min(_PROTOCOLS[p] for p in enabled)
    ctx.maximum_version = max(_PROTOCOLS[p] for p in enabled)
    password = props.get("ssl.key.password") or None
    if "ssl.keystore.certificate.chain" in props:
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
    if "ssl.truststore.certificates" in props:
        ctx.load_verify_locations(cadata=props["ssl.truststore.certificates"])
    elif "ssl.truststore.location" in props:
        ctx.load_verify_locations(cafile=props["ssl.truststore.location"])
    elif client_auth != "none":
        raise ValueError("ssl.client.auth needs ssl.truststore.location or certificates")
    if props.get("ssl.cipher.suites"):
        # OpenSSL names; TLS 1.3 suites are not configurable through this call.
        ctx.set_ciphers(":".join(c.strip() for c in props["ssl.cipher.suites"].split(",")))
    return ctx
