"""The ``idempotency-key`` of every POST of the Svix API, by ingestion's rules (``webhooks.ingest.idempotency``):
the same key and request (method, path, query and body) within ``IDEMPOTENCY_TTL`` answer the first answer
again (its status and body, with ``Idempotent-Replayed: true``) and act no more; the same key with another
request is a 409. Keys are the platform key's own (two keys may use the same one).

The key is taken before the view runs (a row with no ``status``, unique ``(api_key, key)``: of two requests
racing, one acts; the other waits up to ``IN_FLIGHT_WAIT`` for its answer, as the Svix server does, then is
a 409 to retry). A 2xx answer is kept; any other is forgotten, as the Svix server does, so a retry after an
error acts. A row whose first request never finished (its process died)
is taken over after ``STALE_START``. Sending a message keeps its key as ingestion does (``OWN_KEYS``).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import peewee
from flask import Response, g, request

from webhooks.api.events import REPLAYED_HEADER
from webhooks.ingest.idempotency import IdempotencyConflict, expired, fingerprint
from webhooks.storage import db
from webhooks.storage.models import IdempotentResponse
from webhooks.storage.timeutil import utcnow
from webhooks.svix import wire

#: The request header (the Svix SDKs send one with every POST, ``auto_…`` when the caller gave none).
HEADER = "idempotency-key"

#: The longest key (as ingestion's).
MAX_KEY = 255

#: A key whose first request has not answered after this long is taken over by the next request with it.
STALE_START = timedelta(seconds=60)

#: How long a repeat waits for the answer of its first request, still being answered (seconds).
IN_FLIGHT_WAIT = 5.0

#: How often it looks (seconds).
IN_FLIGHT_POLL = 0.05

#: Views that keep their keys themselves: a message's key is its event's (``eventId``, ``webhooks.svix.messages``).
OWN_KEYS = frozenset({"svix.svix_messages.create_message"})


def _request_fingerprint() -> str:
    """The method, path, query and body (its JSON when it is JSON, as sent otherwise)."""
    raw = request.get_data(cache=True)
    body: Any = request.get_json(silent=True, cache=True)
    if body is None and raw:
        body = raw.decode("utf-8", "replace")
    return fingerprint({"method": request.method, "path": request.path,
                        "query": sorted(request.args.items(multi=True)), "body": body})


def _take(row: IdempotentResponse, digest: str, now: datetime) -> bool:
    """Take over an expired or stale row for this request; False when another request took it first."""
    taken = (IdempotentResponse.update(request_hash=digest, status=None, body=None, created_at=now)
             .where((IdempotentResponse.id == row.id) & (IdempotentResponse.created_at == row.created_at))
             .execute())
    return taken == 1


def _on_file(key: str) -> IdempotentResponse | None:
    return IdempotentResponse.get_or_none((IdempotentResponse.api_key == g.api_key_id) & (IdempotentResponse.key == key))


def _claim(key: str, digest: str) -> IdempotentResponse:
    """This request's row (it acts), or the finished row it repeats; a 409 for another request or one in flight."""
    deadline = time.monotonic() + IN_FLIGHT_WAIT
    while True:
        now = utcnow()
        try:
            with db.write():
                return IdempotentResponse.create(api_key=g.api_key_id, key=key, request_hash=digest, created_at=now)
        except peewee.IntegrityError:
            row = _on_file(key)
        if row is None:  # forgotten in between (an error answer): this request acts
            continue
        if expired(row.created_at, now) or row.status is None and row.created_at < now - STALE_START:
            if _take(row, digest, now):
                return IdempotentResponse.get_by_id(row.id)
            continue
        if row.request_hash != digest:
            wire.fail(409, str(IdempotencyConflict([(0, key)])))
        if row.status is not None:
            return row
        if time.monotonic() >= deadline:
            wire.fail(409, f"a request with the idempotency key {key!r} is still being answered: retry")
        time.sleep(IN_FLIGHT_POLL)


def begin() -> Response | None:
    """``before_request`` (after authentication): the first answer again, or None to let the view act."""
    key = request.headers.get(HEADER)
    if request.method != "POST" or not key or request.endpoint is None or request.endpoint in OWN_KEYS:
        return None
    if len(key) > MAX_KEY:
        raise wire.SvixError(422, [{"loc": ["header", HEADER], "msg": f"at most {MAX_KEY} characters",
                                    "type": "value_error"}])
    row = _claim(key, _request_fingerprint())
    if row.status is None:
        g.svix_idempotent = row.id
        return None
    replay = Response(row.body or "", status=row.status, mimetype="application/json" if row.body else None)
    replay.headers[REPLAYED_HEADER] = "true"
    return replay


def finish(response: Response) -> Response:
    """``after_request``: keep a 2xx answer under the request's key; forget the key after any other."""
    row_id = g.pop("svix_idempotent", None)
    if row_id is not None:
        if 200 <= response.status_code < 300:
            IdempotentResponse.update(status=response.status_code, body=response.get_data(as_text=True)).where(
                IdempotentResponse.id == row_id).execute()
        else:
            IdempotentResponse.delete().where(IdempotentResponse.id == row_id).execute()
    return response


def abandon(_error: BaseException | None) -> None:
    """``teardown_request``: a request that ended without an answer (an unhandled error) forgets its key."""
    row_id = g.pop("svix_idempotent", None)
    if row_id is not None:
        IdempotentResponse.delete().where(IdempotentResponse.id == row_id).execute()
