"""The console in a real headless Chromium: log in, find an event, read its timeline, resend, replay.

Runs a real HTTP server (werkzeug) for the app, a real in-process worker, real local receivers.
Screenshots of the overview and the event page are saved under ``artifacts/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.browser import ARTIFACTS, logged_in_page
from tests.conftest import wait_until
from tests.console_helpers import staff
from tests.receivers import Receiver, always, sequence
from tests.api_helpers import create_endpoint, send
from webhooks.storage.models import Delivery, Endpoint

def reload_until(page: Page, done: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{page.url} did not reach the expected state in {timeout} s"
        time.sleep(0.3)
        page.reload()


def status_of(event_id: str, status: str) -> Callable[[], Delivery | None]:
    return lambda: Delivery.get_or_none(Delivery.event == event_id, Delivery.status == status)


def test_support_finds_an_event_reads_its_timeline_resends_and_replays_dead_letters(
    browser, base_url, client, tenant, auth, settings, start_worker
) -> None:
    operator, viewer = staff("operator"), staff("viewer")
    ARTIFACTS.mkdir(exist_ok=True)
    with Receiver(sequence([500, 500, 200])) as flaky, Receiver(always(503)) as down:
        create_endpoint(client, auth(tenant), flaky.url + "/hooks/orders", event_types=["order.created"])
        # Two endpoints on the failing receiver, so neither reaches OFFLINE_AFTER_FAILURES and parks.
        for kind in ("invoice", "refund"):
            create_endpoint(client, auth(tenant), f"{down.url}/hooks/{kind}s", event_types=[f"{kind}.created"])
        start_worker(settings)
        event = send(client, auth(tenant), "order.created", payload={"order_id": 42, "note": "<b>not bold</b>"})
        dead = [send(client, auth(tenant), f"{kind}.created", payload={"n": 1})["id"] for kind in ("invoice", "refund")]
        delivery = wait_until(status_of(event["id"], "delivered"), timeout=15)
        dead_ids = [wait_until(status_of(event_id, "failed"), timeout=15).id for event_id in dead]

        page = logged_in_page(browser, base_url, operator.email)
        page.screenshot(path=str(ARTIFACTS / "console-overview.png"), full_page=True)

        # "evt_… never arrived": search the id, see three attempts (failed twice, then delivered).
        page.get_by_label("Search").fill(event["id"])
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{base_url}/console/events/{event['id']}")
        timeline = page.locator(f"[id='{delivery.id}']")
        expect(timeline.locator("tr.attempt")).to_have_count(3)
        expect(timeline.locator("tr.attempt td:nth-child(5)")).to_have_text(["500", "500", "200"])
        expect(page.locator("pre.payload")).to_contain_text('"note": "<b>not bold</b>"')  # shown as text
        timeline.get_by_text("Request and response of attempt 1").click()
        expect(timeline.get_by_text("webhook-signature: v1,").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "console-event.png"), full_page=True)

        timeline.get_by_role("button", name="Resend").click()
        expect(page.get_by_text(f"Resend of {delivery.id} queued")).to_be_visible()
        reload_until(page, lambda: page.locator(f"[id='{delivery.id}'] tr.attempt").count() == 4)
        expect(page.locator(f"[id='{delivery.id}'] tr.attempt").last).to_contain_text("manual resend")
        assert len(flaky.requests) == 4

        # The customer fixed their endpoint: replay one dead letter, then "all matching" for the rest.
        down.responder = always(200)
        page.get_by_role("link", name="Dead letters").click()
        expect(page.get_by_text("2 dead letters match")).to_be_visible()
        page.get_by_role("button", name=f"Replay {dead_ids[0]}").click()
        expect(page.get_by_text(f"Replay of {dead_ids[0]} queued")).to_be_visible()
        wait_until(status_of(dead[0], "delivered"), timeout=10)
        page.reload()
        page.get_by_role("button", name="Replay all 1 matching").click()
        expect(page.locator("progress")).to_be_visible()
        expect(page.get_by_text("1 of 1 replayed (100%)")).to_be_visible(timeout=10_000)
        page.goto(f"{base_url}/console/events/{dead[1]}")
        reload_until(page, lambda: page.locator(f"[id='{dead_ids[1]}'] .badge").first.inner_text() == "delivered")
        expect(page.locator(f"[id='{dead_ids[1]}'] tr.attempt").last).to_contain_text("recover / replay")

        # A viewer sees what happened and who did it, but no operator buttons.
        as_viewer = logged_in_page(browser, base_url, viewer.email)
        as_viewer.goto(f"{base_url}/console/events/{event['id']}")
        expect(as_viewer.locator(f"[id='{delivery.id}'] tr.attempt")).to_have_count(4)
        expect(as_viewer.get_by_role("button", name="Resend")).to_have_count(0)
        expect(as_viewer.get_by_text(operator.email).first).to_be_visible()  # the resend, in the audit list
        as_viewer.goto(f"{base_url}/console/endpoints/{delivery.endpoint_id}")
        expect(as_viewer.get_by_role("button", name="Disable endpoint")).to_have_count(0)
        expect(as_viewer.locator("svg.chart")).to_have_count(2)
        as_viewer.goto(f"{base_url}/console/dead-letters")
        expect(as_viewer.get_by_text("No dead letters")).to_be_visible()
        expect(as_viewer.get_by_role("button", name="Replay")).to_have_count(0)


def test_the_event_page_lists_who_resent_and_shows_no_next_attempt_once_delivered(
    browser, base_url, client, tenant, auth, make_settings, start_worker
) -> None:
    operator = staff("operator")
    settings = make_settings(ladder="30m")  # after the first failure, the next ladder attempt is 30 minutes out
    with Receiver(sequence([500, 200, 200])) as receiver:
        create_endpoint(client, auth(tenant), receiver.url + "/hooks/orders")
        start_worker(settings)
        event = send(client, auth(tenant), payload={"order_id": 42})
        delivery = wait_until(status_of(event["id"], "retrying"), timeout=15)
        page = logged_in_page(browser, base_url, operator.email)
        page.goto(f"{base_url}/console/events/{event['id']}")
        expect(page.get_by_text("No one has resent or recovered this event's deliveries")).to_be_visible()
        first_next = page.locator(f"[id='{delivery.id}'] tr.attempt").first.locator("td").last
        expect(first_next).to_contain_text("in 29 min")  # still due: shown

        assert client.post(f"/v1/deliveries/{delivery.id}/resend", headers=auth(tenant)).status_code == 202
        wait_until(status_of(event["id"], "delivered"), timeout=15)
        page.reload()
        page.locator(f"[id='{delivery.id}']").get_by_role("button", name="Resend").click()
        expect(page.get_by_text(f"Resend of {delivery.id} queued")).to_be_visible()
        wait_until(lambda: Delivery.get_by_id(delivery.id).attempts == 3, timeout=15)
        page.reload()

        timeline = page.locator(f"[id='{delivery.id}'] tr.attempt")
        expect(timeline).to_have_count(3)
        expect(page.locator(f"[id='{delivery.id}'] .badge").first).to_have_text("delivered")
        expect(timeline.first.locator("td").last).to_have_text("— attempt 2 followed")
        expect(page.locator("main")).not_to_contain_text("in 29 min")
        expect(page.get_by_text("No one has resent")).to_have_count(0)
        requests = page.locator("tr.manual-request")
        expect(requests).to_have_count(2)
        expect(requests.nth(0)).to_contain_text(f"{operator.email} (staff)")
        expect(requests.nth(1)).to_contain_text(f"tenant API key “default” ({tenant.api_key.partition('.')[0]})")
        expect(timeline.nth(1)).to_contain_text("asked by tenant API key")
        expect(timeline.nth(2)).to_contain_text(f"asked by {operator.email}")
        page.screenshot(path=str(ARTIFACTS / "console-event-resends.png"), full_page=True)


def test_try_now_brings_back_an_offline_endpoint_whose_receiver_is_up_again(
    browser, base_url, client, tenant, auth, make_settings, start_worker
) -> None:
    from tests.health.health_helpers import Switch, statuses, take_offline

    operator = staff("operator")
    # Probes an hour apart and no clock running: only "Try now" can bring it back in this test.
    settings = make_settings(probe_interval="1h", release_rate=40.0)
    switch = Switch()
    with Receiver(switch) as receiver:
        start_worker(settings)
        endpoint, events = take_offline(client, auth(tenant), receiver.url + "/hooks", 6, parked=6)
        page = logged_in_page(browser, base_url, operator.email)
        page.goto(f"{base_url}/console/endpoints/{endpoint['id']}")
        expect(page.get_by_text("Next probe", exact=True)).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "console-endpoint-offline.png"), full_page=True)

        switch.up = True
        page.get_by_role("button", name="Try now").click()
        expect(page.get_by_text(f"Probe of {endpoint['id']} queued")).to_be_visible()
        wait_until(lambda: Delivery.get(Delivery.event == events[0]).status == "delivered", timeout=10)
        page.reload()  # the probe delivered the oldest: the endpoint is back and releases the rest
        expect(page.get_by_role("button", name="Try now")).to_have_count(0)
        expect(page.get_by_text("an attempt succeeded")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "console-endpoint-back.png"), full_page=True)
    assert statuses(endpoint["id"]) == {"delivered": 1, "parked": 5}  # the clock releases the rest, in order
    assert Endpoint.get_by_id(endpoint["id"]).health == "recovering"
