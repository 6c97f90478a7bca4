"""End to end: a real worker signs for a real receiver, through a rotation and its overlap (v1 and v1a)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import svix
from flask import Flask
from flask.testing import FlaskClient
from standardwebhooks import Webhook, WebhookVerificationError

from tests.api_helpers import create_endpoint, post_event
from tests.receivers import Receiver, RecordedRequest
from tests.verifiers import V1aVerificationError, verify_v1a
from webhooks.config import Settings

#: Seconds both keys sign after a rotation in these tests (production: 24 h).
OVERLAP = 2.0


@pytest.fixture
def overlap_client(make_app: Callable[..., Flask]) -> FlaskClient:
    """A client of an app whose rotations overlap for ``OVERLAP`` seconds."""
    return make_app(secret_rotation_overlap=OVERLAP).test_client()


def deliver_one(client: FlaskClient, headers: dict[str, str], receiver: Receiver) -> RecordedRequest:
    """Send an event and return the request the receiver got for it."""
    before = len(receiver.requests)
    event = post_event(client, headers, payload={"n": before}).json
    request = receiver.wait_for(before + 1, timeout=10)[before]
    assert request.headers["webhook-id"] == event["id"]
    return request


def versions(request: RecordedRequest) -> list[str]:
    return [signature.split(",")[0] for signature in request.headers["webhook-signature"].split(" ")]


def rotate(client: FlaskClient, headers: dict[str, str], endpoint_id: str, **body: Any) -> tuple[dict[str, Any], float]:
    """Rotate the endpoint's key; the answer and the monotonic time the overlap ends (at the latest)."""
    response = client.post(f"/v1/endpoints/{endpoint_id}/secret/rotate", json=body, headers=headers)
    assert response.status_code == 200, response.json
    return response.json, time.monotonic() + OVERLAP


def wait_past(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()) + 0.2)


def verified_by_official_libraries(secret: str, request: RecordedRequest) -> bool:
    """True when both ``standardwebhooks`` and ``svix`` accept the request as received; False when both refuse."""
    verdicts = []
    for verify, error in (
        (Webhook(secret).verify, WebhookVerificationError),
        (svix.Webhook(secret).verify, svix.webhooks.WebhookVerificationError),
    ):
        try:
            verify(request.body, dict(request.headers))
            verdicts.append(True)
        except error:
            verdicts.append(False)
    assert verdicts[0] == verdicts[1], verdicts
    return verdicts[0]


def test_a_v1_rotation_signs_with_both_secrets_for_the_overlap_then_only_with_the_new_one(
    overlap_client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    settings: Settings,
    start_worker: Callable[[Settings], object],
) -> None:
    headers = auth(tenant)
    with Receiver() as receiver:
        endpoint = create_endpoint(overlap_client, headers, url=receiver.url + "/hook")
        old = endpoint["secret"]
        start_worker(settings)

        before = deliver_one(overlap_client, headers, receiver)
        assert versions(before) == ["v1"]
        assert verified_by_official_libraries(old, before)

        answer, overlap_ends = rotate(overlap_client, headers, endpoint["id"])
        new = answer["secret"]
        during = deliver_one(overlap_client, headers, receiver)
        assert time.monotonic() < overlap_ends, "the delivery came after the overlap: the test proves nothing"
        assert versions(during) == ["v1", "v1"]
        assert verified_by_official_libraries(old, during)
        assert verified_by_official_libraries(new, during)

        wait_past(overlap_ends)
        after = deliver_one(overlap_client, headers, receiver)
        assert versions(after) == ["v1"]
        assert verified_by_official_libraries(new, after)
        assert not verified_by_official_libraries(old, after)


def test_a_v1a_endpoint_is_verified_with_its_public_key_alone_through_a_rotation(
    overlap_client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    settings: Settings,
    start_worker: Callable[[Settings], object],
) -> None:
    headers = auth(tenant)
    with Receiver() as receiver:
        endpoint = create_endpoint(overlap_client, headers, url=receiver.url + "/hook", signature_scheme="v1a")
        assert (endpoint["signature_scheme"], endpoint["secret"]) == ("v1a", None)
        shown = overlap_client.get(f"/v1/endpoints/{endpoint['id']}/secret", headers=headers).json
        assert shown == {"secret": None, "public_key": endpoint["public_key"], "scheme": "v1a"}
        old = endpoint["public_key"]
        start_worker(settings)

        before = deliver_one(overlap_client, headers, receiver)
        assert versions(before) == ["v1a"]
        assert verify_v1a(old, before.body, before.headers)["data"] == {"n": 0}

        answer, overlap_ends = rotate(overlap_client, headers, endpoint["id"])
        assert answer["scheme"] == "v1a" and answer["secret"] is None
        new = answer["public_key"]
        assert new != old
        during = deliver_one(overlap_client, headers, receiver)
        assert time.monotonic() < overlap_ends, "the delivery came after the overlap: the test proves nothing"
        assert versions(during) == ["v1a", "v1a"]
        for public_key in (old, new):
            verify_v1a(public_key, during.body, during.headers)

        wait_past(overlap_ends)
        after = deliver_one(overlap_client, headers, receiver)
        assert versions(after) == ["v1a"]
        verify_v1a(new, after.body, after.headers)
        with pytest.raises(V1aVerificationError):
            verify_v1a(old, after.body, after.headers)


def test_a_v1_endpoint_switches_to_v1a_without_a_gap(
    overlap_client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    settings: Settings,
    start_worker: Callable[[Settings], object],
) -> None:
    headers = auth(tenant)
    with Receiver() as receiver:
        endpoint = create_endpoint(overlap_client, headers, url=receiver.url + "/hook")
        start_worker(settings)

        answer, overlap_ends = rotate(overlap_client, headers, endpoint["id"], scheme="v1a")
        during = deliver_one(overlap_client, headers, receiver)
        assert time.monotonic() < overlap_ends, "the delivery came after the overlap: the test proves nothing"

        assert versions(during) == ["v1a", "v1"]
        assert verified_by_official_libraries(endpoint["secret"], during)  # receivers not yet switched
        verify_v1a(answer["public_key"], during.body, during.headers)  # receivers already switched
