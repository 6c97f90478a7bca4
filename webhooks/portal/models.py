"""The portal's table: one-time access links (only their hash is stored)."""

from __future__ import annotations

import peewee

from webhooks.storage.db import database
from webhooks.storage.fields import JSONField
from webhooks.storage.models import Tenant
from webhooks.storage.timeutil import utcnow


class PortalLink(peewee.Model):
    """A link that opens one portal session for one tenant, once, before it expires.

    The URL holds a random token; only its SHA-256 is stored, so the table opens nothing."""

    #: SHA-256 (hex) of the link's token.
    id = peewee.CharField(primary_key=True, max_length=64)
    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE")
    #: The capabilities the session it opens will carry (``webhooks.portal.capabilities``).
    capabilities = JSONField(default=list)
    created_at = peewee.DateTimeField(default=utcnow)
    expires_at = peewee.DateTimeField()
    #: When it was opened (a link opens one session only).
    used_at = peewee.DateTimeField(null=True)

    class Meta:
        database = database
        table_name = "portal_link"
        indexes = ((("expires_at",), False),)


#: Tests truncate these with ``webhooks.storage.models.ALL_MODELS``.
PORTAL_MODELS: tuple[type[peewee.Model], ...] = (PortalLink,)
