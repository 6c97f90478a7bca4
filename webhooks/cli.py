"""``flask`` commands: ``migrate`` and ``tenant create`` / ``tenant rotate-key``."""

from __future__ import annotations

import json
import re

import click
from flask import Flask
from playhouse.migrations import Runner

from webhooks.auth_keys import create_api_key, revoke_api_keys
from webhooks.db import database, write
from webhooks.ids import new_id
from webhooks.models import Tenant

#: A plausible email address (the SMTP server has the last word).
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")

#: Where numbered migration modules live, relative to the repository root.
MIGRATIONS_DIR = "migrations"


def migrate(directory: str = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations in order; returns their names (idempotent)."""
    with database.connection_context():
        return Runner(database.obj, directory).up()


def create_tenant(name: str, contact_email: str | None = None) -> dict[str, str]:
    """A new tenant and its first API key, as printed by ``flask tenant create``."""
    with database.connection_context(), write():
        tenant = Tenant.create(id=new_id("ten"), name=name, contact_email=contact_email)
        api_key = create_api_key(tenant)
    return {"id": tenant.id, "name": tenant.name, "api_key": api_key}


def init_app(app: Flask) -> None:
    @app.cli.command("migrate")
    @click.option("--directory", default=MIGRATIONS_DIR, show_default=True)
    def migrate_command(directory: str) -> None:
        """Apply the numbered migrations in migrations/ that have not run yet."""
        applied = migrate(directory)
        click.echo("applied: " + ", ".join(applied) if applied else "database is up to date")

    @app.cli.group("tenant")
    def tenant_group() -> None:
        """Manage tenants and their API keys."""

    @tenant_group.command("create")
    @click.argument("name")
    @click.option("--contact-email", help="Where alerts about this tenant's endpoints go by default.")
    def tenant_create(name: str, contact_email: str | None) -> None:
        """Create a tenant; prints JSON {id, name, api_key}. The key is shown only once."""
        if not name.strip():
            raise click.BadParameter("must not be empty", param_hint="NAME")
        if contact_email is not None and not EMAIL.fullmatch(contact_email):
            raise click.BadParameter("not an email address", param_hint="--contact-email")
        click.echo(json.dumps(create_tenant(name.strip(), contact_email)))

    @tenant_group.command("rotate-key")
    @click.argument("tenant_id")
    def tenant_rotate_key(tenant_id: str) -> None:
        """Revoke a tenant's keys and issue a new one; prints JSON {id, api_key, revoked}."""
        with database.connection_context(), write():
            tenant = Tenant.get_or_none(Tenant.id == tenant_id)
            if tenant is None:
                raise click.ClickException(f"no tenant {tenant_id}")
            revoked = revoke_api_keys(tenant)
            api_key = create_api_key(tenant)
        click.echo(json.dumps({"id": tenant.id, "api_key": api_key, "revoked": revoked}))
