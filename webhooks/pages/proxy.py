"""The client's side of a request, as a trusted reverse proxy saw it: its address and whether it
came over HTTPS.

``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed only from the peers listed in
``FORWARDED_ALLOW_IPS`` (the variable gunicorn reads for the same purpose; default the loopback
addresses, where a proxy on the same host connects from). From anyone else they are ignored, so a
client cannot pick the address it is throttled by or make the service think a request was secure.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from flask import Request, current_app


@lru_cache(maxsize=8)
def _trusted(text: str) -> tuple[bool, frozenset[str]]:
    """(trust everyone, the trusted addresses) from a ``FORWARDED_ALLOW_IPS`` value."""
    items = {item.strip() for item in text.split(",") if item.strip()}
    return "*" in items, frozenset(items - {"*"})


def trusts(peer: str | None) -> bool:
    """Whether the connection's peer is a proxy whose forwarded headers we believe."""
    everyone, addresses = _trusted(current_app.extensions["webhooks.settings"].forwarded_allow_ips)
    return everyone or (peer is not None and peer in addresses)


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip().strip("[]")))
    except ValueError:
        return None


def client_address(request: Request) -> str:
    """The client's IP address: the peer, or the address a trusted proxy appended last to
    ``X-Forwarded-For`` (the leftmost entries are whatever the client sent, so never those)."""
    peer = request.environ.get("REMOTE_ADDR") or "unknown"
    forwarded = request.headers.get("X-Forwarded-For", "")
    if forwarded and trusts(peer):
        last = _address(forwarded.split(",")[-1])
        if last is not None:
            return last
    return peer


def served_over_https(request: Request) -> bool:
    """Whether the browser reached us over HTTPS: directly, or through a trusted proxy that says so.

    (gunicorn already turns a trusted ``X-Forwarded-Proto: https`` into ``wsgi.url_scheme``;
    reading the header here as well covers other servers in front of the app.)"""
    if request.scheme == "https":
        return True
    proto = request.headers.get("X-Forwarded-Proto", "").split(",")[-1].strip().lower()
    return proto == "https" and trusts(request.environ.get("REMOTE_ADDR"))
