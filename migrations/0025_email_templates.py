"""Event types may carry email templates (``email_subject``, ``email_text``, ``email_html``): what a
``mailto:`` endpoint's emails say (``webhooks.catalog.mail_templates``); null: the default rendering."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("event_type", "email_subject", TextField(null=True)),
        migrator.add_column("event_type", "email_text", TextField(null=True)),
        migrator.add_column("event_type", "email_html", TextField(null=True)),
    )
