"""The property's signing key: Ed25519 (RFC 8032) with ``cryptography``, checkable with ``openssl``.

The private key is one PEM file (PKCS #8, unencrypted) readable by its owner only, named by
``DEALTRAIL_SIGNING__KEY_FILE``; it never enters the store or a log. Its public key (PEM,
SubjectPublicKeyInfo) is recorded in the store with the time from which it is valid
(:mod:`projections.records.signing_keys`) and printed for registration with the regulator. A key's ID is
the SHA-256 of its public key's DER encoding: ``openssl pkey -pubin -in KEY.pem -outform DER |
sha256sum`` prints the same.

A signature is detached: 64 raw bytes over a file's exact bytes (Ed25519 signs the message
itself, no pre-hash), checked with
``openssl pkeyutl -verify -pubin -inkey KEY.pem -rawin -in FILE -sigfile FILE.sig``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SIGNATURE_SUFFIX = ".sig"
"""A detached signature's file is the signed file's name with this suffix."""


class SigningError(ValueError):
    """A key that cannot be made or used: no key file set, missing, readable by others, not an
    Ed25519 key, or a file already there where a new key would go; the message says which."""


def create_key(path: Path) -> Ed25519PrivateKey:
    """Make a new Ed25519 key and write it to ``path`` (0600, created exclusively).

    Raises:
        SigningError: a file is there already (a key is never written over).
    """
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SigningError(f"{path} exists: a key file is never written over") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, 0o600)  # whatever the umask
    return key


def read_owner_only(path: Path, what: str, hint: str = "") -> bytes:
    """The bytes of a private key file that only its owner may read or write.

    Args:
        path: the file.
        what: what it is, for the message (``"signing key file"``).
        hint: said after a missing file (how to make one).

    Raises:
        SigningError: no such file, unreadable, or its group or others may read or write it.
    """
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except FileNotFoundError:
        raise SigningError(f"no {what} at {path}{hint}") from None
    except OSError as exc:
        raise SigningError(f"cannot read the {what} {path}: {exc.strerror}") from None
    if stat.S_IMODE(mode) & 0o077:
        raise SigningError(f"{path} may be read or written by others (mode {stat.S_IMODE(mode):04o}): chmod 600 it")
    return data


def load_key(path: Path | None) -> Ed25519PrivateKey:
    """The private key in ``path``.

    Raises:
        SigningError: no path (``DEALTRAIL_SIGNING__KEY_FILE`` unset), no such file, a file
            that its group or others may read or write, or no Ed25519 private key in it.
    """
    if path is None:
        raise SigningError("no signing key: set DEALTRAIL_SIGNING__KEY_FILE (dealtrail keys create makes one)")
    data = read_owner_only(path, "signing key file", " (dealtrail keys create makes one)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise SigningError(f"{path} holds no unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def public_pem(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo), what ``openssl pkeyutl -pubin`` reads."""
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(pem: bytes) -> str:
    """A public key's ID: the SHA-256 (64 hex digits) of its DER encoding.

    Raises:
        SigningError: ``pem`` is no Ed25519 public key.
    """
    pub = _public(pem)
    der = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def _public(pem: bytes) -> Ed25519PublicKey:
    try:
        pub = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError):
        raise SigningError("not a PEM public key") from None
    if not isinstance(pub, Ed25519PublicKey):
        raise SigningError(f"a {type(pub).__name__}, not an Ed25519 public key")
    return pub


def sign(key: Ed25519PrivateKey, data: bytes) -> bytes:
    """The detached Ed25519 signature (64 bytes) of ``data``."""
    return key.sign(data)


def verify(pem: bytes, data: bytes, signature: bytes) -> bool:
    """True if ``signature`` is the public key ``pem``'s signature of ``data``.

    Raises:
        SigningError: ``pem`` is no Ed25519 public key.
    """
    try:
        _public(pem).verify(signature, data)
    except InvalidSignature:
        return False
    return True
