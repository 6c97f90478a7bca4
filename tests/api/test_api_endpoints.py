"""/v1/endpoints: registration, validation, SSRF rules, paging, PATCH, delete, secrets, recovery."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.concurrency import in_threads
from tests.api_helpers import (
    HOOK_URL,
    create_endpoint,
    make_attempt,
    post_event,
    row_counts,
)
from webhooks.config import Settings
from webhooks.storage import db, endpoint_windows
from webhooks.storage.models import Delivery, Endpoint, EndpointWindow
from webhooks.messaging.publisher import Publisher
from webhooks.health.releaser import Releaser
from webhooks.delivery.signing import generate_secret, is_valid_secret, public_key
from webhooks.storage.timeutil import utcnow

#: The helpers' fixtures (``headers``, ``make_app``); to merge into conftest.py.

PUBLIC_FIELDS = {
    "id", "url", "fallback_url", "description", "event_types", "rate_limit", "metadata",
    "disabled", "disabled_reason", "created_at", "updated_at", "contact_email",
    "health", "consecutive_failures", "failing_since", "offline_since", "next_probe_at", "last_success_at",
    "parked_count", "oldest_parked_at", "concurrency", "signature_scheme", "filter",
}  # fmt: skip


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value[:-1])


# --- create ------------------------------------------------------------------------------


def test_registering_an_endpoint_returns_201_with_its_id_and_a_valid_secret(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    response = client.post(
        "/v1/endpoints",
        json={
            "url": HOOK_URL,
            "event_types": ["order.created", "order.paid"],
            "description": "orders",
            "rate_limit": 50,
            "metadata": {"team": "billing"},
        },
        headers=headers,
    )

    assert response.status_code == 201
    body = response.json
    assert set(body) == PUBLIC_FIELDS | {"secret", "public_key"}
    assert body["id"].startswith("ep_")
    assert is_valid_secret(body["secret"])
    assert (body["signature_scheme"], body["public_key"]) == ("v1", None)
    assert body["url"] == HOOK_URL
    assert body["event_types"] == ["order.created", "order.paid"]
    assert (body["description"], body["rate_limit"], body["metadata"]) == ("orders", 50, {"team": "billing"})
    assert body["disabled"] is False and body["disabled_reason"] is None
    assert body["created_at"].endswith("Z") and body["created_at"] == body["updated_at"]
    assert response.headers["Location"].endswith(f"/v1/endpoints/{body['id']}")
    stored = Endpoint.get_by_id(body["id"])
    assert stored.secret == body["secret"]


def test_only_url_is_required_and_defaults_are_shown(client: FlaskClient, headers: dict[str, str]) -> None:
    body = create_endpoint(client, headers)

    assert (body["event_types"], body["description"], body["rate_limit"], body["metadata"]) == ([], "", None, {})


def test_reading_an_endpoint_does_not_show_its_secret(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers)

    response = client.get(f"/v1/endpoints/{created['id']}", headers=headers)

    assert response.status_code == 200
    assert set(response.json) == PUBLIC_FIELDS
    assert created["secret"] not in response.get_data(as_text=True)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url"),
        ({"url": "ftp://127.0.0.1/hook"}, "url"),
        ({"url": "javascript:alert(1)"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": 42}, "url"),
        ({"url": HOOK_URL + "/" + "a" * 2100}, "url"),
        ({"url": HOOK_URL, "event_types": "order.created"}, "event_types"),
        ({"url": HOOK_URL, "event_types": ["has space"]}, "event_types"),
        ({"url": HOOK_URL, "event_types": ["x" * 129]}, "event_types"),
        ({"url": HOOK_URL, "event_types": ["a", "a"]}, "event_types"),
        ({"url": HOOK_URL, "event_types": [f"t{i}" for i in range(101)]}, "event_types"),
        ({"url": HOOK_URL, "description": "d" * 1001}, "description"),
        ({"url": HOOK_URL, "description": "nul \x00 inside"}, "description"),
        ({"url": HOOK_URL, "description": "unpaired \ud800 surrogate"}, "description"),
        ({"url": HOOK_URL + "/\ud800"}, "url"),
        ({"url": HOOK_URL, "rate_limit": 0}, "rate_limit"),
        ({"url": HOOK_URL, "rate_limit": 10_001}, "rate_limit"),
        ({"url": HOOK_URL, "rate_limit": "ten"}, "rate_limit"),
        ({"url": HOOK_URL, "rate_limit": 1.5}, "rate_limit"),
        ({"url": HOOK_URL, "metadata": {"k": 1}}, "metadata"),
        ({"url": HOOK_URL, "metadata": ["k"]}, "metadata"),
        ({"url": HOOK_URL, "metadata": {f"k{i}": "v" for i in range(51)}}, "metadata"),
        ({"url": HOOK_URL, "secret": generate_secret()}, "secret"),
        ({"url": HOOK_URL, "disabled": True}, "disabled"),
    ],
)
def test_invalid_endpoint_is_rejected_with_422_naming_the_field_and_nothing_is_written(
    client: FlaskClient, headers: dict[str, str], body: dict[str, Any], field: str
) -> None:
    before = row_counts()

    response = client.post("/v1/endpoints", json=body, headers=headers)

    assert response.status_code == 422
    assert response.json["code"] == 422
    assert list(response.json["errors"]["json"]) == [field]
    assert row_counts() == before


def test_every_unknown_field_is_named(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.post("/v1/endpoints", json={"url": HOOK_URL, "colour": "red", "size": 1}, headers=headers)

    assert response.status_code == 422
    assert response.json["errors"]["json"] == {"colour": ["Unknown field."], "size": ["Unknown field."]}


def test_boundary_values_are_accepted(client: FlaskClient, headers: dict[str, str]) -> None:
    body = create_endpoint(
        client,
        headers,
        event_types=[f"type-{i}" for i in range(100)],
        description="d" * 1000,
        rate_limit=10_000,
        metadata={f"k{i}": "v" for i in range(50)},
    )

    assert len(body["event_types"]) == 100 and body["rate_limit"] == 10_000


def test_operational_event_types_may_be_subscribed_to(client: FlaskClient, headers: dict[str, str]) -> None:
    body = create_endpoint(client, headers, event_types=["endpoint.offline", "delivery.exhausted"])

    assert body["event_types"] == ["endpoint.offline", "delivery.exhausted"]


# --- SSRF --------------------------------------------------------------------------------


@pytest.fixture
def guarded_client(make_app: Callable[..., Flask]) -> FlaskClient:
    """A client of an app that applies the production SSRF rules (no private targets)."""
    return make_app(allow_private_targets=False).test_client()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "cloud metadata service"),
        ("http://[::ffff:7f00:1]/hook", "IPv4-mapped"),
        ("http://[::1]:8000/hook", "loopback"),
        ("http://localhost/hook", "localhost"),
        ("https://no-such-host.invalid/hook", "does not resolve"),
    ],
)
def test_registering_a_url_that_reaches_a_forbidden_address_is_422_on_url(
    guarded_client: FlaskClient, headers: dict[str, str], url: str, reason: str
) -> None:
    before = row_counts()

    response = guarded_client.post("/v1/endpoints", json={"url": url}, headers=headers)

    assert response.status_code == 422
    (message,) = response.json["errors"]["json"]["url"]
    assert reason in message
    assert row_counts() == before


def test_allowed_target_networks_open_a_private_range(make_app: Callable[..., Flask], headers: dict[str, str]) -> None:
    client = make_app(allow_private_targets=False, allowed_target_networks="10.20.0.0/16").test_client()

    allowed = client.post("/v1/endpoints", json={"url": "http://10.20.1.1/hook"}, headers=headers)
    refused = client.post("/v1/endpoints", json={"url": "http://10.30.1.1/hook"}, headers=headers)

    assert allowed.status_code == 201
    assert refused.status_code == 422


def test_changing_the_url_to_a_forbidden_address_is_rejected_and_nothing_changes(
    make_app: Callable[..., Flask], headers: dict[str, str]
) -> None:
    client = make_app(allow_private_targets=False, allowed_target_networks="10.20.0.0/16").test_client()
    created = create_endpoint(client, headers, url="http://10.20.1.1/hook")

    response = client.patch(
        f"/v1/endpoints/{created['id']}", json={"url": "http://127.0.0.1/admin", "description": "x"}, headers=headers
    )

    assert response.status_code == 422
    assert "loopback" in response.json["errors"]["json"]["url"][0]
    stored = Endpoint.get_by_id(created["id"])
    assert (stored.url, stored.description) == ("http://10.20.1.1/hook", "")


# --- list --------------------------------------------------------------------------------


def test_endpoints_are_listed_oldest_first_in_cursor_pages(client: FlaskClient, headers: dict[str, str]) -> None:
    ids = [create_endpoint(client, headers, description=str(i))["id"] for i in range(5)]

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
        page = client.get("/v1/endpoints", query_string=query, headers=headers).json
        pages += 1
        seen += [item["id"] for item in page["data"]]
        assert page["has_more"] == (page["next_cursor"] is not None)
        if not page["has_more"]:
            break
        cursor = page["next_cursor"]

    assert seen == sorted(ids)
    assert pages == 3


def test_listing_defaults_to_50_and_rejects_a_bad_limit_or_cursor(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)

    default = client.get("/v1/endpoints", headers=headers)
    too_many = client.get("/v1/endpoints?limit=251", headers=headers)
    zero = client.get("/v1/endpoints?limit=0", headers=headers)
    not_a_cursor = client.get("/v1/endpoints?cursor=%00", headers=headers)

    assert default.status_code == 200 and len(default.json["data"]) == 1
    assert default.json["next_cursor"] is None and default.json["has_more"] is False
    assert too_many.status_code == 422 and "limit" in too_many.json["errors"]["query"]
    assert zero.status_code == 422 and "limit" in zero.json["errors"]["query"]
    assert not_a_cursor.status_code == 422 and "cursor" in not_a_cursor.json["errors"]["query"]


def test_deleted_endpoints_are_not_listed(client: FlaskClient, headers: dict[str, str]) -> None:
    kept = create_endpoint(client, headers)["id"]
    gone = create_endpoint(client, headers)["id"]
    client.delete(f"/v1/endpoints/{gone}", headers=headers)

    page = client.get("/v1/endpoints", headers=headers).json

    assert [item["id"] for item in page["data"]] == [kept]


# --- update ------------------------------------------------------------------------------


def test_patch_changes_only_the_given_fields_and_bumps_updated_at(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers, description="old", rate_limit=5, metadata={"a": "b"})
    time.sleep(0.005)

    response = client.patch(
        f"/v1/endpoints/{created['id']}",
        json={"url": HOOK_URL + "/v2", "rate_limit": None, "event_types": ["x.y"]},
        headers=headers,
    )

    assert response.status_code == 200
    body = response.json
    assert (body["url"], body["rate_limit"], body["event_types"]) == (HOOK_URL + "/v2", None, ["x.y"])
    assert (body["description"], body["metadata"]) == ("old", {"a": "b"})
    assert parse_time(body["updated_at"]) > parse_time(created["updated_at"])
    assert body["created_at"] == created["created_at"]
    assert Endpoint.get_by_id(created["id"]).secret == created["secret"]


def test_patch_validates_like_create_and_writes_nothing_when_invalid(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers)

    response = client.patch(
        f"/v1/endpoints/{created['id']}", json={"description": "new", "rate_limit": 0, "id": "ep_x"}, headers=headers
    )

    assert response.status_code == 422
    assert set(response.json["errors"]["json"]) == {"rate_limit", "id"}
    assert Endpoint.get_by_id(created["id"]).description == ""


def test_disabling_parks_new_deliveries_and_enabling_hands_them_to_the_paced_release(
    client: FlaskClient, headers: dict[str, str], settings: Settings
) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]

    disabled = client.patch(f"/v1/endpoints/{endpoint_id}", json={"disabled": True}, headers=headers)
    event = post_event(client, headers).json

    assert disabled.status_code == 200
    assert disabled.json["disabled"] is True and disabled.json["disabled_reason"]
    assert [d["status"] for d in event["deliveries"]] == ["parked"]

    enabled = client.patch(f"/v1/endpoints/{endpoint_id}", json={"disabled": False}, headers=headers)

    assert enabled.json["disabled"] is False and enabled.json["disabled_reason"] is None
    assert enabled.json["health"] == "recovering" and enabled.json["parked_count"] == 1
    assert Delivery.get_by_id(event["deliveries"][0]["id"]).status == "parked"
    publisher, releaser = Publisher(settings.amqp_url), Releaser(settings.release_rate)
    time.sleep(0.1)  # the release is paced: let its bucket fill
    assert releaser.release_parked(publisher, settings.topology) == 1
    publisher.close()
    assert Delivery.get_by_id(event["deliveries"][0]["id"]).status == "pending"


def test_patch_of_a_deleted_endpoint_is_404(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    client.delete(f"/v1/endpoints/{endpoint_id}", headers=headers)

    response = client.patch(f"/v1/endpoints/{endpoint_id}", json={"description": "back"}, headers=headers)

    assert response.status_code == 404
    assert response.json == {"code": 404, "status": "Not Found", "message": "endpoint not found"}


# --- delete ------------------------------------------------------------------------------


def test_delete_is_204_then_the_endpoint_is_gone_its_deliveries_cancelled_and_attempts_kept_per_event(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    (delivery,) = post_event(client, headers).json["deliveries"]
    make_attempt(delivery["id"], 1)

    response = client.delete(f"/v1/endpoints/{endpoint_id}", headers=headers)

    assert response.status_code == 204 and response.data == b""
    assert client.get(f"/v1/endpoints/{endpoint_id}", headers=headers).status_code == 404
    assert client.delete(f"/v1/endpoints/{endpoint_id}", headers=headers).status_code == 404
    assert Delivery.get_by_id(delivery["id"]).status == "cancelled"
    # Gone means gone (404) under the endpoint's path too; its attempts stay readable per event and delivery.
    assert client.get(f"/v1/endpoints/{endpoint_id}/attempts", headers=headers).status_code == 404
    history = client.get(f"/v1/deliveries/{delivery['id']}/attempts", headers=headers)
    assert history.status_code == 200 and len(history.json["data"]) == 1


def test_deleted_endpoint_gets_no_new_deliveries(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    client.delete(f"/v1/endpoints/{endpoint_id}", headers=headers)

    event = post_event(client, headers).json

    assert event["deliveries"] == []


# --- secret ------------------------------------------------------------------------------


def test_secret_is_readable(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers)

    response = client.get(f"/v1/endpoints/{created['id']}/secret", headers=headers)

    assert response.status_code == 200
    assert response.json == {"secret": created["secret"], "public_key": None, "scheme": "v1"}


def test_rotation_generates_a_new_secret_and_keeps_the_old_one_for_the_overlap(
    app: Flask, client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers)
    overlap = app.extensions["webhooks.settings"].secret_rotation_overlap

    response = client.post(f"/v1/endpoints/{created['id']}/secret/rotate", headers=headers)

    assert response.status_code == 200
    new_secret = response.json["secret"]
    assert is_valid_secret(new_secret) and new_secret != created["secret"]
    stored = Endpoint.get_by_id(created["id"])
    assert (stored.secret, stored.previous_secret) == (new_secret, created["secret"])
    expected_until = utcnow() + timedelta(seconds=overlap)
    assert abs((stored.previous_secret_until - expected_until).total_seconds()) < 5
    assert client.get(f"/v1/endpoints/{created['id']}/secret", headers=headers).json == response.json


def test_rotation_accepts_a_given_secret(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers)
    chosen = generate_secret()

    response = client.post(f"/v1/endpoints/{created['id']}/secret/rotate", json={"secret": chosen}, headers=headers)

    assert response.json == {"secret": chosen, "public_key": None, "scheme": "v1"}
    assert Endpoint.get_by_id(created["id"]).secret == chosen


@pytest.mark.parametrize("secret", ["plain", "whsec_!!!", "whsec_" + "QUJD" * 2, 7])
def test_rotation_to_an_invalid_secret_is_422_and_changes_nothing(
    client: FlaskClient, headers: dict[str, str], secret: Any
) -> None:
    created = create_endpoint(client, headers)

    response = client.post(f"/v1/endpoints/{created['id']}/secret/rotate", json={"secret": secret}, headers=headers)

    assert response.status_code == 422
    assert list(response.json["errors"]["json"]) == ["secret"]
    stored = Endpoint.get_by_id(created["id"])
    assert (stored.secret, stored.previous_secret) == (created["secret"], None)


def test_a_v1a_endpoint_stores_a_private_key_and_shows_only_its_public_key(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers, signature_scheme="v1a")

    stored = Endpoint.get_by_id(created["id"])
    assert stored.secret.startswith("whsk_")
    assert (created["signature_scheme"], created["secret"]) == ("v1a", None)
    assert created["public_key"] == public_key(stored.secret)
    assert client.get(f"/v1/endpoints/{created['id']}", headers=headers).json["signature_scheme"] == "v1a"


def test_an_unknown_scheme_is_422_and_the_scheme_cannot_be_patched(client: FlaskClient, headers: dict[str, str]) -> None:
    refused = client.post("/v1/endpoints", json={"url": HOOK_URL, "signature_scheme": "v2"}, headers=headers)
    created = create_endpoint(client, headers)
    patched = client.patch(f"/v1/endpoints/{created['id']}", json={"signature_scheme": "v1a"}, headers=headers)

    assert refused.status_code == 422 and list(refused.json["errors"]["json"]) == ["signature_scheme"]
    assert patched.status_code == 422 and patched.json["errors"]["json"] == {"signature_scheme": ["Unknown field."]}
    assert Endpoint.get_by_id(created["id"]).secret == created["secret"]


def test_a_v1a_rotation_makes_a_new_key_pair_and_refuses_a_given_secret(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers, signature_scheme="v1a")
    old_key = Endpoint.get_by_id(created["id"]).secret

    refused = client.post(
        f"/v1/endpoints/{created['id']}/secret/rotate", json={"secret": generate_secret()}, headers=headers
    )
    unchanged = Endpoint.get_by_id(created["id"])
    rotated = client.post(f"/v1/endpoints/{created['id']}/secret/rotate", headers=headers)
    stored = Endpoint.get_by_id(created["id"])

    assert refused.status_code == 409 and "send no secret" in refused.json["message"]
    assert (unchanged.secret, unchanged.previous_secret) == (old_key, None)
    assert rotated.json == {"secret": None, "public_key": public_key(stored.secret), "scheme": "v1a"}
    assert stored.secret.startswith("whsk_") and stored.previous_secret == old_key


def test_a_rotation_can_switch_the_scheme_either_way(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers)
    chosen = generate_secret()

    to_v1a = client.post(f"/v1/endpoints/{created['id']}/secret/rotate", json={"scheme": "v1a"}, headers=headers)
    back = client.post(
        f"/v1/endpoints/{created['id']}/secret/rotate", json={"scheme": "v1", "secret": chosen}, headers=headers
    )

    assert to_v1a.json["scheme"] == "v1a" and to_v1a.json["public_key"].startswith("whpk_")
    assert back.json == {"secret": chosen, "public_key": None, "scheme": "v1"}
    stored = Endpoint.get_by_id(created["id"])
    assert stored.secret == chosen and stored.previous_secret.startswith("whsk_")


# --- recover and attempts ----------------------------------------------------------------


def test_recover_requeues_failed_deliveries_since_the_given_time_and_leaves_parked_ones_to_the_release(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    failed, parked, delivered = (post_event(client, headers).json["deliveries"][0]["id"] for _ in range(3))
    Delivery.update(status="failed", attempts=3).where(Delivery.id == failed).execute()
    Delivery.update(status="parked").where(Delivery.id == parked).execute()
    Delivery.update(status="delivered", attempts=1).where(Delivery.id == delivered).execute()

    response = client.post(
        f"/v1/endpoints/{endpoint_id}/recover", json={"since": "2000-01-01T00:00:00+02:00"}, headers=headers
    )
    none_since_tomorrow = client.post(
        f"/v1/endpoints/{endpoint_id}/recover",
        json={"since": (utcnow() + timedelta(days=1)).isoformat()},
        headers=headers,
    )

    assert response.status_code == 202
    assert response.json == {"queued": 1, "parked": 1}
    assert none_since_tomorrow.json == {"queued": 0, "parked": 0}
    assert Delivery.get_by_id(parked).status == "parked" and Delivery.get_by_id(parked).attempts == 0
    # Online with a delivery still parked, nothing would release it: the endpoint releases it now.
    assert Endpoint.get_by_id(endpoint_id).health == "recovering"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"since": "yesterday"},
        {"since": 5},
        {"since": "2024-01-01", "x": 1},
        # valid ISO 8601, but not a time in UTC (found by the fuzzer: was a 500)
        {"since": "0001-01-01T00:00:00+01:01"},
        {"since": "9999-12-31T23:59:59-01:00"},
    ],
)
def test_recover_needs_a_valid_since(client: FlaskClient, headers: dict[str, str], body: dict[str, Any]) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]

    response = client.post(f"/v1/endpoints/{endpoint_id}/recover", json=body, headers=headers)

    assert response.status_code == 422
    assert "since" in response.json["errors"]["json"] or "x" in response.json["errors"]["json"]


def test_endpoint_attempts_are_listed_newest_first_across_its_deliveries(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    first, second = (post_event(client, headers).json["deliveries"][0]["id"] for _ in range(2))
    attempts = [make_attempt(first, 1).id, make_attempt(second, 1).id, make_attempt(first, 2).id]

    page = client.get(f"/v1/endpoints/{endpoint_id}/attempts", headers=headers).json

    assert [item["id"] for item in page["data"]] == attempts[::-1]
    assert page["next_cursor"] is None and page["has_more"] is False
    assert page["data"][0]["endpoint_id"] == endpoint_id


def test_an_endpoint_shows_the_concurrency_window_its_workers_use_now(client, headers) -> None:
    endpoint = create_endpoint(client, headers)["id"]
    idle = client.get(f"/v1/endpoints/{endpoint}", headers=headers).json["concurrency"]
    assert idle == {"window": None, "ceiling": 128, "in_flight": 0}

    endpoint_windows.save("host-a:1", [(endpoint, 24, 64, 17)], [])
    endpoint_windows.save("host-b:2", [(endpoint, 20, 64, 3)], [])
    endpoint_windows.save("gone:3", [(endpoint, 99, 64, 99)], [])
    stale = utcnow() - timedelta(seconds=endpoint_windows.FRESH_SECONDS + 1)
    EndpointWindow.update(updated_at=stale).where(EndpointWindow.worker == "gone:3").execute()

    shown = client.get(f"/v1/endpoints/{endpoint}", headers=headers).json["concurrency"]
    assert shown == {"window": 44, "ceiling": 128, "in_flight": 20}, "two live workers add up; a dead one does not count"


# --- the fan-out bound -----------------------------------------------------------------------


def test_a_tenant_beyond_its_endpoint_limit_gets_409_naming_the_limit_and_nothing_is_written(
    make_app: Callable[..., Flask], headers: dict[str, str], auth: Callable[..., dict[str, str]],
    other_tenant: Any,
) -> None:
    client = make_app(max_endpoints_per_tenant=2).test_client()
    first, _ = create_endpoint(client, headers), create_endpoint(client, headers)
    before = row_counts()

    refused = client.post("/v1/endpoints", json={"url": HOOK_URL}, headers=headers)

    assert refused.status_code == 409
    assert refused.json["message"].startswith("this tenant has 2 endpoints, the most it may have "
                                              "(MAX_ENDPOINTS_PER_TENANT=2)")
    assert row_counts() == before
    create_endpoint(client, auth(other_tenant))  # counted per tenant
    assert client.delete(f"/v1/endpoints/{first['id']}", headers=headers).status_code == 204
    create_endpoint(client, headers)  # a deleted endpoint does not count


def test_endpoints_created_at_once_never_pass_the_limit(make_app: Callable[..., Flask], headers: dict[str, str]) -> None:
    app = make_app(max_endpoints_per_tenant=3)

    def create(_: int) -> int:
        return app.test_client().post("/v1/endpoints", json={"url": HOOK_URL}, headers=headers).status_code

    statuses = in_threads(12, create, cleanup=db.database.close)

    assert sorted(statuses) == [201] * 3 + [409] * 9
    assert Endpoint.select().count() == 3


def test_the_endpoint_limit_is_a_setting_with_a_default_of_100() -> None:
    assert Settings.from_env(env={}).max_endpoints_per_tenant == 100
    assert Settings.from_env(env={"MAX_ENDPOINTS_PER_TENANT": "0"}).max_endpoints_per_tenant == 0
    with pytest.raises(ValueError, match="MAX_ENDPOINTS_PER_TENANT must be a whole number of endpoints"):
        Settings.from_env(env={"MAX_ENDPOINTS_PER_TENANT": "-1"})


def test_an_event_making_more_deliveries_than_the_rate_limit_allows_at_once_is_a_422(
    make_app: Callable[..., Flask], headers: dict[str, str],
) -> None:
    client = make_app(ingest_rate_limit=2.0).test_client()
    for _ in range(3):
        create_endpoint(client, headers)
    before = row_counts()

    single = post_event(client, headers)
    batch = client.post("/v1/events/batch", json=[{"event_type": "a", "payload": {}}], headers=headers)

    assert (single.status_code, batch.status_code) == (422, 422)
    assert single.json["message"].startswith("1 event makes 3 deliveries, more than the tenant's rate limit allows")
    assert row_counts() == before
