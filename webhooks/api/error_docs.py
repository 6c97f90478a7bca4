"""OpenAPI: the errors of every /v1 operation that no view decorator declares (401, 403, 429, 404, 400, 413, 415).

They come from ``before_request`` hooks, the strict JSON parser (which also refuses bodies that are not JSON) and ``get_owned``, so one apispec plugin adds them.
The 429 response says both limits that answer it and documents its ``Retry-After``.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec, BasePlugin

#: (status, flask-smorest's lazily registered response component, which has the shared ``Error`` schema).
UNAUTHORIZED = (401, "UNAUTHORIZED")
FORBIDDEN = (403, "FORBIDDEN")
NOT_FOUND = (404, "NOT_FOUND")
BAD_REQUEST = (400, "BAD_REQUEST")
TOO_LARGE = (413, "REQUEST_ENTITY_TOO_LARGE")
NOT_JSON = (415, "UNSUPPORTED_MEDIA_TYPE")
TOO_MANY = (429, "TOO_MANY_REQUESTS")

#: The 429 response: which limits answer it, and its ``Retry-After``.
TOO_MANY_REQUESTS = {
    "description": (
        "Too many requests; nothing was done. Either the client already has as many requests waiting for their "
        "turn as one server process keeps for a client (`TENANT_MAX_WAITING_REQUESTS`, any operation; "
        "`Retry-After: 1`; requests beyond those running wait their turn, they are not refused), or, when "
        "sending events, the tenant is over its ingest rate limit (`INGEST_RATE_LIMIT` per second, counted in "
        "events and in the deliveries they make). Retry after `Retry-After` seconds."
    ),
    "headers": {"Retry-After": {"description": "Seconds to wait before retrying.", "required": True,
                                "schema": {"type": "integer", "minimum": 1}}},
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}

#: Only the tenant API is behind ``require_tenant``; /healthz and the console are not.
TENANT_API_PREFIX = "/v1/"


def error_responses(path: str, operation: dict[str, Any]) -> list[tuple[int, str]]:
    """The errors an operation on ``path`` (OpenAPI form, ``{id}``) may answer besides its declared ones."""
    if not path.startswith(TENANT_API_PREFIX):
        return []
    errors = [UNAUTHORIZED, FORBIDDEN, TOO_MANY]  # 403: the other kind of key (tenant or platform)
    if "{" in path:
        errors.append(NOT_FOUND)
    if "requestBody" in operation:
        errors += [BAD_REQUEST, TOO_LARGE, NOT_JSON]
    return errors


class ErrorResponsesPlugin(BasePlugin):
    """Adds ``error_responses`` to each operation (declared ones win)."""

    def operation_helper(self, path: str | None = None, operations: dict[str, Any] | None = None, **kwargs: Any) -> None:
        for method, operation in (operations or {}).items():
            if method == "parameters" or not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            for code, component in error_responses(path or "", operation):
                responses.setdefault(str(code), component)


def document_too_many_requests(spec: APISpec) -> None:
    """Replace flask-smorest's bare 429 component (registered lazily, like ours) with ``TOO_MANY_REQUESTS``."""
    spec.components.response(TOO_MANY[1], TOO_MANY_REQUESTS, lazy=True)
