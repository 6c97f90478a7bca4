"""The answers the web server gives itself, before or instead of the app: JSON like every API error,
with the security headers every answer of the app carries.

The app answers errors as ``{"code", "status", "message"}`` (``webhooks.web``); the server
answers a request it refuses (too large, too slow, too many waiting) or one gunicorn's
parser rejects (a malformed line, a header over gunicorn's limits) in the same shape, never
gunicorn's HTML page. These answers close the connection: either the request was not
read to its end, or the client is asked to come back later.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, Iterable

from gunicorn.http import errors as http_errors

from webhooks.pages.headers import COMMON, CSP, NOTHING_POLICY

#: gunicorn's parser errors answered with another status than 400.
PARSER_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (http_errors.LimitRequestHeaders, 431),
    (http_errors.LimitRequestLine, 414),
    (http_errors.UnsupportedTransferCoding, 501),
    (http_errors.ExpectationFailed, 417),
    (http_errors.ForbiddenProxyRequest, 403),
)

#: The security headers the app's own JSON answers get (``webhooks.pages.headers.SecurityHeaders``).
SECURITY_HEADERS = {CSP: NOTHING_POLICY, "X-Frame-Options": "DENY", **COMMON}

#: Parser errors that are the app's fault (a header it tried to send), not the client's.
APP_ERRORS = (http_errors.InvalidResponseHeader, http_errors.InvalidResponseHeaderName, http_errors.ConfigurationProblem)


def error_answer(status: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> bytes:
    """A whole HTTP/1.1 response: ``status`` with the API's JSON error body, closing the connection."""
    phrase = HTTPStatus(status).phrase
    body = json.dumps({"code": status, "status": phrase, "message": message}).encode()
    lines = [f"HTTP/1.1 {status} {phrase}", "Content-Type: application/json", f"Content-Length: {len(body)}",
             "Connection: close", *(f"{name}: {value}" for name, value in [*headers, *SECURITY_HEADERS.items()])]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def client_error(error: Exception, cfg: Any) -> tuple[int, str] | None:
    """The status and message for a request gunicorn's parser rejects, or None when ``error`` is
    not the client's doing. ``cfg`` is gunicorn's configuration (its limits are named)."""
    if not isinstance(error, http_errors.ParseException) or isinstance(error, APP_ERRORS):
        return None
    status = next((code for kind, code in PARSER_STATUS if isinstance(error, kind)), 400)
    if status == 431:
        return status, (f"request header fields too large: at most {cfg.limit_request_fields} fields of at most "
                        f"{cfg.limit_request_field_size} bytes each")
    if status == 414:
        return status, f"request line too long: at most {cfg.limit_request_line} bytes"
    return status, f"malformed request: {error}"
