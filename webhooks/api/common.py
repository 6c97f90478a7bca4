"""What every /v1 view shares: the caller's tenant, "this tenant's X or 404", cursor pages."""

from __future__ import annotations

from typing import Any, TypeVar

import peewee
from flask import g
from flask_smorest import abort

from webhooks.actions import Requester
from webhooks.storage.ids import has_prefix
from webhooks.storage.models import Attempt, BaseModel, Delivery, Endpoint, Event, Tenant
from webhooks.storage.size_budget import ATTEMPT_CHARS, MAX_ATTEMPT_PAGE_CHARS, keys_within

#: The models a tenant owns and the API looks up by id.
M = TypeVar("M", Endpoint, Event, Delivery)

#: Model -> (id prefix, the noun a 404 names). Nothing else is said: whether an id exists
#: in another tenant is never revealed.
OWNED: dict[type[BaseModel], tuple[str, str]] = {
    Endpoint: ("ep", "endpoint"),
    Event: ("evt", "event"),
    Delivery: ("dlv", "delivery"),
}

#: ``recent_attempts`` of a delivery shows at most this many.
RECENT_ATTEMPTS = 20



def current_tenant() -> Tenant:
    """The tenant whose API key authenticated this request (set by ``auth.require_tenant``)."""
    return g.tenant


def api_requester() -> Requester:
    """Who asks, for resends and recovers made through the API: the tenant API key of this request."""
    return Requester("api_key", g.api_key_id)


def get_owned(model: type[M], object_id: str) -> M:
    """This tenant's ``model`` row ``object_id``, or abort 404 (unknown, malformed or not theirs).

    Soft-deleted endpoints are 404 too (their attempts stay readable per event and per delivery).
    """
    prefix, noun = OWNED[model]
    if has_prefix(object_id, prefix):
        query = model.select().where((model.id == object_id) & (model.tenant == current_tenant().id))
        if model is Endpoint:
            query = query.where(Endpoint.deleted_at.is_null())
        row = query.first()
        if row is not None:
            return row
    abort(404, message=f"{noun} not found")


def cursor_page(
    query: peewee.ModelSelect[Any],
    key: peewee.Field,
    *,
    limit: int,
    after: Any = None,
    newest_first: bool = False,
    feed: bool = False,
    prefetch: tuple[peewee.ModelSelect[Any], ...] = (),
    size: tuple[peewee.ColumnBase, int] | None = None,
) -> dict[str, Any]:
    """One page ``{data, next_cursor, has_more}`` of ``query`` ordered by the unique ``key``.

    Rows come after the cursor ``after`` (before it when ``newest_first``). ``next_cursor``
    is the last row's key; when there is no more it is None, except for a ``feed``, where it
    is always present (the last key, or ``after`` itself on an empty page) so a client keeps
    polling from it. ``prefetch`` subqueries load related rows for the page in one query each.
    ``size`` = (a row's size as an SQL expression, the page's budget): the page ends before
    the row that would pass the budget (it always holds one row), with ``has_more``.
    """
    if after is not None:
        query = query.where(key < after if newest_first else key > after)
    order = key.desc() if newest_first else key.asc()
    if size is None:
        rows = _rows(query.order_by(order).limit(limit + 1), prefetch)
        has_more = len(rows) > limit
        rows = rows[:limit]
        last = getattr(rows[-1], key.name) if rows else None
    else:
        # The keys and sizes first (narrow), then only the rows that fit, whole.
        sized = list(query.select(key, size[0]).order_by(order).limit(limit + 1).tuples())
        keys = keys_within(sized, limit, size[1])
        has_more = len(sized) > len(keys)
        rows = _rows(query.where(key.in_(keys)).order_by(order), prefetch) if keys else []
        last = keys[-1] if keys else None  # a row purged meanwhile does not move the cursor back
    if feed:
        next_cursor = last if rows else after
    else:
        next_cursor = last if has_more else None
    return {"data": rows, "next_cursor": next_cursor, "has_more": has_more}


def _rows(query: peewee.ModelSelect[Any], prefetch: tuple[peewee.ModelSelect[Any], ...]) -> list[Any]:
    return list(query.prefetch(*prefetch)) if prefetch else list(query)


def attempt_page(condition: peewee.Expression, args: dict[str, Any]) -> dict[str, Any]:
    """Attempts matching ``condition``, newest first, paged by attempt id (ids sort by time),
    at most ``MAX_ATTEMPT_PAGE_CHARS`` of stored text a page."""
    return cursor_page(
        Attempt.select().where(condition),
        Attempt.id,
        limit=args["limit"],
        after=args.get("cursor"),
        newest_first=True,
        size=(ATTEMPT_CHARS, MAX_ATTEMPT_PAGE_CHARS),
    )


def recent_attempts(delivery: Delivery) -> list[Attempt]:
    """The newest attempts of ``delivery`` (at most ``RECENT_ATTEMPTS``)."""
    return list(
        Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.id.desc()).limit(RECENT_ATTEMPTS)
    )
