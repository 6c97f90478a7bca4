"""How much stored text a page of attempts may hold, and which rows fit: API pages and the console
read the rows' sizes first (a narrow query), then only the rows that fit."""

from __future__ import annotations

from typing import Any

from peewee import fn

from webhooks.storage.models import Attempt

#: Characters of stored text a page of attempts holds at most (a page of ``limit`` rows is cut
#: short before it passes this). Attempts stored before ``MAX_KEPT_HEADERS`` could hold 961 KB
#: of headers each: a page of 250 was 144 MB and grew the web process by 150 MB.
MAX_ATTEMPT_PAGE_CHARS = 4 * 1024 * 1024

#: The characters an attempt row holds, as the database measures them.
ATTEMPT_CHARS = (
    fn.LENGTH(Attempt.url) + fn.LENGTH(Attempt.request_headers)
    + fn.COALESCE(fn.LENGTH(Attempt.response_headers), 0) + fn.COALESCE(fn.LENGTH(Attempt.response_body), 0)
    + fn.COALESCE(fn.LENGTH(Attempt.error), 0)
)


def keys_within(sized: list[tuple[Any, int | None]], limit: int, budget: int) -> list[Any]:
    """The keys of the first rows of ``sized`` (key, size), at most ``limit``, whose sizes add up
    to no more than ``budget``; the first row always."""
    keys: list[Any] = []
    used = 0
    for key, size in sized[:limit]:
        used += size or 0
        if keys and used > budget:
            break
        keys.append(key)
    return keys
