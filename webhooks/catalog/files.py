"""A catalog as a file (JSON or YAML) that lives in the platform's repository: read for
``flask event-types import``, written by ``flask event-types export``.

The file is ``{"event_types": [ … ]}`` (or the list alone); each entry is what ``POST
/v1/event-types`` takes. YAML is read as JSON's data model: no dates, no custom tags, so
an example reads back exactly as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from marshmallow import ValidationError

from webhooks.errors import InvalidInput
from webhooks.catalog.spec import EventTypeCreateSchema

#: The key of the entries in a catalog file.
KEY = "event_types"

_ENTRY = EventTypeCreateSchema()


class CatalogFileError(InvalidInput):
    """A file that is not a catalog: says where and why."""


class _JsonLikeLoader(yaml.SafeLoader):
    """YAML's safe loader without implicit timestamps (``2026-11-26`` stays a string, as in JSON)."""


_JsonLikeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse(text: str, yaml_text: bool) -> list[dict[str, Any]]:
    """The entries of a catalog file, each loaded as the API loads one; CatalogFileError otherwise."""
    try:
        document = yaml.load(text, Loader=_JsonLikeLoader) if yaml_text else json.loads(text)
    except (yaml.YAMLError, ValueError) as error:
        raise CatalogFileError(f"not {'YAML' if yaml_text else 'JSON'}: {error}") from None
    entries = document.get(KEY) if isinstance(document, dict) else document
    if not isinstance(entries, list):
        raise CatalogFileError(f"expected {{{KEY!r}: [ … ]}} or a list of event types")
    loaded, names = [], set()
    for index, entry in enumerate(entries):
        try:
            fields = _ENTRY.load(entry if isinstance(entry, dict) else {})
        except ValidationError as error:
            name = entry.get("name") if isinstance(entry, dict) else None
            raise CatalogFileError(f"entry {index} ({name or 'no name'}): {json.dumps(error.messages)}") from None
        if fields["name"] in names:
            raise CatalogFileError(f"entry {index}: {fields['name']!r} is named twice")
        names.add(fields["name"])
        loaded.append(fields)
    return loaded


def read(path: Path) -> list[dict[str, Any]]:
    """``parse`` of a file: YAML when it ends in ``.yaml`` or ``.yml``, else JSON."""
    return parse(path.read_text(encoding="utf-8"), path.suffix.lower() in (".yaml", ".yml"))


def dump(entries: list[dict[str, Any]], yaml_text: bool) -> str:
    """The file ``read`` reads back as ``entries``."""
    document = {KEY: entries}
    if yaml_text:
        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
