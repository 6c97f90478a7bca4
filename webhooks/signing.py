"""Standard Webhooks v1 signing: secrets, the signed content and the signature header.

Verifiable with the official ``standardwebhooks`` and ``svix`` libraries, unmodified.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Iterable

#: Prefix of every endpoint secret, as Standard Webhooks and Svix expect.
SECRET_PREFIX = "whsec_"

#: Random bytes in a new secret (the spec allows 24 to 64).
SECRET_BYTES = 32


def generate_secret() -> str:
    """A new endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


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


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">``."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(active_secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one signature per active secret, space-separated."""
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in active_secrets)
