"""A platform key acts for any tenant under /v1/tenants/<id or uid>/…: the tenant routes' own views,
a second way in; each kind of key on the other kind's routes is a 403 that names the right key."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import HOOK_URL, views_run
from tests.isolation import NOUNS, OBJECT_ROUTES, object_kind, snapshot
from webhooks.pages.headers import SecurityHeaders
from webhooks.api import TENANT_BLUEPRINTS
from webhooks.storage.models import Event

EVENT = {"event_type": "order.created", "payload": {"order": 1}}


@pytest.fixture
def customer(client: FlaskClient, platform: dict[str, str]) -> dict[str, Any]:
    """A tenant the platform created, with the uid ``cus_1``."""
    return client.post("/v1/tenants", json={"name": "Customer", "uid": "cus_1"}, headers=platform).json


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "views"])
def test_a_platform_key_registers_an_endpoint_and_sends_events_for_a_tenant(
    make_app: Callable[..., Flask], platform: dict[str, str], fast: bool
) -> None:
    app = make_app()
    if not fast:  # Flask alone, as tests/api/test_fast_ingest.py builds it
        app.wsgi_app = SecurityHeaders(Flask.wsgi_app.__get__(app))  # type: ignore[method-assign]
    seen = views_run(app)
    client = app.test_client()
    tenant = client.post("/v1/tenants", json={"name": "Customer", "uid": "cus_1"}, headers=platform).json

    endpoint = client.post("/v1/tenants/cus_1/endpoints", json={"url": HOOK_URL}, headers=platform)
    one = client.post(f"/v1/tenants/{tenant['id']}/events", json=EVENT, headers=platform)
    batch = client.post("/v1/tenants/cus_1/events/batch", json=[EVENT, EVENT], headers=platform)

    assert endpoint.status_code == 201
    assert endpoint.headers["Location"].endswith(f"/v1/tenants/cus_1/endpoints/{endpoint.json['id']}")
    assert one.status_code == 202 and batch.status_code == 202
    assert one.headers["Location"].endswith(f"/v1/tenants/{tenant['id']}/events/{one.json['id']}")
    assert [d["endpoint_id"] for d in one.json["deliveries"]] == [endpoint.json["id"]]
    assert [e["seq"] for e in batch.json["data"]] == [2, 3]
    assert {e.tenant_id for e in Event.select()} == {tenant["id"]}
    ingest_paths = {f"/v1/tenants/{tenant['id']}/events", "/v1/tenants/cus_1/events/batch"}
    assert ingest_paths.isdisjoint(seen) if fast else ingest_paths <= set(seen)
    listed = client.get("/v1/tenants/cus_1/events", headers=platform).json
    assert [e["id"] for e in listed["data"]] == [one.json["id"], *[e["id"] for e in batch.json["data"]]]


def test_every_tenant_route_answers_under_the_tenants_prefix_with_the_same_view(app: Flask) -> None:
    rules = {rule.rule: rule for rule in app.url_map.iter_rules()}
    tenant_rules = [rule for rule in app.url_map.iter_rules()
                    if rule.endpoint.partition(".")[0] in {m.blp.name for m in TENANT_BLUEPRINTS}]

    assert len(tenant_rules) > 15
    for rule in tenant_rules:
        twin = rules[rule.rule.replace("/v1/", "/v1/tenants/<tenant_ref>/", 1)]
        assert twin.methods == rule.methods
        assert app.view_functions[twin.endpoint] is app.view_functions[rule.endpoint]


def test_a_platform_key_on_a_plain_tenant_route_is_a_403_that_says_where_to_go(
    client: FlaskClient, platform: dict[str, str]
) -> None:
    for response in (client.post("/v1/events", json=EVENT, headers=platform),
                     client.get("/v1/endpoints", headers=platform),
                     client.post("/v1/events/batch", json=[EVENT], headers=platform)):
        assert response.status_code == 403
        assert "takes a tenant API key" in response.json["message"]
        assert "/v1/tenants/<tenant id or uid>/" in response.json["message"]


def test_a_tenant_key_under_the_tenants_prefix_is_a_403_even_for_its_own_tenant(
    client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    response = client.post(f"/v1/tenants/{tenant.id}/events", json=EVENT, headers=headers)

    assert response.status_code == 403 and "platform API key" in response.json["message"]
    assert Event.select().count() == 0


def test_an_unknown_tenant_is_a_404(client: FlaskClient, platform: dict[str, str]) -> None:
    for response in (client.post("/v1/tenants/nobody/events", json=EVENT, headers=platform),
                     client.get("/v1/tenants/ten_00000000000000000000000000/endpoints", headers=platform)):
        assert response.status_code == 404 and response.json["message"] == "tenant not found"


def test_a_platform_key_issues_a_tenant_its_own_key_which_works_on_the_plain_routes(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any]
) -> None:
    issued = client.post("/v1/tenants/cus_1/api-keys", json={"name": "customer"}, headers=platform)
    own = {"Authorization": f"Bearer {issued.json['api_key']}"}

    assert issued.status_code == 201
    assert client.post("/v1/events", json=EVENT, headers=own).status_code == 202
    assert [k["name"] for k in client.get("/v1/tenants/cus_1/api-keys", headers=platform).json["data"]] == ["customer"]


@pytest.mark.parametrize(("method", "path", "body"), OBJECT_ROUTES, ids=[f"{m} {p}" for m, p, _ in OBJECT_ROUTES])
def test_acting_for_one_tenant_another_tenants_object_is_404_and_untouched(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any], victim: dict[str, str],
    method: str, path: str, body: dict[str, Any] | None,
) -> None:
    before = snapshot(victim)

    response = client.open(path.format(**victim).replace("/v1/", "/v1/tenants/cus_1/", 1), method=method, json=body,
                           headers=platform)

    assert response.status_code == 404
    assert response.json["message"] == f"{NOUNS[object_kind(path)]} not found"
    assert snapshot(victim) == before


def test_the_event_type_catalog_is_written_with_a_platform_key_and_read_with_either(
    client: FlaskClient, platform: dict[str, str], headers: dict[str, str]
) -> None:
    body = {"name": "order.paid", "description": "An order was paid."}

    refused = client.post("/v1/event-types", json=body, headers=headers)
    written = client.post("/v1/event-types", json=body, headers=platform)

    assert refused.status_code == 403 and "platform API key" in refused.json["message"]
    assert written.status_code == 201
    for key in (headers, platform):
        assert client.get("/v1/event-types/order.paid", headers=key).status_code == 200
    assert client.patch("/v1/event-types/order.paid", json={"description": "x"}, headers=headers).status_code == 403
    assert client.delete("/v1/event-types/order.paid", headers=headers).status_code == 403
