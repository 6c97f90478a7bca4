"""Endpoint secrets, signing keys and API keys never reach a log line, an error body or a stored row.

(``webhook-signature`` may appear: a signature is no secret.)
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.api_helpers import create_endpoint, make_attempt, post_event
from tests.conftest import wait_until
from tests.console_helpers import log_in
from tests.receivers import Receiver, always, raw_server, sleep_then, unused_port
from webhooks.console.models import CONSOLE_MODELS
from webhooks.pages.models import PAGE_MODELS
from webhooks.portal.models import PORTAL_MODELS
from webhooks.delivery.endpoint_view import EndpointView
from webhooks.ingest.auth_keys import PLATFORM, create_api_key
from webhooks.storage.db import database, write
from webhooks.storage.models import ALL_MODELS, ApiKey, Attempt, Delivery, Endpoint
from webhooks.delivery.signing import generate_secret, generate_signing_key, private_key

#: Delivery statuses after which nothing more happens without a person.
SETTLED = ("delivered", "failed", "parked")

#: Loggers silenced by ``webhooks.logs.configure`` that the test opens up anyway. (peewee stays at
#: WARNING: at DEBUG it prints every SQL statement with its parameters, secrets included, by design.)
CHATTY_LOGGERS = ("httpx", "httpcore", "aiohttp", "pika", "werkzeug")


def key_forms(key: str) -> set[str]:
    """A key as it could leak: whole, its base64 body, and for a ``whsk_`` key its bare seed."""
    prefix, _, body = key.partition("_")
    forms = {key, body}
    if prefix == "whsk":
        forms.add(base64.b64encode(private_key(key).private_bytes_raw()).decode())
    return forms


def api_key_secret(api_key: str) -> str:
    return api_key.partition(".")[2]


def stored_rows() -> str:
    """Every stored row as JSON text, less the columns whose job is to hold keys (and the key hashes)."""
    rows: list[dict[str, Any]] = []
    for model in (*ALL_MODELS, *CONSOLE_MODELS, *PAGE_MODELS, *PORTAL_MODELS):
        if model is ApiKey:
            continue
        for row in model.select():
            data = dict(row.__data__)
            if model is Endpoint:
                data.pop("secret"), data.pop("previous_secret")
            rows.append(data)
    return json.dumps(rows, default=str)


@dataclass
class Recorder:
    """A test client that keeps every response."""

    client: FlaskClient
    responses: list[tuple[str, TestResponse]] = field(default_factory=list)

    def __call__(self, method: str, url: str, **kwargs: Any) -> TestResponse:
        response = self.client.open(url, method=method, **kwargs)
        self.responses.append((f"{method} {url}", response))
        return response


@contextmanager
def garbage_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers every request with something that is not HTTP."""

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")

    with raw_server(answer) as port:
        yield port


