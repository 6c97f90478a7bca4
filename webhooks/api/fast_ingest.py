"""A shortcut around Flask for the accepted case of ``POST /v1/events`` and ``POST /v1/events/batch``.

Around the view, Flask, Werkzeug, flask-smorest and webargs cost about as much CPU per
request as storing the event (profile in bench/RESULTS.md). This WSGI middleware answers
the requests it can answer exactly as the views would: a JSON body within the size limit,
a valid API key, every field valid on the parser's fast path, the events stored (or
replayed). It uses the views' own pieces (``auth_keys.authenticate``, the schemas' fast
loading, ``ingest.accept_events``, the answer builders) and Flask's JSON provider and
app context, so the answer is byte for byte the view's.

Anything else is handed to the Flask app unchanged, with the body it had read put back:
every error (400, 401, 409, 413, 415, 422, 429, …) is answered by the views and error
handlers, documented once in the OpenAPI document. The errors ingestion raises
(rate limit, idempotency conflict, reserved type) are raised before anything is written,
so the view meets them again; an unexpected error is re-raised inside Flask's request
handling, which logs it and answers 500 as for any other route.

The key is checked before the body is read, so slow or keyless clients slow no one: a
request without a valid key costs no parsing; it is handed over, and the views answer its 401.

The same paths under ``/v1/tenants/<id or uid>/`` take a platform key and the tenant it names
(``auth.require_tenant``'s rule); any other key or tenant is handed over too (403, 404).
"""

from __future__ import annotations

import io
import re
from typing import Any, Callable, Iterable

from flask import Flask, request

from webhooks.errors import WebhooksError
from webhooks.api.costs import record_deliveries
from webhooks.catalog.registry import EventsRejected
from webhooks.ingest import accept as ingest, auth_keys
from webhooks.api.events import (
    EVENT_CREATE,
    EVENT_CREATE_MANY,
    IDEMPOTENCY_HEADER,
    REPLAYED_HEADER,
    accepted_body,
    batch_body,
)
from webhooks.api.parsing import fast_load_body, fast_load_headers, loads_strict
from webhooks.ingest.accept import MAX_BATCH, NewEvent
from webhooks.observability.web_spans import ROUTE

#: Paths the shortcut may answer.
SINGLE, BATCH = "/v1/events", "/v1/events/batch"

#: The same, for a platform key acting for a tenant: ``/v1/tenants/<ref>/events[/batch]``.
FOR_TENANT = re.compile(r"/v1/tenants/([^/]+)/events(?:/batch)?")

#: environ key carrying an unexpected error from the shortcut to Flask, which re-raises it.
FAILED = "webhooks.fast_ingest.error"

#: Errors raised before anything was written: the view, run next, meets them again.
NOTHING_WRITTEN = (ingest.RateLimited, ingest.IdempotencyConflict, ingest.BatchOverRateLimit,
                   ingest.ReservedEventType, ingest.UnknownTenant, EventsRejected)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Declined(WebhooksError):
    """Not a request the shortcut answers: the Flask app does."""


class FastIngest:
    """WSGI middleware in front of ``app.wsgi_app`` (``app.wsgi_app = FastIngest(app, app.wsgi_app)``)."""

    def __init__(self, app: Flask, wsgi_app: WSGIApp) -> None:
        self.app, self.wsgi_app = app, wsgi_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or ""
        for_tenant = FOR_TENANT.fullmatch(path)
        if environ.get("REQUEST_METHOD") != "POST" or path not in (SINGLE, BATCH) and for_tenant is None:
            return self.wsgi_app(environ, start_response)
        body = None
        environ[ROUTE] = path  # for the request's span (``webhooks.observability.web_spans``)
        try:
            ref = for_tenant.group(1) if for_tenant else None
            tenant = _tenant(environ, ref)
            body = _body(environ, self.app.config.get("MAX_CONTENT_LENGTH"))
            with self.app.app_context():
                location = f"/v1/tenants/{ref}/events" if ref else SINGLE
                response = self._accept(environ, tenant, body, path.endswith("/batch"), location)
                return response(environ, start_response)
        except Declined:
            pass
        except NOTHING_WRITTEN:
            pass
        except Exception as error:  # noqa: BLE001 - Flask logs it and answers 500
            environ[FAILED] = error
        if body is not None:
            environ["wsgi.input"] = io.BytesIO(body)
        return self.wsgi_app(environ, start_response)

    def _accept(self, environ: dict[str, Any], tenant: Any, body: bytes, batch: bool, location: str) -> Any:
        try:
            document = loads_strict(body)
        except ValueError:
            raise Declined() from None
        data = fast_load_body(EVENT_CREATE_MANY if batch else EVENT_CREATE, document)
        if data is None:
            raise Declined()
        if batch:
            if not 1 <= len(data) <= MAX_BATCH or "HTTP_IDEMPOTENCY_KEY" in environ:
                raise Declined()
            items = [NewEvent(item["event_type"], item["payload"], item.get("idempotency_key")) for item in data]
            accepted = ingest.accept_events(tenant, items)
            record_deliveries(environ, accepted)
            response = self.app.json.response(batch_body(accepted))
        else:
            key = _header_key(environ, data.get("idempotency_key"))
            (one,) = ingest.accept_events(tenant, [NewEvent(data["event_type"], data["payload"], key)])
            record_deliveries(environ, [one])
            response = self.app.json.response(accepted_body(one.event, one.deliveries))
            response.headers["Location"] = f"{location}/{one.event.id}"
            if one.replayed:
                response.headers[REPLAYED_HEADER] = "true"
        response.status_code = 202
        return response


def _body(environ: dict[str, Any], limit: int | None) -> bytes:
    """The request body, when it is JSON with a length within the limit."""
    if environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower() != "application/json":
        raise Declined()
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise Declined() from None
    if length < 0 or limit is not None and length > limit:
        raise Declined()
    body = environ["wsgi.input"].read(length)
    if len(body) != length:
        raise Declined()
    return body


def _tenant(environ: dict[str, Any], ref: str | None) -> Any:
    """The tenant a tenant key (``ref`` None) or a platform key (the tenant ``ref`` names) acts for."""
    scheme, _, key = environ.get("HTTP_AUTHORIZATION", "").strip().partition(" ")
    holder = auth_keys.authenticate_key(key.strip()) if scheme.lower() == "bearer" and key.strip() else None
    if holder is None or holder.is_platform != (ref is not None):
        raise Declined()
    tenant = holder.tenant if ref is None else auth_keys.tenant_by_ref(ref)
    if tenant is None:
        raise Declined()
    return tenant


def _header_key(environ: dict[str, Any], field: str | None) -> str | None:
    raw = environ.get("HTTP_IDEMPOTENCY_KEY")
    if raw is None:
        return field
    headers = fast_load_headers(IDEMPOTENCY_HEADER, {"Idempotency-Key": raw})
    if headers is None or field is not None and field != headers["idempotency_key"]:
        raise Declined()
    return headers["idempotency_key"]


def reraise_shortcut_error() -> None:
    """``before_request``: an unexpected error of the shortcut is raised here, inside Flask's handling."""
    error = request.environ.pop(FAILED, None)
    if error is not None:
        raise error


def install(app: Flask) -> None:
    """Put the shortcut in front of ``app`` (``FAST_INGEST=False`` in the app config leaves it out)."""
    if app.config.get("FAST_INGEST", True):
        app.wsgi_app = FastIngest(app, app.wsgi_app)  # type: ignore[method-assign]
        app.before_request_funcs.setdefault(None, []).insert(0, reraise_shortcut_error)
