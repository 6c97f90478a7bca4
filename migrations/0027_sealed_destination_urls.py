"""Destination URLs that carry a password (``amqp://user:pass@…``, ``redis://:pass@…``, HTTP basic
auth) are sealed at rest under SECRETS_KEY, like endpoint secrets (``fields.SealedUrlField``);
URLs without one stay in the clear. Run again, it leaves what is sealed under the current key."""

from webhooks.sealing import keyring
from webhooks.storage.resealing import reseal


def up(migrator, db):
    reseal(db, keyring(), (), (("endpoint", ("url", "fallback_url")),))
