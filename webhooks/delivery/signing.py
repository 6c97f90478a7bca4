"""Standard Webhooks signing: ``v1`` (HMAC-SHA256, ``whsec_``) and ``v1a`` (ed25519, ``whsk_``/``whpk_``).

A key's prefix is its scheme (as the specification intends), so signing needs no other setting.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Iterable, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

Scheme = Literal["v1", "v1a"]

#: The signature schemes an endpoint may use (``v1`` unless it opts into ``v1a``).
SCHEMES: tuple[Scheme, ...] = ("v1", "v1a")

#: Prefix of every symmetric endpoint secret, as Standard Webhooks and Svix expect.
SECRET_PREFIX = "whsec_"

#: Prefix of an ed25519 private signing key (``v1a``); it never leaves the service.
SIGNING_KEY_PREFIX = "whsk_"

#: Prefix of an ed25519 public key, given to receivers to verify ``v1a`` signatures.
PUBLIC_KEY_PREFIX = "whpk_"

#: Random bytes in a new secret (the spec allows 24 to 64).
SECRET_BYTES = 32

#: Bytes of an ed25519 seed (RFC 8032 private key) and of a public key.
ED25519_KEY_BYTES = 32


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def generate_secret() -> str:
    """A new endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + _b64(secrets.token_bytes(SECRET_BYTES))


def generate_signing_key() -> str:
    """A new ed25519 key: ``whsk_`` + base64 of the 64-byte secret key (seed, then public key), as Svix stores it."""
    private = Ed25519PrivateKey.generate()
    return SIGNING_KEY_PREFIX + _b64(private.private_bytes_raw() + private.public_key().public_bytes_raw())


def generate_key(scheme: Scheme) -> str:
    """A new ``whsec_`` secret for ``v1``, a new ``whsk_`` key for ``v1a``."""
    return generate_signing_key() if scheme == "v1a" else generate_secret()


def scheme_of(key: str) -> Scheme:
    """``v1a`` for a ``whsk_`` signing key, ``v1`` for a ``whsec_`` secret."""
    return "v1a" if key.startswith(SIGNING_KEY_PREFIX) else "v1"


def secret_key(secret: str) -> bytes:
    """The HMAC key: the base64-decoded part after ``whsec_``."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("an endpoint secret starts with whsec_")
    return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)


def is_valid_secret(secret: str) -> bool:
    """True for ``whsec_`` + base64 of 24 to 64 bytes."""
    try:
        return 24 <= len(secret_key(secret)) <= 64
    except (ValueError, TypeError):
        return False


def private_key(key: str) -> Ed25519PrivateKey:
    """The ed25519 key of ``whsk_`` + base64 of seed+public (64 bytes) or of the bare seed (32 bytes).

    The 64-byte form is what Svix stores, the 32-byte one what the Standard Webhooks Go library
    reads; both are accepted, and a 64-byte key whose public half does not match is refused.
    """
    if not key.startswith(SIGNING_KEY_PREFIX):
        raise ValueError("a signing key starts with whsk_")
    raw = base64.b64decode(key[len(SIGNING_KEY_PREFIX) :], validate=True)
    if len(raw) not in (ED25519_KEY_BYTES, 2 * ED25519_KEY_BYTES):
        raise ValueError("a signing key holds 32 or 64 bytes")
    private = Ed25519PrivateKey.from_private_bytes(raw[:ED25519_KEY_BYTES])
    if len(raw) > ED25519_KEY_BYTES and private.public_key().public_bytes_raw() != raw[ED25519_KEY_BYTES:]:
        raise ValueError("the signing key's public half does not belong to its seed")
    return private


def public_key(key: str) -> str | None:
    """``whpk_`` + base64 of the 32-byte public key of a ``whsk_`` key; None for a ``whsec_`` secret."""
    if scheme_of(key) != "v1a":
        return None
    return PUBLIC_KEY_PREFIX + _b64(private_key(key).public_key().public_bytes_raw())


def shared_secret(key: str) -> str | None:
    """What the receiver needs to hold in secret: the ``whsec_`` itself, nothing for a ``whsk_`` key."""
    return key if scheme_of(key) == "v1" else None


def sign(key: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One signature of ``"{msg_id}.{timestamp}.{body}"``: ``v1,<base64 HMAC-SHA256>`` or ``v1a,<base64 ed25519>``."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    if scheme_of(key) == "v1a":
        return "v1a," + _b64(private_key(key).sign(content))
    return "v1," + _b64(hmac.new(secret_key(key), content, hashlib.sha256).digest())


def signature_header(active_keys: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one signature per active key, space-separated."""
    return " ".join(sign(key, msg_id, timestamp, body) for key in active_keys)
