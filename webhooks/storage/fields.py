"""Column types: JSON as text, an event's payload in its received order, and sealed secrets.

Shared by every table (``webhooks.storage.models``, and the console's, pages' and portal's own).
JSON columns hold text so SQLite and PostgreSQL agree. Secrets are sealed under ``SECRETS_KEY``
(``webhooks.sealing``); so are destination URLs that carry a password.
"""

from __future__ import annotations

import json
from typing import Any

import peewee

from webhooks import sealing
from webhooks.secrecy import has_password
from webhooks.storage.payload_json import payload_json


#: ``JSONField``'s encoder, made once: ``json.dumps`` with arguments builds a new one per call,
#: a third of the time it takes to encode an attempt's headers.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


class JSONField(peewee.TextField):
    """JSON stored as text (identical on SQLite and PostgreSQL), keys sorted, no spaces."""

    def db_value(self, value: Any) -> str | None:
        return None if value is None else _ENCODER.encode(value)

    def python_value(self, value: str | None) -> Any:
        return None if value is None else json.loads(value)


class PayloadField(JSONField):
    """An event's payload: JSON text with its keys in the order they were received.

    Never sorted: every attempt's body is built from it (``webhooks.delivery.outgoing.body_bytes``),
    and receivers hash and dedupe on those bytes, so a retry, resend, recover or ``flask
    listen`` must send what the first attempt sent.
    """

    def db_value(self, value: Any) -> str | None:
        return None if value is None else payload_json(value).decode()


class SealedField(peewee.TextField):
    """A secret, stored sealed under ``SECRETS_KEY`` (``webhooks.sealing``) and read back in the clear.

    A value already sealed is stored as it is (copied from another sealed column); one never
    sealed (stored before migration 0016) reads as itself.
    """

    def db_value(self, value: Any) -> str | None:
        if value is None or (isinstance(value, str) and value.startswith(sealing.PREFIX)):
            return value
        return sealing.keyring().seal(value)

    def python_value(self, value: str | None) -> str | None:
        return None if value is None else sealing.keyring().open(value)


class SealedUrlField(SealedField):
    """A destination URL: sealed when it carries a password (``amqp://user:pass@…``), in the clear
    otherwise (so support staff can still search endpoints by URL), read back whole either way.

    Migration 0027 sealed the URLs stored before; ``flask secrets rotate-key`` reseals them.
    """

    def db_value(self, value: Any) -> str | None:
        if isinstance(value, str) and not value.startswith(sealing.PREFIX) and not has_password(value):
            return value
        return super().db_value(value)
