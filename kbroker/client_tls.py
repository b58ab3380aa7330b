"""TLS for kbroker's Kafka clients: an ``ssl.SSLContext`` from Kafka's client properties
(kbroker.client_core.security), shared by the asyncio and the blocking shell."""

from __future__ import annotations

import functools
import ssl

from kbroker.client_core.security import SecurityConfig, SecurityConfigError


@functools.cache
def ssl_context(config: SecurityConfig) -> ssl.SSLContext | None:
    """The context to wrap connections in, or None when ``security.protocol`` has no TLS.
    Without a trust store the system's certificate authorities are trusted, as Kafka's
    clients trust the JVM's or the system's. Built once per configuration."""
    if not config.tls:
        return None
    try:
        context = ssl.create_default_context(cafile=config.ssl_cafile, cadata=config.ssl_cadata)
        context.check_hostname = config.ssl_check_hostname
        if config.ssl_certfile is not None:
            context.load_cert_chain(
                config.ssl_certfile, config.ssl_keyfile, config.ssl_key_password
            )
    except (OSError, ssl.SSLError) as exc:
        raise SecurityConfigError(f"TLS settings: {exc}") from exc
    return context
