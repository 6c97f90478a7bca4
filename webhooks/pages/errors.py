"""Errors in words a person understands: the error page's title for each status, field errors
for a form's error summary, and refusing what no page can use (NUL characters, unsafe redirects)
with a 4xx instead of a crash deeper down (PostgreSQL refuses NUL in text; a CR or LF in a
``Location`` header is an error in Werkzeug)."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from flask import abort, request

#: The error page's heading per status; others use Werkzeug's name for the status.
TITLES = {
    400: "The request could not be used",
    401: "You need to sign in",
    403: "You are not allowed to do this",
    404: "Page not found",
    405: "This page cannot be used that way",
    413: "What you sent is too large",
    429: "Too many attempts",
    500: "Something went wrong",
    503: "The service is unavailable for a moment",
}

#: Characters no field, id or redirect of a page may hold: NUL and the other C0 controls but tab.
CONTROL_CHARACTERS = frozenset(chr(code) for code in range(32)) - {"\t"}


def title_of(code: int | None, name: str) -> str:
    return TITLES.get(code or 500, name)


class FieldErrors(dict[str, str]):
    """A form's problems, field name -> what to do about it, in the order the form shows the fields.

    The kit's ``error_summary`` macro lists them at the top of the page, each linking to its field
    (``#field-<name>``); the ``field`` macro shows each beside its input."""

    def ordered(self, fields: Iterable[str]) -> list[tuple[str, str]]:
        order = list(fields)
        return sorted(self.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))


def refuse_nul() -> None:
    """404 for a path holding NUL (no page has such an id), 400 naming the field for a query or form value."""
    if "\x00" in request.path:
        abort(404, "There is no page at this address: it holds a NUL character.")
    for source, where in ((request.args, "query"), (request.form, "form")):
        for name, value in source.items(multi=True):
            if "\x00" in name or "\x00" in value:
                label = name.replace("\x00", "").replace("_", " ") or "a field"
                abort(400, f"The {where} field “{label}” holds a NUL character (\\0), which no field here accepts. "
                           "Remove it and try again.")


def safe_path(target: str | None, prefix: str, default: str) -> str:
    """``target`` if it is a path of this site under ``prefix`` (never another site: no open
    redirect, and no control character that would break the ``Location`` header); else ``default``."""
    if not target or not target.startswith(prefix) or "\\" in target:
        return default
    if any(character in CONTROL_CHARACTERS for character in target):
        return default
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else default

