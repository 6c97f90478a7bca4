"""``GET /v1/deliveries``: a tenant's deliveries, newest first, by status, endpoint and time, cursor-paged."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, post_event
from webhooks.storage.models import Delivery
from webhooks.storage.timeutil import isoformat, utcnow


def deliveries(client: FlaskClient, headers: dict[str, str], count: int, url: str = "http://127.0.0.1:9/a") -> tuple[str, list[str]]:
    """An endpoint and ``count`` events to it: (endpoint id, delivery ids oldest first)."""
    endpoint = create_endpoint(client, headers, url=url)["id"]
    ids = [post_event(client, headers, payload={"n": n}).json["deliveries"] for n in range(count)]
    return endpoint, [next(d["id"] for d in each if d["endpoint_id"] == endpoint) for each in ids]


def listed(client: FlaskClient, headers: dict[str, str], **query: Any) -> dict[str, Any]:
    response = client.get("/v1/deliveries", query_string=query, headers=headers)
    assert response.status_code == 200, response.json
    return response.json


def test_failed_deliveries_are_listed_newest_first_by_endpoint_and_since_cursor_paged(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    first, to_first = deliveries(client, headers, 5)
    second, to_second = deliveries(client, headers, 2, url="http://127.0.0.1:9/b")
    failed = to_first[:3] + to_second[:1]
    Delivery.update(status="failed", attempts=10, last_error="HTTP 500").where(Delivery.id.in_(failed)).execute()
    old = to_first[0]
    Delivery.update(created_at=utcnow() - timedelta(days=2)).where(Delivery.id == old).execute()

    every_failure = listed(client, headers, status="failed")
    page_one = listed(client, headers, status="failed", endpoint_id=first, limit=2)
    page_two = listed(client, headers, status="failed", endpoint_id=first, limit=2, cursor=page_one["next_cursor"])
    recent = listed(client, headers, status="failed", since=isoformat(utcnow() - timedelta(days=1)))

    assert [d["id"] for d in every_failure["data"]] == sorted(failed, reverse=True)
    assert every_failure["has_more"] is False and every_failure["next_cursor"] is None
    assert [d["id"] for d in page_one["data"] + page_two["data"]] == sorted(to_first[:3], reverse=True)
    assert page_one["has_more"] is True and page_two["has_more"] is False
    assert {d["id"] for d in recent["data"]} == set(failed) - {old}
    shown = every_failure["data"][0]
    assert (shown["status"], shown["attempts"], shown["last_error"]) == ("failed", 10, "HTTP 500")
    assert set(shown) >= {"id", "event_id", "endpoint_id", "status", "attempts", "next_attempt_at",
                          "last_status_code", "last_error", "created_at", "delivered_at"}
    assert len(listed(client, headers)["data"]) == 5 + 2 * 2  # no filter: every delivery (both endpoints get b's events)


def test_another_tenants_deliveries_are_never_listed(
    client: FlaskClient, headers: dict[str, str], other_tenant: SimpleNamespace, auth: Callable[..., dict[str, str]]
) -> None:
    endpoint, theirs = deliveries(client, auth(other_tenant), 2)
    Delivery.update(status="failed").execute()

    assert listed(client, headers, status="failed")["data"] == []
    assert listed(client, headers, endpoint_id=endpoint)["data"] == []


@pytest.mark.parametrize("query, field, says", [
    ({"status": "lost"}, "status", "must be one of: pending, retrying, parked, delivered, failed, cancelled"),
    ({"endpoint_id": "ep_nope"}, "endpoint_id", "must be an endpoint id"),
    ({"since": "yesterday"}, "since", "Not a valid datetime."),
    ({"cursor": "evt_01m80h419wv1rc4e9x24x24f11"}, "cursor", "must be the next_cursor of a previous page"),
    ({"limit": "0"}, "limit", "Must be greater than or equal to 1"),
])
def test_a_bad_filter_is_a_422_naming_it(
    client: FlaskClient, headers: dict[str, str], query: dict[str, str], field: str, says: str
) -> None:
    response = client.get("/v1/deliveries", query_string=query, headers=headers)

    assert response.status_code == 422
    (message,) = response.json["errors"]["query"][field]
    assert message.startswith(says)


def test_the_list_is_documented_with_its_filters_and_page(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").json
    operation = spec["paths"]["/v1/deliveries"]["get"]

    assert {p["name"] for p in operation["parameters"]} == {"status", "endpoint_id", "since", "cursor", "limit"}
    (status,) = [p for p in operation["parameters"] if p["name"] == "status"]
    assert status["schema"]["enum"] == ["pending", "retrying", "parked", "delivered", "failed", "cancelled"]
    page = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(spec["components"]["schemas"][page]["properties"]) == {"data", "next_cursor", "has_more"}
