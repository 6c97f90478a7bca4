"""``flask`` commands: ``migrate``, ``tenant create`` (names are unique), ``tenant list`` and the
tenant's API keys (add, list, revoke, rotate); each takes a tenant's id, uid or name and names the
tenant it acted on. ``platform …`` manages the platform's keys (``webhooks.platform_cli``);
``event-types import|export`` the catalog (``webhooks.catalog.cli``)."""

from __future__ import annotations

import json
import re
from typing import Any

import click
import peewee
from flask import Flask
from playhouse.migrations import Runner

from webhooks.catalog import cli as catalog_cli
from webhooks.errors import Refused
from webhooks.ingest.auth_keys import (
    KeyNotFound, create_api_key, find_tenant, key_info, live_key_counts, live_keys, revoke_key, rotate_key,
    tenant_info,
)
from webhooks import tenants
from webhooks.platform_cli import duration_option
from webhooks.storage import db_errors
from webhooks.storage.db import database, write
from webhooks.storage.models import Tenant
from webhooks.storage.timeutil import isoformat

#: A plausible email address (the SMTP server has the last word).
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")

#: Where numbered migration modules live, relative to the repository root.
MIGRATIONS_DIR = "migrations"


def migrate(directory: str = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations in order; returns their names (idempotent)."""
    with database.connection_context():
        return Runner(database.obj, directory).up()


class TenantNameTaken(click.ClickException, Refused):
    """Tenant names are unique, whatever their case (migration 0011's index)."""

    def __init__(self, name: str, existing: Tenant) -> None:
        super().__init__(f"a tenant named {existing.name!r} already exists ({existing.id}): choose another name")
        self.existing = existing


def create_tenant(name: str, contact_email: str | None = None) -> dict[str, str]:
    """A new tenant and its first API key, as printed by ``flask tenant create``; TenantNameTaken if the name is."""
    with database.connection_context():
        try:
            with write():
                tenant = tenants.create_tenant(name, contact_email=contact_email)
                _, api_key = create_api_key(tenant)
        except tenants.TenantTaken as error:
            raise TenantNameTaken(name, error.existing or Tenant(id="?", name=name)) from None
    return {"id": tenant.id, "name": tenant.name, "api_key": api_key}


def _tenant(id_or_name: str) -> Tenant:
    """The tenant a command names, by its id or its name (``find_tenant``)."""
    tenant = find_tenant(id_or_name)
    if tenant is None:
        raise click.ClickException(f"no tenant with the id or name {id_or_name!r} (flask tenant list shows them)")
    return tenant


def tenant_rows() -> list[dict[str, Any]]:
    """Every tenant as ``flask tenant list`` prints it, oldest first, with its live keys counted."""
    live = dict(live_key_counts())
    return [
        {**tenant_info(tenant), "contact_email": tenant.contact_email, "created_at": isoformat(tenant.created_at),
         "live_keys": live.get(tenant.id, 0)}
        for tenant in Tenant.select().where(Tenant.deleted_at.is_null()).order_by(Tenant.created_at, Tenant.id)
    ]


def init_app(app: Flask) -> None:
    catalog_cli.init_app(app)
    from webhooks import platform_cli

    platform_cli.init_app(app)

    @app.cli.command("migrate")
    @click.option("--directory", default=MIGRATIONS_DIR, show_default=True)
    def migrate_command(directory: str) -> None:
        """Apply the numbered migrations in migrations/ that have not run yet."""
        try:
            applied = migrate(directory)
        except peewee.OperationalError as error:  # unreachable or missing: one line, not a driver's traceback
            raise click.ClickException(db_errors.explain(error, database.obj.webhooks_url)) from None
        click.echo("applied: " + ", ".join(applied) if applied else "database is up to date")

    @app.cli.group("tenant")
    def tenant_group() -> None:
        """Manage tenants and their API keys. TENANT is a tenant's id or its name."""

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

    @tenant_group.command("list")
    def tenant_list() -> None:
        """Every tenant: a JSON array of {id, name, contact_email, created_at, live_keys}, oldest first."""
        with database.connection_context():
            click.echo(json.dumps(tenant_rows()))

    @tenant_group.command("add-key")
    @click.argument("tenant_id", metavar="TENANT")
    @click.option("--name", default="default", show_default=True, help="What the key is for (shown in listings).")
    def tenant_add_key(tenant_id: str, name: str) -> None:
        """Issue another key; prints JSON {id, name, api_key}. The key is shown only once."""
        if not name.strip() or len(name.strip()) > 100:
            raise click.BadParameter("must be 1 to 100 characters", param_hint="--name")
        with database.connection_context(), write():
            tenant = _tenant(tenant_id)
            row, api_key = create_api_key(tenant, name.strip())
        click.echo(json.dumps({"id": row.id, "name": row.name, "api_key": api_key, "tenant": tenant_info(tenant)}))

    @tenant_group.command("keys")
    @click.argument("tenant_id", metavar="TENANT")
    def tenant_keys(tenant_id: str) -> None:
        """List the tenant's live keys: a JSON array of {id, name, created_at, last_used_at, expires_at}."""
        with database.connection_context():
            click.echo(json.dumps([key_info(row) for row in live_keys(_tenant(tenant_id))]))

    @tenant_group.command("revoke-key")
    @click.argument("tenant_id", metavar="TENANT")
    @click.argument("key_id")
    def tenant_revoke_key(tenant_id: str, key_id: str) -> None:
        """Revoke one key at once (web processes stop accepting it within API_KEY_CACHE_SECONDS)."""
        with database.connection_context(), write():
            tenant = _tenant(tenant_id)
            try:
                row = revoke_key(tenant, key_id)
            except KeyNotFound as error:
                raise click.ClickException(str(error)) from None
        click.echo(json.dumps({"id": row.id, "revoked_at": isoformat(row.revoked_at), "tenant": tenant_info(tenant)}))

    @tenant_group.command("rotate-key")
    @click.argument("tenant_id", metavar="TENANT")
    @click.option("--key", "key_id", help="The key to replace (default: every live key of the tenant).")
    @click.option("--overlap", default="0s", show_default=True, callback=duration_option,
                  help="How long the old key keeps working (e.g. 24h); 0s revokes it at once.")
    def tenant_rotate_key(tenant_id: str, key_id: str | None, overlap: float) -> None:
        """Issue a new key replacing the old one; prints JSON {id, key_id, name, api_key, revoked, expiring}."""
        with database.connection_context(), write():
            tenant = _tenant(tenant_id)
            try:
                rotation = rotate_key(tenant, key_id, overlap)
            except KeyNotFound as error:
                raise click.ClickException(str(error)) from None
        click.echo(json.dumps({
            "id": tenant.id, "tenant": tenant_info(tenant), "key_id": rotation.new.id, "name": rotation.new.name, "api_key": rotation.api_key,
            "revoked": sum(row.revoked_at is not None for row in rotation.old),
            "expiring": [{"id": row.id, "expires_at": isoformat(row.expires_at)}
                         for row in rotation.old if row.revoked_at is None],
        }))
