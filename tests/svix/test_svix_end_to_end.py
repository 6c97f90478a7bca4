"""End to end with the official Python SDK: get-or-create an application by uid, create an endpoint, send
a message; a real receiver verifies it with ``standardwebhooks``; list its attempts and resend it."""

from __future__ import annotations

from typing import Callable
from urllib.parse import urlsplit

from flask.testing import FlaskClient

from standardwebhooks import Webhook
from svix.api import AppPortalAccessIn, ApplicationIn, EndpointIn, MessageAttemptListByMsgOptions, MessageIn, Svix

from tests.conftest import wait_until
from tests.receivers import Receiver
from webhooks.config import Settings


def test_the_sdk_sends_a_verified_webhook_lists_its_attempt_and_resends_it(
        svix_client: Svix, settings: Settings, start_worker: Callable[[Settings], object]) -> None:
    with Receiver() as receiver:
        app = svix_client.application.get_or_create(ApplicationIn(name="Acme", uid="cus_42"))
        endpoint = svix_client.endpoint.create("cus_42", EndpointIn(url=receiver.url + "/hook", uid="main"))
        start_worker(settings)

        message = svix_client.message.create(app.uid, MessageIn(event_type="order.paid", payload={"amount": 5}))

        request = receiver.wait_for(1, timeout=15)[0]
        secret = svix_client.endpoint.get_secret("cus_42", "main").key
        verified = Webhook(secret).verify(request.body, dict(request.headers))
        assert verified["type"] == "order.paid" and verified["data"] == {"amount": 5}
        assert request.headers["webhook-id"] == message.id

        attempts = wait_until(lambda: svix_client.message_attempt.list_by_msg(app.id, message.id).data)
        assert [(a.status, a.status_text, a.trigger_type, a.endpoint_id) for a in attempts] == [
            (0, "success", 0, endpoint.id)]
        assert svix_client.message_attempt.get(app.id, message.id, attempts[0].id).response_status_code == 200

        svix_client.message_attempt.resend(app.id, message.id, "main")
        assert receiver.wait_for(2, timeout=15)[1].headers["webhook-id"] == message.id
        def two_attempts() -> list | None:
            page = svix_client.message_attempt.list_by_msg(
                app.id, message.id, MessageAttemptListByMsgOptions(endpoint_id="main")).data
            return page if len(page) == 2 else None

        both = wait_until(two_attempts)
        assert [a.trigger_type for a in both] == [1, 0]
        by_endpoint = svix_client.message_attempt.list_by_endpoint(app.id, endpoint.id).data
        assert {a.id for a in by_endpoint} == {a.id for a in both}


def test_the_portal_link_opens_our_portal_for_the_application(svix_client: Svix, client: FlaskClient) -> None:
    svix_client.application.create(ApplicationIn(name="Acme", uid="cus_42"))

    link = svix_client.authentication.app_portal_access("cus_42", AppPortalAccessIn(capabilities=["ViewBase"]))

    assert link.url.endswith(link.token)
    opened = client.get(urlsplit(link.url).path)
    assert opened.status_code in (302, 303), opened.status_code
    assert client.get(opened.headers["Location"]).status_code == 200
