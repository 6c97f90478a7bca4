"""The ``idempotency-key`` of every POST of the Svix API: the same key and request answer the first answer
again and act no more, the same key with another request is a 409, keys are each platform key's own and
are forgotten after ``IDEMPOTENCY_TTL`` (``webhooks.svix.idempotency``, by ingestion's rules)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from svix.api import (
    AppPortalAccessIn, ApplicationCreateOptions, ApplicationIn, AuthenticationAppPortalAccessOptions,
    EndpointCreateOptions, EndpointIn, EndpointRecoverOptions, EndpointRotateSecretOptions,
    EndpointSecretRotateIn, EventTypeCreateOptions, EventTypeIn, MessageAttemptResendOptions, MessageIn,
    RecoverIn, Svix,
)

from webhooks.api.events import REPLAYED_HEADER
from webhooks.clock import expire_idempotency_keys
from webhooks.delivery.signing import shared_secret
from webhooks.ingest.auth_keys import PLATFORM, create_api_key
from webhooks.ingest.idempotency import IDEMPOTENCY_TTL
from webhooks.storage import db
from webhooks.storage.models import Delivery, Endpoint, EventType, IdempotentResponse, ManualAttempt, Tenant
from webhooks.storage.statuses import DeliveryStatus
from webhooks.storage.timeutil import utcnow
from webhooks.svix import idempotency

URL = "https://hooks.example.com/in"


def post(client: FlaskClient, path: str, auth: dict[str, str], key: str, body: Any = None) -> Any:
    return client.post(f"/api/v1{path}", json=body, headers={**auth, "idempotency-key": key})


def test_an_application_created_twice_with_one_key_is_created_once(svix_client: Svix) -> None:
    options = ApplicationCreateOptions(idempotency_key="app-1")

    first = svix_client.application.create(ApplicationIn(name="Acme", uid="cus_1"), options)
    again = svix_client.application.create(ApplicationIn(name="Acme", uid="cus_1"), options)

    assert again.id == first.id and again.created_at == first.created_at
    assert Tenant.select().where(Tenant.name == "Acme").count() == 1


def test_a_replay_is_the_first_answer_status_body_and_a_header_saying_so(client: FlaskClient,
                                                                          platform: dict[str, str]) -> None:
    first = post(client, "/app", platform, "k", {"name": "Acme"})
    again = post(client, "/app", platform, "k", {"name": "Acme"})

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.get_data() == first.get_data() and again.json["id"] == first.json["id"]
    assert REPLAYED_HEADER not in first.headers and again.headers[REPLAYED_HEADER] == "true"


def test_the_same_key_with_another_request_is_a_409_that_acts_not(client: FlaskClient,
                                                                   platform: dict[str, str]) -> None:
    post(client, "/app", platform, "k", {"name": "Acme"})

    other_body = post(client, "/app", platform, "k", {"name": "Globex"})
    other_query = client.post("/api/v1/app?get_if_exists=true", json={"name": "Acme"},
                              headers={**platform, "idempotency-key": "k"})

    assert other_body.status_code == other_query.status_code == 409
    assert other_body.json["code"] == "conflict" and "'k'" in other_body.json["detail"]
    assert [t.name for t in Tenant.select()] == ["Acme"]


def test_an_endpoint_created_twice_with_one_key_is_created_once(svix_client: Svix) -> None:
    app = svix_client.application.create(ApplicationIn(name="Acme"))
    options = EndpointCreateOptions(idempotency_key="ep-1")

    first = svix_client.endpoint.create(app.id, EndpointIn(url=URL), options)
    again = svix_client.endpoint.create(app.id, EndpointIn(url=URL), options)

    assert again.id == first.id and Endpoint.select().count() == 1


def test_a_secret_rotated_twice_with_one_key_is_rotated_once(svix_client: Svix) -> None:
    app = svix_client.application.create(ApplicationIn(name="Acme"))
    endpoint = svix_client.endpoint.create(app.id, EndpointIn(url=URL))
    original = svix_client.endpoint.get_secret(app.id, endpoint.id).key
    options = EndpointRotateSecretOptions(idempotency_key="rot-1")

    first = svix_client.endpoint.rotate_secret(app.id, endpoint.id, EndpointSecretRotateIn(), options)
    again = svix_client.endpoint.rotate_secret(app.id, endpoint.id, EndpointSecretRotateIn(), options)

    assert first.key == again.key == svix_client.endpoint.get_secret(app.id, endpoint.id).key != original
    assert shared_secret(Endpoint.get_by_id(endpoint.id).previous_secret) == original  # rotated once


def _failed_delivery(svix_client: Svix) -> tuple[str, str, str]:
    """An application, an endpoint and a message whose delivery there failed: ``(app id, endpoint id, msg id)``."""
    app = svix_client.application.create(ApplicationIn(name="Acme"))
    endpoint = svix_client.endpoint.create(app.id, EndpointIn(url=URL))
    message = svix_client.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1}))
    Delivery.update(status=DeliveryStatus.FAILED).execute()
    return app.id, endpoint.id, message.id


def test_a_recover_asked_twice_with_one_key_recovers_once(svix_client: Svix) -> None:
    app_id, endpoint_id, _ = _failed_delivery(svix_client)
    since = RecoverIn(since=datetime.now(timezone.utc) - timedelta(hours=1))
    options = EndpointRecoverOptions(idempotency_key="rec-1")

    first = svix_client.endpoint.recover(app_id, endpoint_id, since, options)
    again = svix_client.endpoint.recover(app_id, endpoint_id, since, options)

    assert again.id == first.id and ManualAttempt.select().count() == 1


def test_a_resend_asked_twice_with_one_key_resends_once(svix_client: Svix) -> None:
    app_id, endpoint_id, msg_id = _failed_delivery(svix_client)
    options = MessageAttemptResendOptions(idempotency_key="res-1")

    svix_client.message_attempt.resend(app_id, msg_id, endpoint_id, options)
    svix_client.message_attempt.resend(app_id, msg_id, endpoint_id, options)

    assert ManualAttempt.select().count() == 1
    svix_client.message_attempt.resend(app_id, msg_id, endpoint_id, MessageAttemptResendOptions(idempotency_key="res-2"))
    assert ManualAttempt.select().count() == 2


def test_an_event_type_created_twice_with_one_key_is_201_twice_not_a_409(svix_client: Svix, client: FlaskClient,
                                                                         platform: dict[str, str]) -> None:
    options = EventTypeCreateOptions(idempotency_key="et-1")

    first = svix_client.event_type.create(EventTypeIn(name="order.paid", description="Paid"), options)
    again = svix_client.event_type.create(EventTypeIn(name="order.paid", description="Paid"), options)
    other = post(client, "/event-type", platform, "et-1", {"name": "order.paid", "description": "Other"})

    assert again.created_at == first.created_at and EventType.get_by_id("order.paid").description == "Paid"
    assert other.status_code == 409


def test_portal_access_asked_twice_with_one_key_makes_one_link(svix_client: Svix) -> None:
    app = svix_client.application.create(ApplicationIn(name="Acme"))
    options = AuthenticationAppPortalAccessOptions(idempotency_key="portal-1")

    first = svix_client.authentication.app_portal_access(app.id, AppPortalAccessIn(), options)
    again = svix_client.authentication.app_portal_access(app.id, AppPortalAccessIn(), options)
    fresh = svix_client.authentication.app_portal_access(app.id, AppPortalAccessIn())

    assert again.url == first.url != fresh.url


def test_keys_are_each_platform_keys_own(client: FlaskClient, platform: dict[str, str],
                                         platform_key: SimpleNamespace) -> None:
    with db.write():
        _, other_key = create_api_key(PLATFORM, "other backend")
    other = {"Authorization": f"Bearer {other_key}"}

    mine = post(client, "/app", platform, "k", {"name": "Acme"})
    theirs = post(client, "/app", other, "k", {"name": "Globex"})

    assert (mine.status_code, theirs.status_code) == (201, 201) and theirs.json["id"] != mine.json["id"]


def test_an_error_answer_is_not_kept_so_the_corrected_request_acts(client: FlaskClient,
                                                                  platform: dict[str, str]) -> None:
    bad = post(client, "/app", platform, "k", {"name": ""})
    retried = post(client, "/app", platform, "k", {"name": ""})
    corrected = post(client, "/app", platform, "k", {"name": "Acme"})

    assert (bad.status_code, retried.status_code, corrected.status_code) == (422, 422, 201)
    assert REPLAYED_HEADER not in retried.headers


def test_a_key_is_forgotten_after_its_ttl_and_the_clock_deletes_it(client: FlaskClient,
                                                                  platform: dict[str, str]) -> None:
    first = post(client, "/app", platform, "k", {"name": "Acme"})
    IdempotentResponse.update(created_at=utcnow() - IDEMPOTENCY_TTL - timedelta(minutes=1)).execute()

    again = post(client, "/app", platform, "k", {"name": "Globex"})
    assert again.status_code == 201 and again.json["id"] != first.json["id"]

    IdempotentResponse.update(created_at=utcnow() - IDEMPOTENCY_TTL - timedelta(minutes=1)).execute()
    assert expire_idempotency_keys() == 1 and not IdempotentResponse.select().exists()


def in_flight(app: Flask, platform_key: SimpleNamespace, body: dict[str, Any]) -> IdempotentResponse:
    """The row of a first request with key ``k`` and ``body`` to ``POST /api/v1/app``, still being answered."""
    with app.test_request_context("/api/v1/app", method="POST", json=body):
        digest = idempotency._request_fingerprint()
    with db.write():
        return IdempotentResponse.create(api_key=platform_key.id, key="k", request_hash=digest)


def test_a_repeat_waits_for_the_answer_of_its_first_request(app: Flask, client: FlaskClient,
                                                             platform: dict[str, str],
                                                             platform_key: SimpleNamespace) -> None:
    row = in_flight(app, platform_key, {"name": "Acme"})

    def answer() -> None:  # the first request answers while the repeat waits (or before it asks: the same)
        time.sleep(0.2)
        with db.database.connection_context():
            IdempotentResponse.update(status=201, body='{"id": "app_first"}').where(
                IdempotentResponse.id == row.id).execute()

    first = threading.Thread(target=answer)
    first.start()
    repeat = post(client, "/app", platform, "k", {"name": "Acme"})
    first.join()

    assert repeat.status_code == 201 and repeat.json == {"id": "app_first"} and not Tenant.select().exists()


def test_a_key_whose_first_request_never_answered_is_a_409_then_taken_over(
        app: Flask, client: FlaskClient, platform: dict[str, str], platform_key: SimpleNamespace,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idempotency, "IN_FLIGHT_WAIT", 0.1)
    row = in_flight(app, platform_key, {"name": "Acme"})

    waited = post(client, "/app", platform, "k", {"name": "Acme"})
    assert waited.status_code == 409 and "still being answered" in waited.json["detail"]
    assert not Tenant.select().exists()

    IdempotentResponse.update(created_at=utcnow() - idempotency.STALE_START - timedelta(seconds=1)).where(
        IdempotentResponse.id == row.id).execute()
    taken_over = post(client, "/app", platform, "k", {"name": "Acme"})
    assert taken_over.status_code == 201 and Tenant.select().count() == 1


@pytest.mark.parametrize("key", ["x" * 256])
def test_a_key_too_long_is_a_422_naming_the_header(client: FlaskClient, platform: dict[str, str], key: str) -> None:
    response = post(client, "/app", platform, key, {"name": "Acme"})

    assert response.status_code == 422 and response.json["detail"][0]["loc"] == ["header", "idempotency-key"]
    assert not Tenant.select().exists()


def test_a_message_keeps_its_key_as_ingestion_does(svix_client: Svix, client: FlaskClient,
                                                   platform: dict[str, str]) -> None:
    app = svix_client.application.create(ApplicationIn(name="Acme"))

    first = post(client, f"/app/{app.id}/msg", platform, "m-1", {"eventType": "a.b", "payload": {"n": 1}})
    again = post(client, f"/app/{app.id}/msg", platform, "m-1", {"eventType": "a.b", "payload": {"n": 1}})

    assert again.json["id"] == first.json["id"]
    assert not IdempotentResponse.select().where(IdempotentResponse.key == "m-1").exists()  # the event's key only
