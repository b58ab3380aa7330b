import base64
from collections.abc import Callable

import pytest

from kbroker.security.scram import ScramCredential, ScramError, ScramServer, make_credential

# RFC 7677 section 3 test vector (SCRAM-SHA-256).
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _server(password: str = "pencil") -> ScramServer:
    cred = make_credential("SCRAM-SHA-256", password, salt=SALT, iterations=4096)

    def lookup(name: str) -> ScramCredential | None:
        return cred if name == "user" else None

    return ScramServer("SCRAM-SHA-256", lookup, nonce=SERVER_NONCE)


def test_rfc7677_vector() -> None:
    server = _server()
    assert server.step(CLIENT_FIRST) == SERVER_FIRST
    assert not server.complete
    assert server.step(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


def test_wrong_password_fails_at_the_proof() -> None:
    server = _server("not-pencil")
    server.step(CLIENT_FIRST)
    with pytest.raises(ScramError, match="invalid credentials"):
        server.step(CLIENT_FINAL)
    assert not server.complete


def test_unknown_user() -> None:
    with pytest.raises(ScramError, match="invalid credentials"):
        _server().step(b"n,,n=bob,r=abc")


def test_tampered_nonce() -> None:
    server = _server()
    server.step(CLIENT_FIRST)
    with pytest.raises(ScramError, match="nonce"):
        server.step(CLIENT_FINAL.replace(b"k0,", b"k1,"))


def test_channel_binding_refused() -> None:
    with pytest.raises(ScramError, match="channel binding"):
        _server().step(b"p=tls-unique,,n=user,r=abc")


@pytest.mark.parametrize(
    "echoed",
    [
        pytest.param(lambda nonce: nonce, id="exact"),
        # librdkafka 2.0 (Debian's kcat) sends its own nonce twice; Kafka 3.x accepts a
        # nonce that ends with the combined one, and so do we.
        pytest.param(lambda nonce: "clientnonce" + nonce, id="librdkafka-2.0"),
    ],
)
def test_sha512_round_trip_with_a_client_computed_proof(echoed: Callable[[str], str]) -> None:
    import hashlib
    import hmac

    cred = make_credential("SCRAM-SHA-512", "s3cret", iterations=4096)
    server = ScramServer("SCRAM-SHA-512", lambda n: cred if n == "alice" else None)
    first_bare = "n=alice,r=clientnonce"
    server_first = server.step(b"n,," + first_bare.encode()).decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    assert attrs["r"].startswith("clientnonce") and attrs["r"][11:].isalnum()
    salted = hashlib.pbkdf2_hmac("sha512", b"s3cret", base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    without_proof = f"c=biws,r={echoed(attrs['r'])}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    sig = hmac.new(hashlib.sha512(client_key).digest(), auth, "sha512").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    final = server.step(f"{without_proof},p=".encode() + proof)
    server_key = hmac.new(salted, b"Server Key", "sha512").digest()
    expected = base64.b64encode(hmac.new(server_key, auth, "sha512").digest())
    assert final == b"v=" + expected and server.complete
