"""A RabbitMQ endpoint's failed attempts in the console, in a real headless Chromium: the broker's refusal in
words (``unroutable``: the exchange routed the message to no queue), the URL with its password masked.

A real worker publishes to a vhost of the test's own with a routing key no queue is bound to. The
screenshot goes to ``artifacts/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from tests.api_helpers import create_endpoint, send
from tests.browser import ARTIFACTS, logged_in_page
from tests.conftest import wait_until
from tests.console_helpers import staff
from tests.delivery.destination_helpers import own_vhost
from webhooks.storage.models import Delivery


@pytest.fixture
def broker() -> Iterator[SimpleNamespace]:
    """A vhost and user of the test's own, with the exchange ``orders`` bound to a queue by ``order.created``."""
    with own_vhost("orders", "order.created") as vhost:
        yield vhost


def test_an_unroutable_publish_reads_in_the_console_as_a_message_no_queue_took(
        browser: Any, base_url: str, client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any,
        broker: SimpleNamespace) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    create_endpoint(client, auth(tenant), f"amqp://{broker.user}:{broker.password}@127.0.0.1:5672/"
                                          f"{quote(broker.vhost, safe='')}?exchange=orders&routing_key=nobody.listens")
    start_worker(make_settings(ladder="1s,1s"))
    event = send(client, auth(tenant), "order.created", {"order": 42})
    delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.attempts >= 2),
                          timeout=15)

    page = logged_in_page(browser, base_url, staff("operator").email)
    page.goto(f"{base_url}/console/events/{event['id']}")
    timeline = page.locator(f"[id='{delivery.id}']")
    expect(timeline.locator("tr.attempt").first).to_contain_text("the exchange routed the message to no queue")
    expect(timeline).not_to_contain_text(broker.password)
    page.screenshot(path=str(ARTIFACTS / "console-event-unroutable.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    expect(timeline.locator("tr.attempt").first).to_contain_text("the exchange routed the message to no queue")
    page.screenshot(path=str(ARTIFACTS / "console-event-unroutable-390.png"), full_page=True)
