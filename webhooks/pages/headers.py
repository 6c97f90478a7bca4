"""Security headers: a Content-Security-Policy with no inline script or style, who may frame a
page, no MIME sniffing, and no full URLs (with ids in them) leaked to other sites as referrers.

Pages get their site's policy (``page_headers``); the API, ``/metrics``, the static files and
everything else get ``SecurityHeaders``' defaults from a WSGI wrapper around the whole app, so a
response made outside Flask (the fast ingest path) carries them too; the web server's own answers
(``webhooks.server.answers``: 408, 413, 429, 431) carry the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from webhooks.pages.site import Site

CSP = "Content-Security-Policy"

#: On every response.
COMMON = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}

#: Anything that is not a page (JSON, metrics, files): may load nothing, run nothing, be framed nowhere.
NOTHING_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

#: The API documentation page (Swagger UI from ``/docs/assets``, its set-up from ``/docs/init.js``).
DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def page_policy(site: Site) -> str:
    """The Content-Security-Policy of a site's pages: scripts, styles and fonts from the service
    only (no inline ones), images also from the logo's host, forms posting back to the service."""
    images = " ".join(filter(None, ("'self'", "data:", site.branding.logo_origin)))
    ancestors = " ".join(site.frame_ancestors) or "'none'"
    return (
        f"default-src 'none'; script-src 'self'; style-src 'self'; img-src {images}; font-src 'self'; "
        f"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors {ancestors}"
    )


def page_headers(site: Site) -> dict[str, str]:
    """Every security header of a site's page. ``X-Frame-Options`` only when nobody may frame it
    (it cannot name origins; browsers that know ``frame-ancestors`` follow that instead)."""
    headers = {CSP: page_policy(site), **COMMON}
    if not site.frame_ancestors:
        headers["X-Frame-Options"] = "DENY"
    return headers


def docs_headers() -> dict[str, str]:
    return {CSP: DOCS_POLICY, "X-Frame-Options": "DENY", **COMMON}


StartResponse = Callable[..., Any]


class SecurityHeaders:
    """WSGI wrapper: a response without a policy of its own gets ``NOTHING_POLICY`` and
    ``X-Frame-Options: DENY``; every response gets ``COMMON``. Headers already set are kept."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            present = {name.lower() for name, _ in headers}
            if "content-security-policy" not in present:
                headers.append((CSP, NOTHING_POLICY))
                if "x-frame-options" not in present:
                    headers.append(("X-Frame-Options", "DENY"))
            headers.extend((name, value) for name, value in COMMON.items() if name.lower() not in present)
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        return self.app(environ, start)
