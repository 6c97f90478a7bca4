"""Credentials out of everything people read: the one masking function for logs and messages.

``mask(text, *known)`` replaces the password of every URL in ``text``
(``postgresql://postgres:hunter2@db/x`` reads ``postgresql://postgres:***@db/x``; any
scheme, lists of URLs too) and every ``known`` secret, as given or percent-encoded, with
``***``. ``webhooks.logs`` runs every log record through it; error messages that name a
setting (``DATABASE_URL``, ``AMQP_URL``, ``SMTP_URL``) and ``./dev`` use it too:
``python -m webhooks.secrecy URL`` prints the URL masked.

``has_password(url)`` says whether a URL carries a password (then it is stored sealed:
``fields.SealedUrlField``); ``unmasked(given, stored)`` reads a URL sent back as it was shown
(``amqp://user:***@host/…``) as the stored one, password and all, the way Svix and Hookdeck
take a masked credential echoed back.
"""

from __future__ import annotations

import re
import sys
from urllib.parse import quote, urlsplit

#: What replaces a password or secret wherever it would otherwise show.
MASK = "***"

#: ``scheme://user:password@``: the password runs from the first colon after the ``//`` to the
#: last ``@`` of the URL's authority (so it may hold ``@`` and ``:``, even unencoded), which ends
#: where a URL's path, query or fragment begins, at whitespace, a quote, or the comma of a list.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@'\"<>,]*:)(?P<password>[^\s/?#'\"<>,]*)@")


def mask(text: str, *known: str | None) -> str:
    """``text`` with URL passwords and the ``known`` secrets (raw or percent-encoded) replaced by ``***``."""
    for secret in known:
        if secret:
            for form in {secret, quote(secret, safe=""), quote(secret)}:
                text = text.replace(form, MASK)
    if "@" not in text or "://" not in text:
        return text
    return _URL_PASSWORD.sub(lambda match: f"{match['head']}{MASK}@" if match["password"] else match[0], text)


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password (what ``mask`` hides)."""
    return mask(url) != url


def _authority(url: str) -> tuple[str, str]:
    """``(scheme, userinfo@host:port)`` of a URL, as written."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc


def unmasked(given: str, stored: str | None) -> str:
    """``given`` with the stored password back where it shows as ``***``.

    A URL sent back as it was shown (its password ``***``) keeps ``stored``'s password, when
    its scheme, user, host and port are ``stored``'s: the rest (a path, a query) may change.
    Any other URL whose password reads ``***`` is a ValueError: a password shown masked is
    never sent to another host, and ``***`` is never taken for a password.
    """
    head = _URL_PASSWORD.match(given)
    if head is None or head["password"] != MASK:
        return given
    if stored is not None and has_password(stored):
        scheme, authority = _authority(given)
        stored_scheme, stored_authority = _authority(stored)
        if (scheme, authority) == (stored_scheme, _authority(mask(stored))[1]):
            start = given.index(authority)
            return given[:start] + stored_authority + given[start + len(authority):]
    raise ValueError(f"the password shows as {MASK}: give the real password (a URL sent back as shown "
                     "keeps its password only with the same scheme, user, host and port)")


if __name__ == "__main__":
    print(mask(" ".join(sys.argv[1:])))
