"""/v1/event-types: the event-type catalog (``webhooks.catalog``), its JSON Schemas and examples.

Read with a tenant key or a platform key, written (POST, PATCH, DELETE) with a platform key: the
catalog is the platform's, one for every tenant (``require_catalog_key``). ``GET
/v1/event-types.schema.json`` is the whole catalog as one JSON Schema document, for code generators.
"""

from __future__ import annotations

from typing import Any

from flask import jsonify, request, url_for
from flask.views import MethodView
from flask_smorest import abort
from marshmallow import Schema, fields, validate

from webhooks.api.auth import require_any_key, require_platform_key
from webhooks.api.fields import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, CursorPageSchema, UtcDateTime
from webhooks.api.parsing import Blueprint
from webhooks.catalog import store
from webhooks.catalog.documents import catalog_document
from webhooks.catalog.spec import NAME_RULE, EventTypeCreateSchema, EventTypeUpdateSchema
from webhooks.event_types import EVENT_TYPE_PATTERN

#: Methods that only read.
READING = frozenset({"GET", "HEAD", "OPTIONS"})


def require_catalog_key() -> None:
    """``before_request``: any key reads the catalog; only a platform key writes it (a tenant key: 403)."""
    require_any_key()
    if request.method not in READING:
        require_platform_key("writing the event-type catalog")


blp = Blueprint("event_types", __name__, url_prefix="/v1/event-types",
                description="The event-type catalog: names, descriptions, JSON Schemas of the payload, examples")
blp.before_request(require_catalog_key)

#: The body of PATCH: every field optional.
EVENT_TYPE_UPDATE = EventTypeUpdateSchema(partial=True)


class EventTypeListArgsSchema(Schema):
    cursor = fields.String(
        validate=validate.Regexp(EVENT_TYPE_PATTERN, error="must be the next_cursor of a previous page of this list"),
        metadata={"description": "The `next_cursor` of the previous page (absent for the first page)."},
    )
    limit = fields.Integer(load_default=DEFAULT_PAGE_SIZE, validate=validate.Range(1, MAX_PAGE_SIZE))
    group = fields.String(validate=validate.Regexp(EVENT_TYPE_PATTERN, error=NAME_RULE),
                          metadata={"description": "Only the types of this group (`operational`: the service's)."})
    include_archived = fields.Boolean(load_default=False, truthy={"true"}, falsy={"false"},
                                      metadata={"description": "`true`: list archived types too."})


class EventTypeSchema(Schema):
    name = fields.String()
    description = fields.String()
    group = fields.String(allow_none=True)
    schema = fields.Dict(allow_none=True, metadata={"description": "JSON Schema (draft 2020-12) of the payload."})
    examples = fields.List(fields.Dict())
    deprecated = fields.Boolean()
    archived = fields.Boolean()
    operational = fields.Boolean(metadata={"description": "Raised by the service itself (built in, read-only)."})
    version = fields.Integer(metadata={"description": "Grows with each change of `schema`."})
    created_at = UtcDateTime(allow_none=True)
    updated_at = UtcDateTime(allow_none=True)
    email_subject = fields.String(allow_none=True, metadata={"description": "Template of the emails' subject."})
    email_text = fields.String(allow_none=True, metadata={"description": "Template of the emails' plain text."})
    email_html = fields.String(allow_none=True, metadata={"description": "Template of the emails' HTML."})


class EventTypePageSchema(CursorPageSchema):
    data = fields.List(fields.Nested(EventTypeSchema))


class CatalogDocumentSchema(Schema):
    """Documents the answer (a JSON Schema document; returned as built)."""

    dialect = fields.String(data_key="$schema")
    title = fields.String()
    description = fields.String()
    defs = fields.Dict(data_key="$defs", metadata={"description": "Each event type's payload schema, by name."})
    one_of = fields.List(fields.Dict(), data_key="oneOf")


def _entry_or_404(name: str) -> store.Entry:
    entry = store.get(name)
    if entry is None:
        abort(404, message=f"event type {name!r} not found")
    return entry


def _writing(action: Any, *args: Any) -> store.Entry:
    """``action(*args)`` with the catalog's refusals as HTTP answers."""
    try:
        return action(*args)
    except store.CatalogProblem as problem:
        abort(422, message=str(problem), errors={"json": problem.problems})
    except store.EventTypeExists as error:
        abort(409, message=str(error))
    except store.BuiltIn as error:
        abort(409, message=str(error))
    except store.UnknownEventType as error:
        abort(404, message=str(error))


@blp.route("")
class EventTypes(MethodView):
    @blp.arguments(EventTypeListArgsSchema, location="query")
    @blp.response(200, EventTypePageSchema)
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """The catalog by name (the operational types among them), cursor-paged."""
        return store.page(limit=args["limit"], after=args.get("cursor"), group=args.get("group"),
                          include_archived=args["include_archived"])

    @blp.arguments(EventTypeCreateSchema)
    @blp.response(201, EventTypeSchema)
    @blp.alt_response(409, response="CONFLICT")
    def post(self, data: dict[str, Any]) -> tuple[store.Entry, dict[str, str]]:
        """Add an event type. `schema` is checked (an invalid one is a 422 saying why), then each example
        against it (a 422 naming the example's index and each failing path), then each email template:
        it must compile and render each example (a 422 naming the template and the example)."""
        entry = _writing(store.create, data)
        return entry, {"Location": url_for("event_types.EventType", name=entry.name)}


@blp.route("/<name>", endpoint="EventType")
class EventTypeItem(MethodView):
    @blp.response(200, EventTypeSchema)
    def get(self, name: str) -> store.Entry:
        """An event type with its JSON Schema and examples (archived ones too)."""
        return _entry_or_404(name)

    @blp.arguments(EVENT_TYPE_UPDATE)
    @blp.response(200, EventTypeSchema)
    @blp.alt_response(409, response="CONFLICT")
    def patch(self, changes: dict[str, Any], name: str) -> store.Entry:
        """Change an event type; a new `schema` is a new `version` (events posted from then on are checked
        against it). `archived: false` restores an archived type."""
        return _writing(store.update, name, changes)

    @blp.response(204)
    @blp.alt_response(409, response="CONFLICT")
    def delete(self, name: str) -> None:
        """Archive an event type: kept, with the events of that type, but no longer listed, and refused
        at ingestion when `EVENT_TYPES_STRICT=1`."""
        _writing(store.archive, name)


schema_blp = Blueprint("event_types_document", __name__, url_prefix="/v1",
                       description="The event-type catalog as one JSON Schema document")
schema_blp.before_request(require_catalog_key)


@schema_blp.route("/event-types.schema.json")
class CatalogDocument(MethodView):
    @schema_blp.response(200, CatalogDocumentSchema)
    def get(self) -> Any:
        """Every type of the catalog that has a schema, as one JSON Schema (draft 2020-12) document: each
        payload schema under `$defs`, and the webhook body (`type`, `timestamp`, `data`) as a `oneOf`."""
        return jsonify(catalog_document(store.every_entry(include_archived=False) + list(store.BUILT_IN.values())))
