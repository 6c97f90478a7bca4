"""The API keys' clock and caches, for the key tests of every folder: ``later`` and ``fresh_caches``.

Registered as a plugin in ``tests/conftest.py``; a module whose tests need empty key caches asks for
them with ``pytestmark = pytest.mark.usefixtures("fresh_caches")``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterator

import pytest

from webhooks.ingest import auth_keys
from webhooks.ingest.auth_keys import KeyCache, LastUsed
from webhooks.storage.timeutil import utcnow


class Clock:
    """``auth_keys.utcnow`` moved by hand (the database still keeps real times)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utcnow() + self.offset


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """The key checks' clock, moved forward by setting ``later.offset``."""
    clock = Clock()
    monkeypatch.setattr(auth_keys, "utcnow", clock)
    yield clock


@pytest.fixture
def fresh_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty key cache and no record of last-used writes."""
    monkeypatch.setattr(auth_keys, "key_cache", KeyCache(ttl=5.0))
    monkeypatch.setattr(auth_keys, "last_used", LastUsed())
