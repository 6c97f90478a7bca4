"""``flask platform …``: the platform's API keys (for ``/v1/tenants…``), on the tenant keys' own
mechanism (``webhooks.ingest.auth_keys`` with the owner ``PLATFORM``): create, list, revoke, rotate."""

from __future__ import annotations

import json

import click
from flask import Flask

from webhooks.ingest.auth_keys import PLATFORM, KeyNotFound, create_api_key, key_info, live_keys, revoke_key, rotate_key
from webhooks.durations import parse_seconds
from webhooks.storage.db import database, write
from webhooks.storage.timeutil import isoformat


def duration_option(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    """``--overlap``'s callback: seconds, or a usage error that says what a duration looks like."""
    try:
        return parse_seconds(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def init_app(app: Flask) -> None:
    @app.cli.group("platform")
    def platform_group() -> None:
        """The platform's API keys: they manage tenants (/v1/tenants) and act for any of them."""

    @platform_group.command("create-key")
    @click.argument("name")
    def create_key(name: str) -> None:
        """Issue a platform key; prints JSON {id, name, api_key}. The key is shown only once."""
        if not name.strip() or len(name.strip()) > 100:
            raise click.BadParameter("must be 1 to 100 characters", param_hint="NAME")
        with database.connection_context(), write():
            row, api_key = create_api_key(PLATFORM, name.strip())
        click.echo(json.dumps({"id": row.id, "name": row.name, "api_key": api_key}))

    @platform_group.command("keys")
    def keys() -> None:
        """The live platform keys: a JSON array of {id, name, created_at, last_used_at, expires_at}."""
        with database.connection_context():
            click.echo(json.dumps([key_info(row) for row in live_keys(PLATFORM)]))

    @platform_group.command("revoke-key")
    @click.argument("key_id")
    def revoke(key_id: str) -> None:
        """Revoke one platform key at once (web processes stop accepting it within API_KEY_CACHE_SECONDS)."""
        with database.connection_context(), write():
            try:
                row = revoke_key(PLATFORM, key_id)
            except KeyNotFound as error:
                raise click.ClickException(str(error)) from None
        click.echo(json.dumps({"id": row.id, "revoked_at": isoformat(row.revoked_at)}))

    @platform_group.command("rotate-key")
    @click.argument("key_id")
    @click.option("--overlap", default="0s", show_default=True, callback=duration_option,
                  help="How long the old key keeps working (e.g. 24h); 0s revokes it at once.")
    def rotate(key_id: str, overlap: float) -> None:
        """Issue a new key with the same name replacing KEY_ID; prints JSON {id, name, api_key, replaced}."""
        with database.connection_context(), write():
            try:
                rotation = rotate_key(PLATFORM, key_id, overlap)
            except KeyNotFound as error:
                raise click.ClickException(str(error)) from None
        (old,) = rotation.old
        click.echo(json.dumps({"id": rotation.new.id, "name": rotation.new.name, "api_key": rotation.api_key,
                               "replaced": key_info(old) | {"revoked_at": isoformat(old.revoked_at)}}))
