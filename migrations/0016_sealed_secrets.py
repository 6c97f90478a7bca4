"""Endpoint secrets and signing keys sealed at rest under SECRETS_KEY (``webhooks.sealing``): the
columns become text (a sealed ``whsk_`` key is about 220 characters) and every stored secret is
sealed. Run again, it leaves what is sealed under the current key as it is."""
from peewee import *
from playhouse.migrate import PostgresqlMigrator

from webhooks.sealing import keyring
from webhooks.storage.resealing import reseal


def up(migrator, db):
    if isinstance(migrator, PostgresqlMigrator):
        db.execute_sql('ALTER TABLE "endpoint" ALTER COLUMN "secret" TYPE TEXT, '
                       'ALTER COLUMN "previous_secret" TYPE TEXT')
    reseal(db, keyring(), (("endpoint", ("secret", "previous_secret")),), urls=())  # as its columns were then
