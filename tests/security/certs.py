"""A test CA with server and client certificates, made with `cryptography`."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pem:
    key: str
    cert: str


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Test"),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    ca: bool,
    san: str | None = None,
    ip: str | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    names: list[x509.GeneralName] = []
    if san:
        names.append(x509.DNSName(san))
    if ip:
        names.append(x509.IPAddress(ipaddress.ip_address(ip)))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_ca_and_leaf(leaf_cn: str, san: str | None = "localhost") -> tuple[Pem, Pem]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("Test CA", ca_key, _name("Test CA"), ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert(leaf_cn, leaf_key, ca.subject, ca_key, ca=False, san=san)
    pem = serialization.Encoding.PEM
    return (
        Pem(_key_pem(ca_key), ca.public_bytes(pem).decode()),
        Pem(_key_pem(leaf_key), leaf.public_bytes(pem).decode()),
    )


@dataclass(frozen=True)
class Pki:
    """PEM and PKCS12 files of a test CA, a broker (localhost, 127.0.0.1) and a client."""

    ca: Path
    broker_cert: Path
    broker_key: Path
    broker_keystore: Path  # private key then certificate, PEM (ssl.keystore.type=PEM)
    broker_p12: Path  # the same as PKCS12, password P12_PASSWORD
    client_cert: Path
    client_key: Path
    client_keystore: Path  # client key then certificate, PEM


P12_PASSWORD = "p12-secret"


def write_pki(directory: Path, client_cn: str = "alice") -> Pki:
    """A CA, a broker certificate for localhost and 127.0.0.1, and a client certificate
    whose subject is ``CN=<client_cn>,OU=Test``, as files under ``directory``."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("Test CA", ca_key, _name("Test CA"), ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker = _cert(
        "broker", broker_key, ca.subject, ca_key, ca=False, san="localhost", ip="127.0.0.1"
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(client_cn, client_key, ca.subject, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    pki = Pki(
        ca=directory / "ca.pem",
        broker_cert=directory / "broker.pem",
        broker_key=directory / "broker.key",
        broker_keystore=directory / "broker.keystore.pem",
        broker_p12=directory / "broker.p12",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        client_keystore=directory / "client.keystore.pem",
    )
    pki.ca.write_bytes(ca.public_bytes(pem))
    pki.broker_cert.write_bytes(broker.public_bytes(pem))
    pki.broker_key.write_text(_key_pem(broker_key))
    pki.broker_keystore.write_text(_key_pem(broker_key) + broker.public_bytes(pem).decode())
    pki.broker_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker",
            broker_key,
            broker,
            [ca],
            serialization.BestAvailableEncryption(P12_PASSWORD.encode()),
        )
    )
    pki.client_cert.write_bytes(client.public_bytes(pem))
    pki.client_key.write_text(_key_pem(client_key))
    pki.client_keystore.write_text(_key_pem(client_key) + client.public_bytes(pem).decode())
    return pki
