"""The Svix API's endpoints are our endpoints: the official SDK creates, lists, reads (by id or uid),
replaces, patches and deletes them, reads and rotates their secret, and recovers what failed; an endpoint's
channels are kept, and fan-out passes an endpoint with channels by (our messages carry none)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from flask.testing import FlaskClient
from svix.api import (
    ApplicationIn, EndpointIn, EndpointListOptions, EndpointPatch, EndpointSecretRotateIn, EndpointUpsertIn,
    MessageIn, RecoverIn, Svix,
)
from svix.api.errors.http_error import HttpError
from svix.api.errors.http_validation_error import HTTPValidationError

from webhooks.storage.models import Delivery

URL = "https://hooks.example.com/in"


@pytest.fixture
def app_id(svix_client: Svix) -> str:
    return svix_client.application.create(ApplicationIn(name="Acme", uid="cus_42")).id


def test_an_endpoint_is_one_of_ours_read_by_id_or_uid(svix_client: Svix, app_id: str, client: FlaskClient,
                                                       platform: dict[str, str]) -> None:
    endpoint = svix_client.endpoint.create("cus_42", EndpointIn(url=URL, uid="main", event_types=["order.paid"],
                                                                 description="Orders", metadata={"team": "a"}))

    assert endpoint.id.startswith("ep_") and endpoint.uid == "main" and endpoint.event_types == ["order.paid"]
    assert svix_client.endpoint.get("cus_42", "main").id == endpoint.id == svix_client.endpoint.get(app_id, endpoint.id).id
    ours = client.get(f"/v1/tenants/cus_42/endpoints/{endpoint.id}", headers=platform).json
    assert ours["url"] == URL and ours["event_types"] == ["order.paid"] and ours["description"] == "Orders"
    listed = svix_client.endpoint.list("cus_42", EndpointListOptions(limit=10))
    assert [row.id for row in listed.data] == [endpoint.id] and listed.done


def test_both_names_of_event_types_and_rate_are_taken_and_returned(client: FlaskClient, app_id: str,
                                                                   platform: dict[str, str]) -> None:
    response = client.post(f"/api/v1/app/{app_id}/endpoint", headers=platform,
                           json={"url": URL, "filterTypes": ["a.b"], "rateLimit": 5})

    assert response.status_code == 201
    assert response.json["eventTypes"] == response.json["filterTypes"] == ["a.b"]
    assert response.json["throttleRate"] == response.json["rateLimit"] == 5


def test_an_endpoint_is_patched_replaced_and_deleted(svix_client: Svix, app_id: str) -> None:
    endpoint = svix_client.endpoint.create(app_id, EndpointIn(url=URL, uid="main", description="Orders"))

    patched = svix_client.endpoint.patch(app_id, "main", EndpointPatch(disabled=True, throttle_rate=10))
    assert patched.disabled and patched.throttle_rate == 10 and patched.description == "Orders"
    replaced = svix_client.endpoint.upsert(app_id, "main", EndpointUpsertIn(url=URL + "/2", uid="main"))
    assert replaced.id == endpoint.id and replaced.url == URL + "/2" and replaced.description == ""
    created = svix_client.endpoint.upsert(app_id, "second", EndpointUpsertIn(url=URL))
    assert created.uid == "second" and created.id != endpoint.id

    svix_client.endpoint.delete(app_id, "main")
    with pytest.raises(HttpError) as error:
        svix_client.endpoint.get(app_id, "main")
    assert error.value.status_code == 404


def test_the_secret_is_read_given_and_rotated(svix_client: Svix, app_id: str) -> None:
    given = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    endpoint = svix_client.endpoint.create(app_id, EndpointIn(url=URL, secret=given))
    assert svix_client.endpoint.get_secret(app_id, endpoint.id).key == given

    svix_client.endpoint.rotate_secret(app_id, endpoint.id, EndpointSecretRotateIn())
    rotated = svix_client.endpoint.get_secret(app_id, endpoint.id).key
    assert rotated.startswith("whsec_") and rotated != given


def test_recover_is_a_finished_task(svix_client: Svix, app_id: str) -> None:
    endpoint = svix_client.endpoint.create(app_id, EndpointIn(url=URL))

    task = svix_client.endpoint.recover(app_id, endpoint.id,
                                        RecoverIn(since=datetime.now(timezone.utc) - timedelta(hours=1)))
    assert task.status == "finished" and task.task == "endpoint.recover"


def test_bad_endpoints_are_svix_422s_and_a_taken_uid_a_409(svix_client: Svix, app_id: str, client: FlaskClient,
                                                          platform: dict[str, str]) -> None:
    svix_client.endpoint.create(app_id, EndpointIn(url=URL, uid="main"))

    with pytest.raises(HttpError) as taken:
        svix_client.endpoint.create(app_id, EndpointIn(url=URL, uid="main"))
    assert taken.value.status_code == 409
    with pytest.raises(HTTPValidationError):
        svix_client.endpoint.create(app_id, EndpointIn(url="ftp://nowhere"))
    for channels in (["a b"], ["x", "x"], [f"c{n}" for n in range(11)], "x"):
        bad = client.post(f"/api/v1/app/{app_id}/endpoint", json={"url": URL, "channels": channels}, headers=platform)
        assert bad.status_code == 422 and bad.json["detail"][0]["loc"] == ["body", "channels"], channels
    headers = client.post(f"/api/v1/app/{app_id}/endpoint", json={"url": URL, "headers": {"a": "b"}}, headers=platform)
    assert headers.status_code == 422 and headers.json["detail"][0]["loc"] == ["body", "headers"]
    bad_uid = client.post(f"/api/v1/app/{app_id}/endpoint", json={"url": URL, "uid": "a b"}, headers=platform)
    assert bad_uid.status_code == 422 and bad_uid.json["detail"][0]["loc"] == ["body", "uid"]


def test_channels_are_kept_by_a_patch_cleared_by_a_put_and_fan_out_passes_such_an_endpoint_by(
        svix_client: Svix, app_id: str) -> None:
    listening = svix_client.endpoint.create(app_id, EndpointIn(url=URL, uid="listening", channels=["ch1", "ch0"]))
    every = svix_client.endpoint.create(app_id, EndpointIn(url=URL, uid="every"))
    assert listening.channels == ["ch0", "ch1"] and every.channels is None

    patched = svix_client.endpoint.patch(app_id, "listening", EndpointPatch(description="Orders"))
    assert patched.channels == ["ch0", "ch1"] and svix_client.endpoint.get(app_id, "listening").channels == ["ch0", "ch1"]

    message = svix_client.message.create(app_id, MessageIn(event_type="order.paid", payload={}))
    sent_to = {row.endpoint_id for row in Delivery.select().where(Delivery.event == message.id)}
    assert sent_to == {every.id}  # a message without channels skips an endpoint with channels, as on Svix

    replaced = svix_client.endpoint.upsert(app_id, "listening", EndpointUpsertIn(url=URL))
    assert replaced.channels is None
    again = svix_client.message.create(app_id, MessageIn(event_type="order.paid", payload={}))
    assert {row.endpoint_id for row in Delivery.select().where(Delivery.event == again.id)} == {every.id, listening.id}
