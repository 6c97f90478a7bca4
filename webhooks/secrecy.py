"""Credentials out of everything people read: the one masking function for logs and messages.

``mask(text, *known)`` replaces the password of every URL in ``text``
(``postgresql://postgres:hunter2@db/x`` reads ``postgresql://postgres:***@db/x``; any
scheme, lists of URLs too) and every ``known`` secret, as given or percent-encoded, with
``***``. ``webhooks.logs`` runs every log record through it; error messages that name a
setting (``DATABASE_URL``, ``AMQP_URL``, ``SMTP_URL``) and ``./dev`` use it too:
``python -m webhooks.secrecy URL`` prints the URL masked.
"""

from __future__ import annotations

import re
import sys
from urllib.parse import quote

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


if __name__ == "__main__":
    print(mask(" ".join(sys.argv[1:])))
