"""The event-type catalog as a page lists it, for the console and the portal alike: the query's
group, cursor and archived choice read safely, and the page of entries under their groups
(shown by the kit's ``templates/pages/catalog.html``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhooks.catalog import reading, store
from webhooks.event_types import EVENT_TYPE_PATTERN

#: Types shown per page (a catalog is rarely longer: most show on one page, under their groups).
PAGE_SIZE = 200

_NAME = re.compile(EVENT_TYPE_PATTERN)


def listing(args: Mapping[str, str], archived_choice: bool = True) -> dict[str, Any]:
    """What ``pages/catalog.html``'s ``catalog_list`` shows for a request's ``args``: the page of
    entries (``page``) and the same under their groups (``grouped``), the groups to choose from,
    the chosen group and whether archived types are shown (never when ``archived_choice`` is off)."""
    group = args.get("group", "").strip()
    cursor = args.get("cursor", "")
    include_archived = archived_choice and args.get("include_archived") == "true"
    page = store.page(limit=PAGE_SIZE, after=cursor if _NAME.fullmatch(cursor) else None,
                      group=group if _NAME.fullmatch(group) else None, include_archived=include_archived)
    return {"page": page, "grouped": reading.by_group(page["data"]), "groups": store.groups(), "group": group,
            "include_archived": include_archived, "archived_choice": archived_choice}
