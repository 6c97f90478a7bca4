"""Svix event types are our catalog (``webhooks.catalog.store``): list, create, read, replace, patch and
archive them; Svix's ``schemas: {"1": …}`` is our ``schema`` of the payload, ``groupName`` our ``group``."""

from __future__ import annotations

from typing import Any, Callable, NoReturn

from flask import Blueprint

from webhooks.catalog import store
from webhooks.catalog.spec import EventTypeCreateSchema, EventTypeUpdateSchema
from webhooks.svix import wire

#: The Svix schema version our one schema is shown as.
SCHEMA_VERSION = "1"

CREATE, UPDATE = EventTypeCreateSchema(), EventTypeUpdateSchema()

blp = Blueprint("svix_event_types", __name__)


def show(entry: store.Entry) -> dict[str, Any]:
    """A catalog entry as a Svix ``EventTypeOut``."""
    return {"name": entry.name, "description": entry.description, "archived": entry.archived,
            "deprecated": entry.deprecated, "groupName": entry.group, "featureFlag": None,
            "schemas": {SCHEMA_VERSION: entry.schema} if entry.schema is not None else None,
            "createdAt": wire.timestamp(entry.created_at), "updatedAt": wire.timestamp(entry.updated_at)}


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    """A Svix event-type body as our catalog fields (``featureFlag`` is a 422: we have none)."""
    if data.get("featureFlag") or data.get("featureFlags"):
        wire.invalid(["body", "featureFlag"], "feature flags are not supported by this service")
    fields = {ours: data[theirs] for theirs, ours in (("name", "name"), ("description", "description"),
              ("groupName", "group"), ("deprecated", "deprecated"), ("archived", "archived")) if theirs in data}
    schemas = data.get("schemas")
    if schemas is not None:
        if not isinstance(schemas, dict) or len(schemas) > 1:
            wire.invalid(["body", "schemas"], "one schema at most, for the payload: {\"1\": <JSON Schema>}")
        fields["schema"] = next(iter(schemas.values()), None)
    return fields


def _writing(action: Callable[..., store.Entry], *args: Any) -> store.Entry:
    """``action(*args)`` with the catalog's refusals as Svix answers."""
    def refuse(status: int, error: Exception) -> NoReturn:
        wire.fail(status, str(error))

    try:
        return action(*args)
    except store.CatalogProblem as problem:
        raise wire.SvixError(422, wire.validation_detail(problem.problems)) from None
    except (store.EventTypeExists, store.BuiltIn) as error:
        refuse(409, error)
    except store.UnknownEventType as error:
        refuse(404, error)


def _entry(name: str) -> store.Entry:
    entry = store.get(name)
    if entry is None or entry.operational:  # the service's own types are not the platform's to send
        wire.fail(404, f"event type {name!r} not found")
    return entry


@blp.get("/event-type")
def list_event_types() -> dict[str, Any]:
    """The platform's event types by name (the service's operational ones left out: it raises them itself)."""
    limit, iterator, _ = wire.page_args()
    rows = store.page(limit=limit, after=iterator, include_archived=wire.flag("include_archived"))
    return {"data": [show(entry) for entry in rows["data"] if not entry.operational], "iterator": rows["next_cursor"], "prevIterator": None,
            "done": not rows["has_more"]}


@blp.post("/event-type")
def create_event_type() -> tuple[dict[str, Any], int]:
    fields = _fields(wire.body())
    archived = fields.pop("archived", False)
    entry = _writing(store.create, wire.load(CREATE, fields))
    return show(_writing(store.update, entry.name, {"archived": True}) if archived else entry), 201


@blp.get("/event-type/<name>")
def get_event_type(name: str) -> dict[str, Any]:
    return show(_entry(name))


@blp.put("/event-type/<name>")
def replace_event_type(name: str) -> tuple[dict[str, Any], int]:
    """Replace the entry's fields, or create it named ``name``."""
    fields = {**_fields(wire.body()), "name": name}
    if store.get(name) is None:
        fields.pop("archived", None)
        return show(_writing(store.create, wire.load(CREATE, fields))), 201
    fields.pop("name")
    changes = wire.load(UPDATE, {"group": None, "schema": None, "deprecated": False, "archived": False, **fields})
    return show(_writing(store.update, name, changes)), 200


@blp.patch("/event-type/<name>")
def patch_event_type(name: str) -> dict[str, Any]:
    fields = _fields(wire.body())
    fields.pop("name", None)
    return show(_writing(store.update, name, wire.load(UPDATE, fields, partial=True)))


@blp.delete("/event-type/<name>")
def delete_event_type(name: str) -> tuple[str, int]:
    """Archive it (kept with its history), as the Svix API does unless ``expunge=true``, which is a 422 here."""
    if wire.flag("expunge"):
        wire.invalid(["query", "expunge"], "event types are archived, never expunged, by this service")
    _writing(store.archive, name)
    return "", 204
