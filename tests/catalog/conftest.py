"""Fixtures of the catalog's tests: the headers that write the catalog (the shared schema, example
and entry body are in ``tests/catalog_helpers.py``)."""

from __future__ import annotations

import pytest

from webhooks.ingest.auth_keys import PLATFORM, create_api_key
from webhooks.storage.db import database, write


@pytest.fixture
def writer(database_url: str) -> dict[str, str]:
    """The Authorization header that writes the catalog: a platform key's."""
    with database.connection_context(), write():
        _, api_key = create_api_key(PLATFORM, "catalog")
    return {"Authorization": f"Bearer {api_key}"}
