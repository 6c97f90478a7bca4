"""The Svix API's wire rules, shared by its routes: camelCase bodies checked by our own schemas,
errors as ``{"code", "detail"}`` (422: ``{"detail": [{loc, msg, type}]}``), pages as
``{data, iterator, prevIterator, done}``, and the path prefix these rules apply to.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, NoReturn

import peewee
from flask import request
from marshmallow import Schema, ValidationError
from werkzeug.exceptions import HTTPException

from webhooks.api.common import cursor_page
from webhooks.errors import Refused

#: Where the Svix API is served (at the host root: the Java and Kotlin SDKs drop a server URL's path).
PREFIX = "/api/v1"

#: ``limit`` of a page: the Svix API's default and bounds.
DEFAULT_LIMIT, MIN_LIMIT, MAX_LIMIT = 50, 1, 250

#: The ``code`` of an error body, by HTTP status (the Svix server's names).
CODES = {400: "bad_request", 401: "authentication_failed", 403: "permission_denied", 404: "not_found",
         405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type",
         429: "rate_limited", 500: "server_error", 503: "service_unavailable"}


class SvixError(Refused, HTTPException):
    """An error answered as ``{"code", "detail"}`` (``detail`` a list of ``{loc, msg, type}`` for a 422)."""

    def __init__(self, status: int, detail: Any, code: str | None = None) -> None:
        super().__init__()
        self.code = status
        self.detail, self.error_code = detail, code or CODES.get(status, "error")


def fail(status: int, detail: str, code: str | None = None) -> NoReturn:
    raise SvixError(status, detail, code)


def invalid(loc: list[str], msg: str, kind: str = "value_error") -> NoReturn:
    """A 422 on one field: ``loc`` as the Svix server names it (``["body", "url"]``)."""
    raise SvixError(422, [{"loc": loc, "msg": msg, "type": kind}])


def owns(path: str) -> bool:
    """Is ``path`` the Svix API's (its errors take the Svix shape)?"""
    return path == PREFIX or path.startswith(PREFIX + "/")


def error_response(error: HTTPException) -> tuple[dict[str, Any], int, dict[str, str]]:
    """Any HTTP error of a Svix route (ours, flask-smorest's ``abort``, Werkzeug's routing) in the Svix shape."""
    status = error.code or 500
    headers: dict[str, str] = {}
    if isinstance(error, SvixError):
        return {"code": error.error_code, "detail": error.detail}, status, headers
    data = getattr(error, "data", None) or {}
    headers = dict(data.get("headers") or {})
    detail = data.get("message") or error.description or CODES.get(status, "error")
    if status == 422 and data.get("errors"):  # flask-smorest's {location: {field: [msg]}}
        return {"detail": [item for location, messages in data["errors"].items()
                           for item in validation_detail(messages, "body" if location == "json" else location)]
                }, status, headers
    return {"code": CODES.get(status, "error"), "detail": detail}, status, headers


def validation_detail(messages: dict[str, Any], location: str = "body") -> list[dict[str, Any]]:
    """marshmallow's ``{field: [msg]}`` (nested for nested fields) as ``[{loc, msg, type}]``, names in camelCase."""
    items: list[dict[str, Any]] = []

    def walk(node: Any, loc: list[str]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*loc, camel(str(key))])
        elif isinstance(node, list):
            for message in node:
                walk(message, loc) if isinstance(message, (dict, list)) else items.append(
                    {"loc": loc, "msg": str(message), "type": "value_error"})
        else:
            items.append({"loc": loc, "msg": str(node), "type": "value_error"})

    walk(messages, [location])
    return items


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def body() -> dict[str, Any]:
    """The request's JSON object, or a 422 naming the body."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        invalid(["body"], "the body must be a JSON object", "type_error.dict")
    return data


def has_body() -> bool:
    """Did the request send a body (an optional one, like a rotation's)?"""
    return bool(request.get_data(cache=True))


def load(schema: Schema, data: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
    """``data`` (snake_case, already translated) checked by one of our own schemas, or the Svix 422."""
    try:
        return schema.load(data, partial=partial)
    except ValidationError as error:
        raise SvixError(422, validation_detail(error.normalized_messages())) from None


def page_args() -> tuple[int, str | None, bool]:
    """``limit`` (1–250), ``iterator`` and ``order`` (``ascending`` by default; ``descending``) of a list."""
    raw = request.args.get("limit", str(DEFAULT_LIMIT))
    if not raw.isdigit() or not MIN_LIMIT <= int(raw) <= MAX_LIMIT:
        raise SvixError(422, [{"loc": ["query", "limit"], "msg": f"limit must be from {MIN_LIMIT} to {MAX_LIMIT}",
                               "type": "value_error"}])
    order = request.args.get("order", "ascending")
    if order not in ("ascending", "descending"):
        raise SvixError(422, [{"loc": ["query", "order"], "msg": "order must be 'ascending' or 'descending'",
                               "type": "value_error"}])
    return int(raw), request.args.get("iterator") or None, order == "descending"


def page(query: peewee.ModelSelect[Any], key: peewee.Field, show: Any, *, newest_first: bool | None = None) -> dict[str, Any]:
    """One Svix page of ``query`` ordered by ``key``, each row shown by ``show``; the iterator is the last key."""
    limit, iterator, descending = page_args()
    rows = cursor_page(query, key, limit=limit, after=iterator,
                       newest_first=descending if newest_first is None else newest_first)
    return {"data": [show(row) for row in rows["data"]], "iterator": rows["next_cursor"], "prevIterator": None,
            "done": not rows["has_more"]}


def timestamp(value: datetime | None) -> str | None:
    """A stored (naive UTC) time as the Svix API writes it: ISO 8601 with its offset."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()


def flag(name: str) -> bool:
    """A boolean query parameter (``?get_if_exists=true``)."""
    return request.args.get(name, "").lower() in ("true", "1")
