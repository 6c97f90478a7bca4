"""``flask secrets``: a new ``SECRETS_KEY`` (``generate-key``), the keys in use (``keys``) and every
stored secret sealed again under the first key (``rotate-key``), with the service running."""

from __future__ import annotations

import click
from flask import Flask

from webhooks import sealing
from webhooks.storage.db import database
from webhooks.storage.resealing import reseal


def init_app(app: Flask) -> None:
    @app.cli.group("secrets")
    def secrets_group() -> None:
        """The key that seals secrets at rest (SECRETS_KEY); see docs/security.md."""

    @secrets_group.command("generate-key")
    def generate_key() -> None:
        """Print a new key for SECRETS_KEY (put it first to seal with it, keep the old one after it)."""
        click.echo(sealing.new_key())

    @secrets_group.command("keys")
    def keys() -> None:
        """The ids of this process's keys, the sealing one first (ids only, never a key)."""
        click.echo(" ".join(sealing.keyring().ids))

    @secrets_group.command("rotate-key")
    def rotate_key() -> None:
        """Seal every stored secret again under the first key of SECRETS_KEY; the others still open them.

        Safe while the service runs and safe to run again: a secret already under that key is left as it is.
        """
        ring = sealing.keyring()
        with database.connection_context():
            try:
                done = reseal(database.obj, ring)
            except sealing.SealError as error:
                raise click.ClickException(str(error)) from None
        click.echo(f"sealed under key {ring.current}: {done.resealed} again, {done.current} already; "
                   f"{done.changed_meanwhile} changed meanwhile (sealed by whoever changed them)")
