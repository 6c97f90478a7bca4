"""Fixtures of the Svix API tests (the platform key is the root conftest's): the official Python SDK (``svix``) pointed at the
app in-process (its httpx client on a WSGI transport), as a platform would point it at this service."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import svix.api.svix as sdk
from flask import Flask
from svix.api import Svix, SvixOptions


#: Where the SDK believes the service is; the WSGI transport takes every request to the app.
SERVER_URL = "http://webhooks.test"


@pytest.fixture
def svix_client(app: Flask, platform_key: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> Svix:
    """The official SDK with the one setting a platform changes (``server_url``) and a platform key as token."""
    monkeypatch.setattr(sdk, "_make_httpx_client",
                        lambda _client: httpx.Client(transport=httpx.WSGITransport(app=app)))
    return Svix(platform_key.api_key, SvixOptions(server_url=SERVER_URL, retry_schedule=[]))


def svix_error(error: Any) -> tuple[int, Any]:
    """An SDK error's status and body."""
    return error.status_code, error.to_dict() if hasattr(error, "to_dict") else error.__dict__
