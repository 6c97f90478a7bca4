"""The kit's table: server-side sessions of the console and the portal."""

from __future__ import annotations

import peewee

from webhooks.storage.db import database
from webhooks.storage.fields import JSONField
from webhooks.storage.timeutil import utcnow


class PageSession(peewee.Model):
    """One signed-in browser. The cookie holds a random token; only its SHA-256 is stored, so a
    leaked table opens no session. Deleting the row ends the session at once, everywhere."""

    #: SHA-256 (hex) of the cookie's token.
    id = peewee.CharField(primary_key=True, max_length=64)
    #: The site it belongs to (``console``, ``portal``): a console session never opens the portal.
    site = peewee.CharField(max_length=32)
    #: Whom it signs in, in the site's terms (a staff id, a tenant id).
    subject = peewee.CharField(max_length=128)
    #: What the site keeps with it (a portal session's capabilities).
    data = JSONField(default=dict)
    created_at = peewee.DateTimeField(default=utcnow)
    expires_at = peewee.DateTimeField()

    class Meta:
        database = database
        table_name = "page_session"
        indexes = ((("site", "subject"), False), (("expires_at",), False))


#: Tests truncate these with ``webhooks.storage.models.ALL_MODELS``.
PAGE_MODELS: tuple[type[peewee.Model], ...] = (PageSession,)
