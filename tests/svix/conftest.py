"""Fixtures of the Svix API tests (the platform key is the root conftest's): the official Python SDK (``svix``) pointed at the
app in-process (its httpx client on a WSGI transport), as a platform would point it at this service; the official
JavaScript SDK installed (``svix_js``) for node to run ``kitchen_sink/kitchen_sink.test.mjs`` with."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import svix.api.svix as sdk
from flask import Flask
from svix.api import Svix, SvixOptions


#: Where the SDK believes the service is; the WSGI transport takes every request to the app.
SERVER_URL = "http://webhooks.test"

#: The JavaScript SDK's package files (its pinned lockfile) and the test node runs, in the repository.
KITCHEN_SINK = Path(__file__).parent / "kitchen_sink"

#: Where installs of the JavaScript SDK are kept between runs, outside the repository: one per lockfile.
JS_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "webhooks-tests"

#: The longest an install from the npm registry may take (seconds).
NPM_TIMEOUT = 300


@pytest.fixture
def svix_client(app: Flask, platform_key: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> Svix:
    """The official SDK with the one setting a platform changes (``server_url``) and a platform key as token."""
    monkeypatch.setattr(sdk, "_make_httpx_client",
                        lambda _client: httpx.Client(transport=httpx.WSGITransport(app=app)))
    return Svix(platform_key.api_key, SvixOptions(server_url=SERVER_URL, retry_schedule=[]))


def svix_error(error: Any) -> tuple[int, Any]:
    """An SDK error's status and body."""
    return error.status_code, error.to_dict() if hasattr(error, "to_dict") else error.__dict__


def _install(target: Path) -> None:
    """``npm ci`` of the kitchen sink's lockfile into a fresh directory, renamed to ``target`` once whole."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.fail("node and npm are needed to run the JavaScript SDK (the machine's nodejs package)")
    work = Path(tempfile.mkdtemp(prefix="svix-js-", dir=JS_CACHE))
    for name in ("package.json", "package-lock.json"):
        shutil.copy(KITCHEN_SINK / name, work / name)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], cwd=work,
                          capture_output=True, text=True, timeout=NPM_TIMEOUT)
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        pytest.fail(f"npm ci of the Svix JavaScript SDK failed:\n{done.stdout}{done.stderr}")
    shutil.rmtree(target, ignore_errors=True)  # an install left incomplete by hand
    work.rename(target)


@pytest.fixture(scope="session")
def svix_js() -> Iterator[Path]:
    """A directory with the JavaScript SDK in ``node_modules``, installed once per lockfile (later runs are offline)."""
    lockfile = (KITCHEN_SINK / "package.json").read_bytes() + (KITCHEN_SINK / "package-lock.json").read_bytes()
    target = JS_CACHE / f"svix-js-{hashlib.sha256(lockfile).hexdigest()[:16]}"
    JS_CACHE.mkdir(parents=True, exist_ok=True)
    with open(JS_CACHE / "svix-js.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time, whoever else runs the tests
        if not (target / "node_modules" / "svix" / "package.json").exists():
            _install(target)
    yield target
