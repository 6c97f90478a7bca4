"""Fixtures of the storage tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import TEST_SECRETS_KEY
from webhooks import sealing


@pytest.fixture(autouse=True)
def session_key_again() -> Iterator[None]:
    """Some tests here configure other sealing keys: the session's is back after each."""
    yield
    sealing.configure(TEST_SECRETS_KEY)