def test_no_key_reaches_a_log_an_error_body_a_stored_row_or_a_console_page(
    app: Flask,
    client: FlaskClient,
    make_settings: Callable[..., Any],
    start_worker: Callable[[Any], object],
    tenant: SimpleNamespace,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One full flow at DEBUG: keys made and rotated with the CLI, v1 and v1a endpoints, deliveries that succeed
    # and that fail with every error class producible locally, rotations, wrong and revoked keys, refused
    # requests, console pages; then every log record, response and stored row (less the key columns) is searched.
    caplog.set_level(logging.DEBUG)
    for name in CHATTY_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    call = Recorder(client)
    cli = app.test_cli_runner()

    # -- tenants and API keys through the CLI --------------------------------------------------
    created = json.loads(cli.invoke(args=["tenant", "create", "Hooli"]).output)
    rotated = json.loads(cli.invoke(args=["tenant", "rotate-key", created["id"]]).output)
    api_keys = [tenant.api_key, created["api_key"], rotated["api_key"]]
    headers = {"Authorization": f"Bearer {rotated['api_key']}"}

    # -- endpoints failing every way, and succeeding -------------------------------------------
    with (
        Receiver(always(200, None, b"thanks")) as ok,
        Receiver(always(500, None, b"boom")) as broken,
        Receiver(always(302, {"Location": "http://127.0.0.1:9/elsewhere"})) as redirecting,
        Receiver(always(410)) as gone,
        Receiver(sleep_then(5.0)) as slow,
        garbage_server() as garbage_port,
    ):
        urls = {
            "ok": ok.url + "/hook",
            "http_status": broken.url,
            "redirect": redirecting.url,
            "gone": gone.url,
            "timeout": slow.url,
            "connection": f"http://127.0.0.1:{unused_port()}/",
            "dns": "http://no-such-host.invalid/hook",
            "tls": f"https://127.0.0.1:{ok.port}/",
            "protocol": f"http://127.0.0.1:{garbage_port}/",
            "blocked_address": "http://[::1]:9/hook",  # the worker below allows 127.0.0.0/8 only
        }
        bodies = [{"url": url} for url in urls.values()] + [{"url": ok.url + "/v1a", "signature_scheme": "v1a"}]
        endpoints = [call("POST", "/v1/endpoints", json=body, headers=headers).json for body in bodies]
        start_worker(
            make_settings(
                ladder="300ms",
                delivery_timeout=1.0,
                allow_private_targets=False,
                allowed_target_networks="127.0.0.0/8",
            )
        )

        def settle() -> None:
            wait_until(lambda: not Delivery.select().where(Delivery.status.not_in(SETTLED)).exists(), timeout=30)

        post_event(client, headers, payload={"n": 1})
        settle()
        for endpoint in endpoints:
            call("POST", f"/v1/endpoints/{endpoint['id']}/secret/rotate", headers=headers)
        post_event(client, headers, payload={"n": 2})
        settle()

    classes = {row.error_class for row in Attempt.select()}
    assert classes >= set(urls) - {"ok", "gone"}, classes

    # -- refused requests -----------------------------------------------------------------------
    v1a = endpoints[-1]["id"]
    known_key_id = rotated["api_key"].partition(".")[0]
    for bad in (created["api_key"], f"{known_key_id}.{api_key_secret(tenant.api_key)}", "garbage", ""):
        call("GET", "/v1/endpoints", headers={"Authorization": f"Bearer {bad}"})
    rejected_secret = generate_secret()
    call("POST", f"/v1/endpoints/{v1a}/secret/rotate", json={"secret": rejected_secret}, headers=headers)
    call("POST", "/v1/endpoints", json={"url": ok.url, "secret": rejected_secret}, headers=headers)
    call("POST", f"/v1/endpoints/{endpoints[0]['id']}/secret/rotate", json={"secret": "whsec_c2hvcnQ="}, headers=headers)
    for endpoint in endpoints:
        for path in ("", "/secret", "/health", "/attempts"):
            call("GET", f"/v1/endpoints/{endpoint['id']}{path}", headers=headers)
    call("GET", "/v1/events", headers=headers)
    deliveries = list(Delivery.select())
    for delivery in deliveries:
        call("GET", f"/v1/deliveries/{delivery.id}", headers=headers)
    log_in(client, "viewer")
    for endpoint in endpoints:
        call("GET", f"/console/endpoints/{endpoint['id']}")
    for event_id in {delivery.event_id for delivery in deliveries}:
        call("GET", f"/console/events/{event_id}")

    # -- what to look for, and where -------------------------------------------------------------
    signing_keys = [key for row in Endpoint.select() for key in (row.secret, row.previous_secret) if key]
    private = set().union(*(key_forms(key) for key in signing_keys if key.startswith("whsk_")))
    shared = set().union(*(key_forms(key) for key in signing_keys if key.startswith("whsec_")))
    shared |= key_forms(rejected_secret)
    never_anywhere = private | {api_key_secret(key) for key in api_keys}
    assert len(signing_keys) == 2 * len(endpoints)

    logged = caplog.text
    assert "attempted delivery=" in logged  # the worker's lines were captured
    assert not [value for value in never_anywhere | shared if value in logged]
    stored = stored_rows()
    assert "webhook-signature" in stored  # the attempt log holds the signatures, which is fine
    assert not [value for value in never_anywhere | shared if value in stored]
    for request, response in call.responses:
        text = response.get_data(as_text=True)
        assert not [value for value in never_anywhere if value in text], request
        if response.status_code >= 300:
            assert not [value for value in shared if value in text], request
    console = [response.status_code for request, response in call.responses if request.startswith("GET /console/")]
    assert console and set(console) == {200}  # real pages were searched, not login redirects


def test_no_route_ever_returns_a_private_signing_key(
    app: Flask, client: FlaskClient, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers, signature_scheme="v1a")
    rotated = client.post(f"/v1/endpoints/{endpoint['id']}/secret/rotate", headers=headers)
    event = post_event(client, headers).json
    delivery = event["deliveries"][0]["id"]
    make_attempt(delivery, 1)
    stored = Endpoint.get_by_id(endpoint["id"])
    private = key_forms(stored.secret) | key_forms(stored.previous_secret)
    key_id = headers["Authorization"].split()[1].partition(".")[0]
    ids = {"endpoint_id": endpoint["id"], "event_id": event["id"], "delivery_id": delivery, "key_id": key_id,
           "name": event["event_type"], "tenant_ref": Endpoint.get_by_id(endpoint["id"]).tenant_id}
    with database.connection_context(), write():
        platform = {"Authorization": f"Bearer {create_api_key(PLATFORM, 'sweep')[1]}"}
    answers = [endpoint, rotated.json]

    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1/"):
            continue
        url = app.url_map.bind("localhost").build(rule.endpoint, {name: ids[name] for name in rule.arguments})
        key = platform if rule.rule.startswith("/v1/tenants") else headers  # acting for the same tenant
        for method in sorted(rule.methods - {"HEAD", "OPTIONS", "DELETE"}):
            answers.append(client.open(url, method=method, json={}, headers=key).get_data(as_text=True))

    text = json.dumps(answers)
    assert "whsk_" not in text
    assert not [value for value in private if value in text]


def test_an_endpoint_view_keeps_its_keys_out_of_its_repr() -> None:
    view = EndpointView("ep_1", "https://example.com/hook", generate_signing_key(), generate_secret(), None)

    shown = repr(view)

    assert "ep_1" in shown
    assert view.secret not in shown and view.previous_secret is not None and view.previous_secret not in shown
    assert "whsk_" not in shown and "whsec_" not in shown
