"""The Svix SDKs' kitchen-sink steps against this service on a real socket, with the two settings a platform
changes (``SVIX_TOKEN``: a platform key, ``SVIX_SERVER_URL``: this service): the official Python SDK in this
process, the official JavaScript SDK with node (``kitchen_sink/kitchen_sink.test.mjs``, node's own test runner)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from svix.api import ApplicationIn, ApplicationListOptions, EndpointIn, EndpointPatch, EventTypeIn, Svix, SvixOptions
from svix.api.errors.http_error import HttpError

from tests.live_api import LiveApi

#: The longest the JavaScript run may take (seconds): a handful of requests.
NODE_TIMEOUT = 60

#: How many tests ``kitchen_sink.test.mjs`` holds: all must pass, none be skipped.
JS_TESTS = 5


@pytest.fixture
def svix_env(serve_api: Callable[[], LiveApi], platform_key: SimpleNamespace,
             monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app on a real port, named by ``SVIX_SERVER_URL``, with a platform key as ``SVIX_TOKEN``."""
    monkeypatch.setenv("SVIX_SERVER_URL", serve_api().url)
    monkeypatch.setenv("SVIX_TOKEN", platform_key.api_key)
    return {name: os.environ[name] for name in ("SVIX_SERVER_URL", "SVIX_TOKEN")}


def created_or_taken(create: Callable[[], object]) -> None:
    """A creation whose only allowed error is a 409 (it exists already), as the kitchen sink allows."""
    try:
        create()
    except HttpError as error:
        assert error.status_code == 409, "conflicts are expected but other statuses are not"


def test_the_python_sdk_creates_patches_and_deletes_an_endpoint_with_channels(svix_env: dict[str, str]) -> None:
    svix = Svix(os.environ["SVIX_TOKEN"], SvixOptions(server_url=os.environ["SVIX_SERVER_URL"]))
    app = svix.application.create(ApplicationIn(name="app"))
    created_or_taken(lambda: svix.event_type.create(EventTypeIn(name="event.started", description="Something started")))
    created_or_taken(lambda: svix.event_type.create(EventTypeIn(name="event.ended", description="Something ended")))

    endpoint = svix.endpoint.create(app.id, EndpointIn(url="https://example.svix.com/", channels=["ch0", "ch1"]))
    assert set(endpoint.channels) == {"ch0", "ch1"}
    patched = svix.endpoint.patch(app.id, endpoint.id, EndpointPatch(event_types=["event.started", "event.ended"]))
    assert set(patched.channels) == {"ch0", "ch1"}
    assert set(patched.event_types) == {"event.started", "event.ended"}

    svix.endpoint.delete(app.id, endpoint.id)  # an empty 204 body
    listed = svix.application.list(ApplicationListOptions(limit=250))
    assert [row.id for row in listed.data] == [app.id] and listed.done
    assert svix.endpoint.list(app.id).data == []


def test_the_javascript_sdk_passes_its_kitchen_sink_steps_with_node(svix_env: dict[str, str], svix_js: Path) -> None:
    script = svix_js / f"run-{uuid.uuid4().hex}.test.mjs"  # beside node_modules, so `import "svix"` finds the SDK
    shutil.copy(Path(__file__).parent / "kitchen_sink" / "kitchen_sink.test.mjs", script)
    try:
        done = subprocess.run(["node", "--test", "--test-reporter=tap", str(script)], cwd=svix_js,
                              env={**os.environ, **svix_env, "NO_COLOR": "1"}, capture_output=True, text=True,
                              timeout=NODE_TIMEOUT)
    finally:
        script.unlink()
    counts = {name: int(number) for name, number in re.findall(r"^# (pass|fail|skipped|todo) (\d+)$", done.stdout, re.M)}
    assert done.returncode == 0 and counts == {"pass": JS_TESTS, "fail": 0, "skipped": 0, "todo": 0}, (
        done.stdout + done.stderr)
