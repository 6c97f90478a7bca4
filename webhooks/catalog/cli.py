"""``flask event-types import FILE`` and ``flask event-types export``: the catalog kept as a file
in the platform's repository, loaded in one transaction."""

from __future__ import annotations

import json
from pathlib import Path

import click
from flask import Flask

from webhooks.catalog import files, store
from webhooks.storage.db import database


def init_app(app: Flask) -> None:
    @app.cli.group("event-types")
    def event_types_group() -> None:
        """The event-type catalog: load it from a file, write it to one."""

    @event_types_group.command("import")
    @click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    def import_command(path: Path) -> None:
        """Create or change each event type FILE names (JSON, or YAML if it ends in .yaml/.yml), all or
        none; types it does not name are left alone. Prints JSON {created, updated, unchanged}."""
        try:
            entries = files.read(path)
        except files.CatalogFileError as error:
            raise click.ClickException(f"{path}: {error}") from None
        with database.connection_context():
            try:
                loaded = store.load(entries)
            except (store.CatalogProblem, store.BuiltIn) as error:
                raise click.ClickException(f"{path}: {error}; nothing was imported") from None
        click.echo(json.dumps({"created": loaded.created, "updated": loaded.updated, "unchanged": loaded.unchanged}))

    @event_types_group.command("export")
    @click.option("--format", "file_format", type=click.Choice(["json", "yaml"]), default="json", show_default=True)
    @click.option("--include-archived", is_flag=True, help="Archived types too (importing them restores them).")
    def export_command(file_format: str, include_archived: bool) -> None:
        """Print the catalog (not the built-in operational types) as a file `import` reads."""
        with database.connection_context():
            entries = [store.as_file_entry(entry) for entry in store.every_entry(include_archived)]
        click.echo(files.dump(entries, file_format == "yaml"), nl=False)
