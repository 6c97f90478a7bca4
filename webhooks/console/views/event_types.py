"""The event-type catalog page: every type with its description, its payload's fields, its
JSON Schema and examples (the portal shows the same through the kit's ``pages/catalog.html``)."""

from __future__ import annotations

import re

from flask import render_template, request

from webhooks.catalog import store
from webhooks.console.blueprint import bp
from webhooks.event_types import EVENT_TYPE_PATTERN

#: Types shown per page.
PAGE_SIZE = 50

_NAME = re.compile(EVENT_TYPE_PATTERN)


@bp.route("/event-types")
def event_types() -> str:
    group = request.args.get("group", "").strip()
    cursor = request.args.get("cursor", "")
    include_archived = request.args.get("include_archived") == "true"
    page = store.page(limit=PAGE_SIZE, after=cursor if _NAME.fullmatch(cursor) else None,
                      group=group if _NAME.fullmatch(group) else None, include_archived=include_archived)
    return render_template("console/event_types.html", page=page, groups=store.groups(), group=group,
                           include_archived=include_archived)
