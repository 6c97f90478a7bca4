"""Fixtures of the platform tests: a platform key (``flask platform create-key``'s) and its header."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from webhooks.ingest.auth_keys import PLATFORM, create_api_key
from webhooks.storage.db import database, write


@pytest.fixture
def platform_key(database_url: str) -> SimpleNamespace:
    """A live platform key: ``.id`` and ``.api_key``."""
    with database.connection_context(), write():
        row, api_key = create_api_key(PLATFORM, "backend")
    return SimpleNamespace(id=row.id, api_key=api_key)


@pytest.fixture
def platform(platform_key: SimpleNamespace) -> dict[str, str]:
    """The Authorization header of the platform key."""
    return {"Authorization": f"Bearer {platform_key.api_key}"}
