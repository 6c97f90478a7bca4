"""``flask tenant portal-link`` and ``flask tenant end-portal-sessions``: the platform API's two
portal calls from the server's command line (the same functions, ``webhooks.portal.access``)."""

from __future__ import annotations

import json

import click
from flask import Flask

from webhooks.ingest.auth_keys import find_tenant
from webhooks.portal import access
from webhooks.portal.capabilities import ALL
from webhooks.storage.db import database
from webhooks.storage.models import Tenant
from webhooks.storage.timeutil import isoformat


def _tenant(id_or_name: str) -> Tenant:
    tenant = find_tenant(id_or_name)
    if tenant is None:
        raise click.ClickException(f"no tenant with the id or name {id_or_name!r} (flask tenant list shows them)")
    return tenant


def init_app(app: Flask) -> None:
    """Add the portal's commands to the ``tenant`` group (``webhooks.cli`` made it)."""
    group = app.cli.commands["tenant"]
    assert isinstance(group, click.Group)

    @group.command("portal-link")
    @click.argument("tenant_id", metavar="TENANT")
    @click.option("--capability", "capabilities", multiple=True, type=click.Choice(ALL),
                  help="What the session may do (repeat it); none given: everything.")
    @click.option("--expires-in", type=int, default=access.DEFAULT_EXPIRES_IN, show_default=True,
                  help="Seconds the link may be opened in.")
    def portal_link(tenant_id: str, capabilities: tuple[str, ...], expires_in: int) -> None:
        """A one-time link to the tenant's portal; prints JSON {url, expires_at, capabilities}."""
        with database.connection_context():
            try:
                link = access.create_link(_tenant(tenant_id), list(capabilities) or None, expires_in)
            except access.AccessError as error:
                raise click.BadParameter(str(error), param_hint=f"--{error.field.replace('_', '-')}") from None
        click.echo(json.dumps({"url": link.url, "expires_at": isoformat(link.expires_at),
                               "capabilities": list(link.capabilities)}))

    @group.command("end-portal-sessions")
    @click.argument("tenant_id", metavar="TENANT")
    def end_portal_sessions(tenant_id: str) -> None:
        """End every portal session of the tenant, and void its links not opened yet; prints JSON {ended}."""
        with database.connection_context():
            click.echo(json.dumps({"ended": access.end_sessions(_tenant(tenant_id))}))
