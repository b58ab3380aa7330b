"""The mirror links' secrets, encrypted before they reach the metadata store.

A link's source client properties may hold secrets (``sasl.jaas.config``, TLS key and store
passwords, a PEM private key: the names ``topic_configs.is_sensitive`` flags). They are kept
in topic configs and link records, so in ZooKeeper or the embedded metadata file; as Kafka
does for its dynamic password configs, the broker encrypts them with
``password.encoder.secret`` first, in Kafka's own encoding (Kafka 3.9's
EncryptingPasswordEncoder, read from its class files: PBKDF2WithHmacSHA512 over the secret
with a random 256-byte salt, ``password.encoder.iterations`` (4096) rounds and
``password.encoder.key.length`` (128) bits; AES/CBC/PKCS5Padding with a random IV; stored
as comma-separated ``name:value`` pairs, bytes in base64). Every broker of the cluster needs
the same secret to read them back. Without a secret a broker refuses to store a secret
(INVALID_CONFIG, naming the config): it never writes one in clear.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Mapping

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from wire.errors import ErrorCode, KafkaError

# The source client properties whose values are secrets (kbroker.mirror.source.config.<name>).
_SECRET_MARKERS = ("password", "jaas.config", "secret", "ssl.keystore.key")
SOURCE_CONFIG = "kbroker.mirror.source.config."
KEY_FACTORY = "PBKDF2WithHmacSHA512"
CIPHER = "AES/CBC/PKCS5Padding"
SALT_BYTES = 256
_HASHES = {"PBKDF2WithHmacSHA512": hashes.SHA512, "PBKDF2WithHmacSHA1": hashes.SHA1}
_FIELDS = (
    "keyFactoryAlgorithm",
    "cipherAlgorithm",
    "keyLength",
    "salt",
    "iterations",
    "encryptedPassword",
    "passwordLength",
    "initializationVector",
)


def is_sensitive(name: str) -> bool:
    return name.startswith(SOURCE_CONFIG) and any(m in name for m in _SECRET_MARKERS)


class SecretError(ValueError):
    """A stored secret that cannot be read back (another secret, or not an encoding)."""


def _key(secret: str, algorithm: str, salt: bytes, iterations: int, key_bits: int) -> bytes:
    hash_type = _HASHES.get(algorithm)
    if hash_type is None:
        raise SecretError(f"unsupported key factory {algorithm}")
    kdf = PBKDF2HMAC(hash_type(), key_bits // 8, salt, iterations)
    return kdf.derive(secret.encode())


class PasswordEncoder:
    def __init__(
        self,
        secret: str,
        *,
        iterations: int = 4096,
        key_length: int = 128,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        if key_length not in (128, 192, 256):
            raise ValueError(f"password.encoder.key.length {key_length}: AES takes 128, 192, 256")
        self._secret = secret
        self._iterations = iterations
        self._key_length = key_length
        self._random = random_bytes
        # PBKDF2 costs milliseconds: each stored secret is decrypted once.
        self._decoded: dict[str, str] = {}

    def encode(self, password: str) -> str:
        salt = self._random(SALT_BYTES)
        iv = self._random(16)
        key = _key(self._secret, KEY_FACTORY, salt, self._iterations, self._key_length)
        padder = padding.PKCS7(128).padder()
        plain = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(plain) + encryptor.finalize()
        fields = {
            "keyFactoryAlgorithm": KEY_FACTORY,
            "cipherAlgorithm": CIPHER,
            "keyLength": str(self._key_length),
            "salt": base64.b64encode(salt).decode(),
            "iterations": str(self._iterations),
            "encryptedPassword": base64.b64encode(encrypted).decode(),
            # Java's String.length(): UTF-16 code units.
            "passwordLength": str(_java_length(password)),
            "initializationVector": base64.b64encode(iv).decode(),
        }
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password (raises SecretError when it does not decode with this secret)."""
        password = self._decoded.get(encoded)
        if password is None:
            password = self._decode(encoded)
            self._decoded[encoded] = password
        return password

    def _decode(self, encoded: str) -> str:
        fields = parse(encoded)
        if fields is None:
            raise SecretError("not an encoded password")
        if fields["cipherAlgorithm"] != CIPHER:
            raise SecretError(f"unsupported cipher {fields['cipherAlgorithm']}")
        try:
            key = _key(
                self._secret,
                fields["keyFactoryAlgorithm"],
                base64.b64decode(fields["salt"]),
                int(fields["iterations"]),
                int(fields["keyLength"]),
            )
            decryptor = Cipher(
                algorithms.AES(key), modes.CBC(base64.b64decode(fields["initializationVector"]))
            ).decryptor()
            padded = decryptor.update(base64.b64decode(fields["encryptedPassword"]))
            padded += decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(padded) + unpadder.finalize()).decode()
        except ValueError as exc:
            raise SecretError("the password does not decode with this secret") from exc
        if _java_length(password) != int(fields["passwordLength"]):
            raise SecretError("the password does not decode with this secret")
        return password


def _java_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse(value: str) -> dict[str, str] | None:
    """The fields of an encoded password; None for any other value."""
    fields: dict[str, str] = {}
    for part in value.split(","):
        name, sep, field = part.partition(":")
        if not sep:
            return None
        fields[name] = field
    return fields if set(fields) == set(_FIELDS) else None


def encoder_from(get: Callable[[str], object]) -> PasswordEncoder | None:
    """The broker's encoder from its ``password.encoder.*`` configs; None without a secret."""
    secret = get("password.encoder.secret")
    if not secret:
        return None
    return PasswordEncoder(
        str(secret),
        iterations=int(str(get("password.encoder.iterations"))),
        key_length=int(str(get("password.encoder.key.length"))),
    )


def encode_secrets(
    configs: Mapping[str, str], stored: Mapping[str, str], encoder: PasswordEncoder | None
) -> dict[str, str]:
    """``configs`` to store: each secret encrypted, except those kept as already stored."""
    out = dict(configs)
    for name, value in configs.items():
        if not is_sensitive(name) or stored.get(name) == value:
            continue
        if encoder is None:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"{name} is a secret: set password.encoder.secret on the brokers to store it "
                "encrypted (it is never stored in clear)",
            )
        try:
            out[name] = encoder.encode(value)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: {exc}") from None
    return out


def decode_secrets(configs: Mapping[str, str], encoder: PasswordEncoder | None) -> dict[str, str]:
    """``configs`` as stored, each secret decrypted (SecretError when one cannot be)."""
    out = dict(configs)
    for name, value in configs.items():
        if is_sensitive(name):
            if encoder is None:
                raise SecretError(f"{name} is encrypted and password.encoder.secret is not set")
            try:
                out[name] = encoder.decode(value)
            except SecretError as exc:
                raise SecretError(f"{name}: {exc}") from None
    return out
