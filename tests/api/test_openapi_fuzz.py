"""Schemathesis against ``/openapi.json`` with every check and every phase, the stateful one included:
no 5xx, every answer documented, and every request the document allows accepted (and every one it
forbids refused), so the document states what the server enforces.

Deterministic for ``.ci/run``: a fixed seed, derandomized generation and a bounded number of examples.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import schemathesis
from flask import Flask
from schemathesis.config import HealthCheck, SchemathesisConfig
from schemathesis.engine import Status, events, from_schema
from werkzeug.serving import make_server

from webhooks.api.platform_routes import PLATFORM_SCHEME, TENANT_SCHEME
from webhooks.ingest.auth_keys import PLATFORM, create_api_key
from webhooks.storage.db import database, write
from webhooks.tenants import create_tenant

#: Examples per operation and phase.
MAX_EXAMPLES = 15
#: The run's seed: the same requests every time.
SEED = 13


def loopback_only(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """``getaddrinfo`` answering 127.0.0.1 for every name: the URLs the fuzzer registers never leave
    the machine, and the run never waits on DNS (nothing is delivered: no worker runs)."""
    return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", int(port or 0)))]


@pytest.fixture
def served(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app on a real socket (schemathesis' WSGI transport cannot run every phase): its base URL.

    With an ``SMTP_URL`` (nothing is sent: no worker runs), so a ``mailto:`` URL the document allows
    is taken, not a 422 for a service that sends no email."""
    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    app: Flask = make_app(smtp_url="smtp://127.0.0.1:25?from=webhooks%40example.com")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    thread.join()


def failures(base_url: str, keys: dict[str, str], operations: list[dict[str, Any]] | None = None) -> tuple[int, list[str]]:
    """Run every phase with every check; the number of requests made and a line per distinct failure.

    ``keys``: the bearer key of each security scheme of the document (the tenant key and the platform
    key); each operation is sent the one its scheme names. ``operations``: schemathesis' per-operation
    settings (``[[operations]]`` of its configuration file)."""
    config = SchemathesisConfig.from_dict({
        "auth": {"openapi": {scheme: {"bearer": key} for scheme, key in keys.items()}},
        "operations": operations or [],
    })
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config)
    # A fixed tenant_ref leaves only the other path parameter to vary; Hypothesis then filters more
    # than its health checks allow, and on a loaded machine takes longer than they allow (limits of
    # the generator and of the machine, not findings about the server).
    schema.config.update(suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    schema.config.checks.update(included_check_names=["all"])
    schema.config.phases.update(phases=["examples", "coverage", "fuzzing", "stateful"])
    schema.config.generation.update(deterministic=True, max_examples=MAX_EXAMPLES, database="none")
    schema.config.seed = SEED
    schema.config.cache.enabled = False  # no .schemathesis/ cache: each run the same, from scratch
    # schemathesis honours an operation's disabled checks in the example, coverage and fuzzing phases
    # but not in the stateful one: the settings say which checks do not apply, in every phase.
    disabled = [(re.compile(entry["include-path-regex"]), name) for entry in operations or []
                if "include-path-regex" in entry
                for name, check in entry.get("checks", {}).items() if check.get("enabled") is False]
    requests, found = 0, {}
    for event in from_schema(schema).execute():
        if isinstance(event, (events.NonFatalError, events.FatalError)):
            found[repr(event.info)] = f"{event.label}: error {event.info.message}"
        if not isinstance(event, events.ScenarioFinished):
            continue
        requests += len(event.recorder.interactions)
        for case_id, checks in event.recorder.checks.items():
            for check in checks:
                if check.status == Status.FAILURE and check.failure_info is not None:
                    case = event.recorder.cases[case_id].value
                    if any(pattern.search(case.operation.path) and name == check.name for pattern, name in disabled):
                        continue
                    response = event.recorder.find_response(case_id=case_id)
                    key = f"{event.phase.value} {case.operation.label} {check.name}"
                    found.setdefault(key, f"{key}: {check.failure_info.failure.title}; sent {case.body!r} "
                                          f"{case.query!r}; got {response and response.status_code} "
                                          f"{response and response.text[:200]}")
    return requests, sorted(found.values())


# One pass only (CI's 25 minutes): PostgreSQL's, the production database, where a value the
# document allows and the database refuses (a NUL in a string, for psycopg2) shows as a 500.
@pytest.mark.postgresql
def test_every_phase_and_check_of_schemathesis_passes(served: str, tenant: SimpleNamespace) -> None:
    # A real tenant key, a real platform key and real RabbitMQ (POST /v1/events publishes to the test
    # prefix). The routes under /v1/tenants/{tenant_ref}/ act for a tenant of their own, by its uid.
    # DELETE /v1/tenants/{tenant_ref} deletes one made to be deleted.
    with database.connection_context(), write():
        _, platform_key = create_api_key(PLATFORM, "fuzz")
        create_tenant("fuzzed", uid="fuzzed")
        create_tenant("doomed", uid="doomed")
        create_tenant("patched", uid="patched")
    # PATCH /v1/tenants/{tenant_ref} may change a tenant's uid, after which that uid names no tenant:
    # it acts on a tenant of its own, so the other routes keep finding theirs.
    acting = [
        {"include-name": "DELETE /v1/tenants/{tenant_ref}", "parameters": {"tenant_ref": "doomed"}},
        {"include-name": "PATCH /v1/tenants/{tenant_ref}", "parameters": {"tenant_ref": "patched"}},
        {"include-path-regex": "^/v1/tenants/[{]tenant_ref[}]",
         "exclude-name": ["DELETE /v1/tenants/{tenant_ref}", "PATCH /v1/tenants/{tenant_ref}"],
         "parameters": {"tenant_ref": "fuzzed"}},
        # send-example's 404 names the event type of the body ("not in the catalog"), not the endpoint
        # of the path; the check reads any 404 after the endpoint's POST as "created resource not found"
        # (the answer is asserted in tests/catalog/test_send_example.py).
        {"include-path-regex": "/send-example$", "checks": {"ensure_resource_availability": {"enabled": False}}},
    ]
    requests, found = failures(served, {TENANT_SCHEME: tenant.api_key, PLATFORM_SCHEME: platform_key}, acting)
    assert found == [], "\n".join(found)
    assert requests > 1000  # every phase ran, the stateful one included
