"""The HTTP layer: the flask-smorest Api, its blueprints, the bearer scheme, JSON for every error,
and the security headers on every response (``webhooks.pages.headers``).

Every error body has flask-smorest's shape ``{"code", "status", "message"?, "errors"?}``,
including routing errors (404, 405), oversized bodies (413) and unexpected failures (500).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from flask import Flask, request
from flask_smorest import Api
from werkzeug.exceptions import (
    HTTPException,
    InternalServerError,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
)

from webhooks import metrics, svix
from webhooks.actions import BrokerUnavailable
from webhooks.ingest.accept import RateLimited, UnknownTenant
from webhooks.api import body_limit, fast_ingest, register_blueprints
from webhooks.api.error_docs import ErrorResponsesPlugin, document_too_many_requests
from webhooks.observability import web_spans
from webhooks.api.platform_routes import TENANT_SCHEME, KeySchemesPlugin, document_schemes
from webhooks.pages.headers import SecurityHeaders

log = logging.getLogger(__name__)

#: Seconds a client should wait before retrying when the broker is down.
BROKER_RETRY_AFTER = 5

ErrorResponse = tuple[dict[str, Any], int, dict[str, str]]

#: The limit behind each 429, as ``webhooks_api_refused_total`` labels it.
REFUSED_BY: dict[type[Exception], str] = {RateLimited: "ingest_rate"}


def init_web(app: Flask) -> None:
    """Create the Api on ``app``, register the blueprints and make every error JSON."""
    api = Api(app, spec_kwargs={"security": [{TENANT_SCHEME: []}],
                                "extra_plugins": [ErrorResponsesPlugin(), KeySchemesPlugin()]})
    document_schemes(api)
    document_too_many_requests(api.spec)
    register_blueprints(api)
    app.register_blueprint(metrics.blueprint)
    svix.init_app(app)  # the Svix API at /api/v1: its own error shape (below)
    app.request_class = body_limit.Request
    app.before_request(body_limit.reject_oversized_body)
    fast_ingest.install(app)
    app.wsgi_app = SecurityHeaders(app.wsgi_app)  # type: ignore[method-assign]  # it only adds headers
    app.wsgi_app = web_spans.TracedRequests(app.wsgi_app)  # type: ignore[method-assign]  # outermost: the whole request
    app.before_request(web_spans.note_route)

    def http_error(error: HTTPException) -> ErrorResponse:
        if svix.owns(request.path):
            return svix.error_response(error)
        payload, code, headers = api.handle_http_exception(error)
        if "message" not in payload and "errors" not in payload and error.description:
            payload["message"] = error.description  # Werkzeug's generic text: says what, not why
        if isinstance(error, MethodNotAllowed) and error.valid_methods:
            headers = {**headers, "Allow": ", ".join(sorted(error.valid_methods))}  # RFC 9110 requires it
        return payload, code, headers

    def broker_unavailable(error: BrokerUnavailable) -> ErrorResponse:
        return http_error(_with_data(ServiceUnavailable(), str(error), {"Retry-After": str(BROKER_RETRY_AFTER)}))

    def too_many_requests(error: RateLimited) -> ErrorResponse:
        metrics.API_REFUSED.labels(REFUSED_BY[type(error)]).inc()
        retry_after = str(max(1, math.ceil(error.retry_after)))
        return http_error(_with_data(TooManyRequests(), str(error), {"Retry-After": retry_after}))

    def unexpected_error(error: Exception) -> ErrorResponse:
        log.error("unhandled error on %s %s", request.method, request.path, exc_info=error)
        # The body says nothing about the cause: tracebacks and SQL stay in the log.
        return http_error(_with_data(InternalServerError(), "internal error; it has been logged"))

    app.register_error_handler(HTTPException, http_error)
    def tenant_deleted(error: UnknownTenant) -> ErrorResponse:  # deleted while its key was cached
        return http_error(_with_data(NotFound(), "tenant not found (deleted)"))

    app.register_error_handler(BrokerUnavailable, broker_unavailable)
    app.register_error_handler(UnknownTenant, tenant_deleted)
    for refusal in REFUSED_BY:
        app.register_error_handler(refusal, too_many_requests)
    app.register_error_handler(Exception, unexpected_error)


def _with_data(error: HTTPException, message: str, headers: dict[str, str] | None = None) -> HTTPException:
    """``error`` carrying the message and headers flask-smorest's handler puts in the response."""
    error.data = {"message": message, **({"headers": headers} if headers else {})}  # type: ignore[attr-defined]
    return error
