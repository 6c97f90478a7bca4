"""POST /v1/tenants/<id or uid>/portal-access and DELETE …/portal-sessions (platform key): the API's
way to ``webhooks.portal.access``: one-time links into a tenant's portal, and ending its sessions."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from webhooks.storage.timeutil import utcnow


@pytest.fixture
def customer(client: FlaskClient, platform: dict[str, str]) -> dict[str, Any]:
    return client.post("/v1/tenants", json={"name": "Customer", "uid": "cus_1"}, headers=platform).json


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def test_portal_access_answers_a_one_time_link_that_opens_the_tenants_portal(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any]
) -> None:
    response = client.post("/v1/tenants/cus_1/portal-access", json={}, headers=platform)

    assert response.status_code == 201
    body = response.json
    assert timedelta(minutes=9) < at(body["expires_at"]) - utcnow() <= timedelta(minutes=10)
    assert body["capabilities"] == ["view", "manage_endpoints", "view_secrets", "rotate_secrets", "resend"]
    path = body["url"].split("://", 1)[1].partition("/")[2]
    opened = client.get("/" + path)
    assert opened.status_code in (302, 303) and opened.headers["Location"].endswith("/portal/")
    assert client.application.test_client().get("/" + path).status_code == 410  # used once: another browser gets nothing


def test_portal_access_takes_capabilities_and_expires_in(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any]
) -> None:
    response = client.post(f"/v1/tenants/{customer['id']}/portal-access",
                           json={"capabilities": ["resend"], "expires_in": 60}, headers=platform)

    assert response.status_code == 201
    assert response.json["capabilities"] == ["view", "resend"]
    assert at(response.json["expires_at"]) - utcnow() <= timedelta(seconds=60)


@pytest.mark.parametrize(("body", "field"), [
    ({"capabilities": ["admin"]}, "capabilities"), ({"capabilities": "view"}, "capabilities"),
    ({"expires_in": 5}, "expires_in"), ({"expires_in": 10**9}, "expires_in"), ({"expires_in": "60"}, "expires_in"),
])
def test_bad_portal_access_input_is_a_422_naming_the_field(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any], body: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/tenants/cus_1/portal-access", json=body, headers=platform)

    assert response.status_code == 422 and field in response.json["errors"]["json"]


def test_portal_routes_of_an_unknown_tenant_are_404_and_need_a_platform_key(
    client: FlaskClient, platform: dict[str, str], headers: dict[str, str], customer: dict[str, Any]
) -> None:
    assert client.post("/v1/tenants/nobody/portal-access", json={}, headers=platform).status_code == 404
    assert client.delete("/v1/tenants/nobody/portal-sessions", headers=platform).status_code == 404
    assert client.post("/v1/tenants/cus_1/portal-access", json={}, headers=headers).status_code == 403


def test_ending_portal_sessions_logs_the_customer_out(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any]
) -> None:
    link = client.post("/v1/tenants/cus_1/portal-access", json={}, headers=platform).json["url"]
    client.get("/" + link.split("://", 1)[1].partition("/")[2])
    assert client.get("/portal/").status_code == 200

    ended = client.delete("/v1/tenants/cus_1/portal-sessions", headers=platform)

    assert ended.status_code == 200 and ended.json == {"ended": 1}
    assert client.get("/portal/").status_code != 200


def test_deleting_a_tenant_ends_its_portal_sessions(
    client: FlaskClient, platform: dict[str, str], customer: dict[str, Any]
) -> None:
    link = client.post("/v1/tenants/cus_1/portal-access", json={}, headers=platform).json["url"]
    client.get("/" + link.split("://", 1)[1].partition("/")[2])

    client.delete("/v1/tenants/cus_1", headers=platform)

    assert client.get("/portal/").status_code != 200
