"""Secrets at rest: sealed (encrypted and authenticated) under ``SECRETS_KEY`` before they are stored.

A sealed value reads ``sealed:<key id>:<Fernet token>`` (``cryptography``'s Fernet: AES-128-CBC
and HMAC-SHA256). ``SECRETS_KEY`` holds one or more keys, comma-separated: the first seals, every
one opens, so a key is replaced with no downtime (``flask secrets rotate-key``,
``docs/security.md``). The key id is the first 8 hex digits of the key's SHA-256: it says which
key a value needs, never the key. Without ``SECRETS_KEY`` a key is generated once into
``instance/secrets_key`` (every process started from the same directory shares it).

Anything stored that is a secret goes through ``Keyring.seal``/``Keyring.open``: endpoint
secrets and signing keys (``SealedField`` columns), and the credentials of destinations to
come. A value that was never sealed (stored before migration 0016) opens as itself.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from webhooks.errors import WebhooksError
from webhooks.instance_file import generated_once

#: What every sealed value starts with.
PREFIX = "sealed:"
#: The file a generated key is kept in, under the instance directory.
KEY_FILE = "secrets_key"
#: The instance directory of ``app.py`` (Flask's default): where processes without a Flask app look.
DEFAULT_INSTANCE_DIR = Path(__file__).resolve().parent.parent / "instance"
#: Opened values kept in memory, so the worker does not decrypt an endpoint's secret per attempt.
_OPENED_CACHE = 4096

SECRETS_KEY_RULE = "one or more keys separated by commas, each 32 url-safe base64 bytes (flask secrets generate-key)"


class SealError(WebhooksError):
    """A sealed value that no key of ``SECRETS_KEY`` opens (its message names key ids, never a secret)."""


def new_key() -> str:
    """A fresh key for ``SECRETS_KEY``."""
    return Fernet.generate_key().decode()


def key_id(key: str) -> str:
    """The id a sealed value names its key by."""
    return hashlib.sha256(key.strip().encode()).hexdigest()[:8]


def parse_keys(value: str) -> list[str]:
    """The keys of a ``SECRETS_KEY`` value, first (the sealing one) first; ValueError naming the rule."""
    keys = [part.strip() for part in value.split(",") if part.strip()]
    if not keys:
        raise ValueError(f"SECRETS_KEY must be {SECRETS_KEY_RULE}")
    for number, key in enumerate(keys, 1):
        try:
            Fernet(key.encode())
        except (ValueError, TypeError):
            # The value itself is never repeated: it is a secret, even when malformed.
            raise ValueError(f"SECRETS_KEY's key {number} is not valid: it must be {SECRETS_KEY_RULE}") from None
    return keys


class Keyring:
    """The keys of ``SECRETS_KEY``: ``seal`` with the first, ``open`` with whichever a value names."""

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise ValueError("a keyring needs at least one key")
        self._fernets = {key_id(key): Fernet(key.encode()) for key in keys}
        self.current = key_id(keys[0])
        self._opened: dict[str, str] = {}

    @property
    def ids(self) -> list[str]:
        """The key ids, the sealing one first."""
        return list(self._fernets)

    def seal(self, plain: str) -> str:
        """``plain`` sealed under the first key."""
        return f"{PREFIX}{self.current}:{self._fernets[self.current].encrypt(plain.encode()).decode()}"

    def open(self, stored: str) -> str:
        """The secret a stored value holds (a value never sealed is itself); SealError if no key opens it."""
        if not stored.startswith(PREFIX):
            return stored
        plain = self._opened.get(stored)
        if plain is not None:
            return plain
        kid, _, token = stored[len(PREFIX):].partition(":")
        fernet = self._fernets.get(kid)
        if fernet is None:
            raise SealError(f"a secret is sealed with key {kid}, which SECRETS_KEY does not hold "
                            f"(it holds {', '.join(self.ids)}): set the same SECRETS_KEY in every process")
        try:
            plain = fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise SealError(f"a secret sealed with key {kid} does not open: it was altered") from None
        if len(self._opened) >= _OPENED_CACHE:
            self._opened.clear()
        self._opened[stored] = plain
        return plain

    def is_current(self, stored: str) -> bool:
        """Whether ``stored`` is sealed under the sealing key (``rotate-key`` leaves it as it is)."""
        return stored.startswith(f"{PREFIX}{self.current}:")


def instance_keys(instance_dir: str | Path) -> str:
    """The key kept in ``instance_dir``, generated there the first time (readable by its owner only)."""
    return generated_once(Path(instance_dir) / KEY_FILE, new_key)


_lock = threading.Lock()
_keyring: Keyring | None = None


def configure(secrets_key: str | None, instance_dir: str | Path = DEFAULT_INSTANCE_DIR) -> Keyring:
    """This process's keyring: ``secrets_key`` (SECRETS_KEY's value) or the instance's generated key."""
    global _keyring
    with _lock:
        _keyring = Keyring(parse_keys(secrets_key or instance_keys(instance_dir)))
        return _keyring


def keyring() -> Keyring:
    """This process's keyring; on first use without ``configure``, from the environment's ``SECRETS_KEY``."""
    return _keyring or configure(os.environ.get("SECRETS_KEY") or None)
