"""What every kind of destination is: the one interface the engine delivers through.

An endpoint's ``url`` names its destination; the scheme picks the kind (``http``/``https``:
an HTTP receiver; more kinds in this package). A kind is two things:

- a ``Kind``: how a URL of its schemes is checked where it is registered (its pattern for the
  API and the OpenAPI document, and ``split``, which names the host the SSRF guard checks; a
  kind that connects to no host the URL names, such as ``mailto:``, says so with ``reaches_host``);
- a ``Destination``: what the engine calls to deliver one signed ``Parcel`` to a URL of its
  schemes. It never raises for a problem of the destination (down, refused, timed out): it
  answers an ``HttpResult`` like the HTTP receiver's, which the ladder, the window and the
  attempt log already read: a kind without HTTP statuses answers ``status_code=None`` with
  ``error_class=None`` when the destination took the delivery (``body`` holds what it said,
  e.g. a stream entry's id), or an ``error_class`` and ``error`` when it did not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from yarl import URL

from webhooks.delivery.http_result import MAX_ERROR_CHARS, HttpResult, without_nul
from webhooks.delivery.outgoing import OutgoingRequest


@dataclass(frozen=True)
class Parcel:
    """One signed delivery, as every kind receives it: the Standard Webhooks request and the event it carries."""

    event_id: str
    event_type: str
    request: OutgoingRequest


@dataclass(frozen=True)
class Kind:
    """How URLs of one kind of destination are recognised and checked where they are registered."""

    #: What people call it ("HTTP", "Redis stream").
    name: str
    #: The URL schemes of this kind, lower-case.
    schemes: tuple[str, ...]
    #: The URLs of this kind the API accepts, as a regex that reads the same in Python and ECMA
    #: (anchored, ``$(?!\n)``), so the OpenAPI document states exactly what the server enforces.
    pattern: str
    #: ``(scheme, host, port)`` of a URL of this kind, or ValueError naming what is wrong with it.
    split: Callable[[str], tuple[str, str, int]]
    #: The service connects to the host the URL names (so the SSRF guard checks it). False for
    #: ``mailto:``: an address's domain is never connected to, the operator's SMTP server carries it.
    reaches_host: bool = True


class Destination(Protocol):
    """Delivers parcels to the URLs of one kind; built inside the running loop, shared by every delivery."""

    kind: Kind

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        """Deliver ``parcel`` to ``url`` within the destination's deadline; problems come back in the result."""
        ...

    async def close(self) -> None:
        """Close every connection kept; the destination cannot be used afterwards."""
        ...


#: Userinfo characters every kind's pattern allows (RFC 3986's unreserved and most sub-delims, or
#: percent-encoded): a password with ``@ : / ? # & +`` or other characters is percent-encoded.
USERINFO_CHARS = r"(?:[A-Za-z0-9._~!$'()*,;=-]|%[0-9A-Fa-f]{2})"
#: A stream, exchange or routing-key name as the patterns allow it (percent-encode nothing).
NAME_CHARS = r"[A-Za-z0-9._:-]"


def query_of(url: URL, parameters: tuple[str, ...], kind: str) -> dict[str, str]:
    """The query of a destination URL of ``kind``: only ``parameters``, each at most once; else ValueError."""
    unknown = sorted(set(url.query) - set(parameters))
    if unknown:
        known = " and ".join(f"{name}=" for name in parameters)
        raise ValueError(f"unknown parameter {unknown[0]!r} in {kind} URL: use {known}")
    for name in parameters:
        if len(url.query.getall(name, [])) > 1:
            raise ValueError(f"{name}= is given more than once")
    return dict(url.query)


def scheme_of(url: str) -> str:
    """The URL's scheme, lower-case ("" when it names none)."""
    scheme, colon, _ = url.partition(":")
    return scheme.lower() if colon and scheme.isascii() and scheme.isalnum() else ""


def one_line(message: str) -> str:
    """An error message as results keep it: one line, no NUL, at most ``MAX_ERROR_CHARS``."""
    return " ".join(without_nul(message).split())[:MAX_ERROR_CHARS]


def failure(error_class: str, error: str, duration_ms: float = 0.0) -> HttpResult:
    """The result of a delivery that reached no destination (or was refused by one without HTTP statuses)."""
    return HttpResult(status_code=None, headers={}, body=b"", duration_ms=duration_ms, error_class=error_class,
                      error=error)
