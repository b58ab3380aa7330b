import ssl
from pathlib import Path

import pytest

from kbroker.security.tls import server_context
from tests.security.certs import Pem, make_ca_and_leaf


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS handshake over memory BIOs; returns the server's end."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    cli = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(10):
        for name, obj in (("c", cli), ("s", srv)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return srv
    raise AssertionError("handshake did not finish")


def _client(ca: Pem, leaf: Pem | None = None, tmp_path: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca.cert)
    if leaf is not None:
        assert tmp_path is not None
        path = tmp_path / "client.pem"
        path.write_text(leaf.key + leaf.cert)
        ctx.load_cert_chain(str(path))
    return ctx


def test_inline_pem_server() -> None:
    ca, server = make_ca_and_leaf("broker")
    ctx = server_context(
        {"ssl.keystore.key": server.key, "ssl.keystore.certificate.chain": server.cert}
    )
    assert _handshake(ctx, _client(ca)).getpeercert() is None


def test_keystore_file_and_required_client_auth(tmp_path: Path) -> None:
    ca, server = make_ca_and_leaf("broker")
    _, stray = make_ca_and_leaf("stranger")
    (tmp_path / "ks.pem").write_text(server.key + server.cert)
    (tmp_path / "ts.pem").write_text(ca.cert)
    ctx = server_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tmp_path / "ks.pem"),
            "ssl.truststore.location": str(tmp_path / "ts.pem"),
            "ssl.client.auth": "required",
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    # A client certificate signed by the trusted CA gets through and names its subject.
    client_leaf = Pem(server.key, server.cert)
    srv = _handshake(ctx, _client(ca, client_leaf, tmp_path))
    assert srv.version() == "TLSv1.3"
    assert ("commonName", "broker") in [a for rdn in srv.getpeercert()["subject"] for a in rdn]
    # No certificate: refused.
    with pytest.raises(ssl.SSLError):
        _handshake(ctx, _client(ca))
    with pytest.raises(ssl.SSLError):
        _handshake(ctx, _client(ca, stray, tmp_path))


@pytest.mark.parametrize(
    "props",
    [
        {"ssl.keystore.type": "JKS"},
        {},
        {"ssl.keystore.location": "x", "ssl.enabled.protocols": "TLSv1"},
    ],
)
def test_refused_settings(props: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        server_context(props)


def test_client_certificate_dn_maps_to_a_principal(tmp_path: Path) -> None:
    from kbroker.security.principal_rules import dn_of_subject, map_principal, parse_rules

    ca, server = make_ca_and_leaf("broker")
    (tmp_path / "ts.pem").write_text(ca.cert)
    ctx = server_context(
        {
            "ssl.keystore.key": server.key,
            "ssl.keystore.certificate.chain": server.cert,
            "ssl.truststore.location": str(tmp_path / "ts.pem"),
            "ssl.client.auth": "requested",
        }
    )
    srv = _handshake(ctx, _client(ca, server, tmp_path))
    dn = dn_of_subject(srv.getpeercert()["subject"])
    # certs.py writes CN before OU, so RFC 2253 (last RDN first) prints OU first, as Java does.
    assert dn == "OU=Test,CN=broker"
    assert map_principal(parse_rules("RULE:^OU=Test,CN=(.*)$/$1/,DEFAULT"), dn) == "broker"
