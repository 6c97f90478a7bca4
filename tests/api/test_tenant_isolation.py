"""Tenant isolation: every /v1 route answers 404 for another tenant's objects and leaks nothing;
a tenant API key opens no /console page (the console is for staff)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable
from urllib.parse import quote

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.routing import Rule
from werkzeug.routing.converters import AnyConverter

from tests.console_helpers import form_csrf
from tests.api_helpers import create_endpoint, post_event
from tests.isolation import NOUNS, OBJECT_ROUTES, object_kind, snapshot

#: Routes naming an object that is no tenant's: the event-type catalog is the platform's, read by every tenant.
SHARED_PREFIXES = ("/v1/event-types/",)


def request(client: FlaskClient, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]) -> Any:
    return client.open(path, method=method, json=body, headers=headers)


def test_the_matrix_covers_every_v1_route_that_names_an_object(app: Flask) -> None:
    routed = {
        (method, rule.rule.replace(":event_id>", ">"))
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/v1/") and "<" in rule.rule and not rule.rule.startswith(SHARED_PREFIXES)
        and not rule.rule.startswith("/v1/tenants/")  # the same views for a platform key: tests/platform
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }
    covered = {(method, path.replace("{", "<").replace("}", "_id>")) for method, path, _ in OBJECT_ROUTES}

    assert covered == routed


@pytest.mark.parametrize(("method", "path", "body"), OBJECT_ROUTES, ids=[f"{m} {p}" for m, p, _ in OBJECT_ROUTES])
def test_another_tenants_object_is_404_leaks_nothing_and_is_untouched(
    client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    victim: dict[str, str],
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    kind = object_kind(path)
    before = snapshot(victim)

    response = request(client, method, path.format(**victim), body, auth(tenant))

    assert response.status_code == 404
    assert response.json == {"code": 404, "status": "Not Found", "message": f"{NOUNS[kind]} not found"}
    text = response.get_data(as_text=True)
    assert not any(value in text for value in victim.values())
    assert snapshot(victim) == before


@pytest.mark.parametrize("object_id", ["ep_{0}", "evt_{0}", "dlv_{0}", "nonsense", "ep_..", "%00"])
@pytest.mark.parametrize(("method", "path", "body"), OBJECT_ROUTES, ids=[f"{m} {p}" for m, p, _ in OBJECT_ROUTES])
def test_unknown_or_malformed_ids_get_the_same_404_as_another_tenants(
    client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    method: str,
    path: str,
    body: dict[str, Any] | None,
    object_id: str,
) -> None:
    kind = object_kind(path)
    unknown = object_id.format("0" * 26)

    response = request(client, method, path.format(**{kind: unknown}), body, auth(tenant))

    assert response.status_code == 404
    assert response.json == {"code": 404, "status": "Not Found", "message": f"{NOUNS[kind]} not found"}


def test_lists_show_only_the_callers_objects(
    client: FlaskClient, tenant: SimpleNamespace, auth: Callable[..., dict[str, str]], victim: dict[str, str]
) -> None:
    headers = auth(tenant)
    own_endpoint = create_endpoint(client, headers)["id"]
    own_event = post_event(client, headers).json

    endpoints = client.get("/v1/endpoints", headers=headers).json
    events = client.get("/v1/events", headers=headers).json
    endpoints_after_theirs = client.get(f"/v1/endpoints?cursor={victim['endpoint']}", headers=headers).json

    assert [e["id"] for e in endpoints["data"]] == [own_endpoint]
    assert [e["id"] for e in events["data"]] == [own_event["id"]]
    assert own_event["seq"] == 1  # seq is per tenant: B's event did not use a number
    assert [d["endpoint_id"] for d in own_event["deliveries"]] == [own_endpoint]
    assert all(e["id"] != victim["endpoint"] for e in endpoints_after_theirs["data"])


def test_another_tenants_events_do_not_reach_my_endpoints(
    client: FlaskClient,
    tenant: SimpleNamespace,
    other_tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
) -> None:
    create_endpoint(client, auth(tenant))

    theirs = post_event(client, auth(other_tenant)).json

    assert theirs["deliveries"] == []


def test_idempotency_keys_are_per_tenant(
    client: FlaskClient,
    tenant: SimpleNamespace,
    other_tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
) -> None:
    mine = post_event(client, {**auth(tenant), "Idempotency-Key": "shared"}, payload={"who": "a"})
    theirs = post_event(client, {**auth(other_tenant), "Idempotency-Key": "shared"}, payload={"who": "b"})

    assert (mine.status_code, theirs.status_code) == (202, 202)
    assert mine.json["id"] != theirs.json["id"]
    assert "Idempotent-Replayed" not in theirs.headers


# -- the console is for staff -------------------------------------------------------------------

#: Console endpoints anyone may open (the login form and its stylesheet): they must still show no data.
CONSOLE_PUBLIC = {"console.login", "console.static"}


def _console_value(rule: Rule, argument: str, victim: dict[str, str]) -> str | int:
    """A value for a console URL argument that names the victim's object where there is one."""
    converter = rule._converters[argument]
    if isinstance(converter, AnyConverter):
        return min(converter.items)
    if argument.endswith("_id") and argument[: -len("_id")] in victim:
        return victim[argument[: -len("_id")]]
    return {"job_id": 1, "filename": "console.css"}.get(argument, "anything")


def console_requests(app: Flask, victim: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(endpoint, method, url)`` of every console route in ``app.url_map``, ids filled with the victim's."""
    adapter = app.url_map.bind("localhost")
    requests = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("console."):
            continue
        values = {argument: _console_value(rule, argument, victim) for argument in rule.arguments}
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            requests.append((rule.endpoint, method, adapter.build(rule.endpoint, values, method=method)))
    return requests


def test_a_tenant_api_key_opens_no_console_page_and_the_console_shows_it_nothing(
    app: Flask,
    client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    victim: dict[str, str],
) -> None:
    app.config["CONSOLE_LOGIN_DELAY"] = 0
    own_endpoint = create_endpoint(client, auth(tenant))["id"]
    secrets = [*victim.values(), own_endpoint]
    before = snapshot(victim)
    routes = console_requests(app, victim)
    # A real client gets a CSRF token from the login form, so POSTs meet the login check, not just the CSRF one.
    token = form_csrf(client.get("/console/login").get_data(as_text=True))

    answers = {}
    for endpoint, method, url in routes:
        form = {"csrf_token": token} if method == "POST" else None
        response = client.open(url, method=method, data=form, headers=auth(tenant))
        answers[(endpoint, method, url)] = response
        # The redirect repeats the URL asked for (``?next=``): only what the caller sent, nothing found.
        text = response.get_data(as_text=True).replace(quote(url, safe=""), "").replace(url, "")
        assert not [value for value in secrets if value in text], (method, url)
        if endpoint in CONSOLE_PUBLIC:
            continue
        redirected_to_login = response.status_code in (302, 303) and response.headers["Location"].startswith(
            "/console/login"
        )
        assert redirected_to_login or response.status_code in (401, 403), (method, url, response.status_code)

    assert {endpoint for endpoint, _, _ in routes} >= {"console.overview", "console.event", "console.endpoint"}
    assert answers[("console.login", "POST", "/console/login")].status_code == 401  # an API key is no staff login
    assert snapshot(victim) == before
