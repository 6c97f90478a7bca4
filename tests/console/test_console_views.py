"""Console pages: search, the event timeline, endpoint health, the overview, 404s and escaping."""

from __future__ import annotations

from datetime import timedelta

from flask.testing import FlaskClient

from tests.api_helpers import DEAD_AMQP_URL, create_endpoint, make_attempt, post_event
from tests.console_helpers import failed_delivery, log_in, post_form
from webhooks.storage import endpoint_windows
from webhooks.storage.models import Delivery, Endpoint, HealthChange, ManualAttempt
from webhooks.storage.timeutil import utcnow
from webhooks.tenants import create_tenant, delete_tenant

XSS = "<script>alert(1)</script>"


def page(client: FlaskClient, path: str, status: int = 200) -> str:
    response = client.get(path)
    assert response.status_code == status, (path, response.status_code)
    return response.get_data(as_text=True)


# --- find ---------------------------------------------------------------------------------


def test_searching_an_event_delivery_or_endpoint_id_opens_its_page(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers)
    log_in(client, "viewer")

    by_event = client.get(f"/console/search?q={delivery.event_id}")
    by_delivery = client.get(f"/console/search?q=+{delivery.id}+")
    by_endpoint = client.get(f"/console/search?q={delivery.endpoint_id}")

    assert by_event.headers["Location"] == f"/console/events/{delivery.event_id}"
    assert by_delivery.headers["Location"] == f"/console/deliveries/{delivery.id}"
    assert client.get(by_delivery.headers["Location"]).headers["Location"] == (
        f"/console/events/{delivery.event_id}#{delivery.id}")
    assert by_endpoint.headers["Location"] == f"/console/endpoints/{delivery.endpoint_id}"


def test_an_unknown_event_id_explains_what_that_means(client: FlaskClient, database_url) -> None:
    log_in(client, "viewer")

    html = page(client, "/console/search?q=evt_01m80h419wv1rc4e9x24x24f11")

    assert "Nothing has the id" in html and "never accepted it" in html


def test_search_by_url_fragment_or_tenant_name_lists_matching_deliveries_and_endpoints(client: FlaskClient, tenant, headers) -> None:
    create_endpoint(client, headers, url="http://127.0.0.1:9/orders-hook")
    event = post_event(client, headers).json
    log_in(client, "viewer")

    by_url = page(client, "/console/search?q=orders-hook")
    by_tenant = page(client, "/console/search?q=acm")

    assert event["deliveries"][0]["id"] in by_url and "http://127.0.0.1:9/orders-hook" in by_url
    assert event["deliveries"][0]["id"] in by_tenant and f"tenant={tenant.id}" in by_tenant
    assert "No deliveries match" in page(client, "/console/search?q=no-such-thing")


def test_search_lists_live_tenants_by_name_or_uid_and_never_a_deleted_one(client: FlaskClient, database_url) -> None:
    kept = create_tenant("Globex kept", uid="globex-kept")
    gone = create_tenant("Globex gone", uid="globex-gone")
    delete_tenant(gone)
    log_in(client, "viewer")

    by_name = page(client, "/console/search?q=Globex")
    by_uid = page(client, "/console/search?q=globex-kept")

    assert kept.id in by_name and "Globex kept" in by_name
    assert gone.id not in by_name and "Globex gone" not in by_name
    assert kept.id in by_uid


def test_search_filters_by_status_event_type_and_time_range(client: FlaskClient, headers) -> None:
    failed = failed_delivery(client, headers, event_type="invoice.paid")
    pending = post_event(client, headers, event_type="order.created").json["deliveries"][0]["id"]
    log_in(client, "viewer")

    assert failed.id in page(client, "/console/search?status=failed") and pending not in page(client, "/console/search?status=failed")
    assert pending in page(client, "/console/search?event_type=order.created")
    assert failed.id not in page(client, "/console/search?event_type=order.created")
    assert pending in page(client, "/console/search?since=1h")
    assert pending not in page(client, "/console/search?until=2000-01-01T00:00")
    assert "not a time" in page(client, "/console/search?since=yesterday-ish", status=400)
    assert "unknown status" in page(client, "/console/search?status=lost", status=400)


def test_results_are_paged_newest_first(client: FlaskClient, headers) -> None:
    create_endpoint(client, headers)
    ids = [post_event(client, headers).json["deliveries"][0]["id"] for _ in range(55)]
    log_in(client, "viewer")

    first = page(client, "/console/search")
    second = page(client, f"/console/search?before={ids[5]}")

    assert ids[-1] in first and ids[5] in first and ids[4] not in first
    assert f"before={ids[5]}" in first
    assert ids[4] in second and ids[0] in second and "Newest" in second


# --- the event page -------------------------------------------------------------------------


def test_event_page_shows_the_payload_and_every_attempt_with_tier_headers_and_response(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers, attempts=0, payload={"order": 42, "note": XSS})
    started = utcnow() - timedelta(minutes=3)
    make_attempt(delivery.id, 1, started_at=started, duration_ms=1500.0, response_body=XSS, outcome="retrying",
                 request_headers={"webhook-id": delivery.event_id, "webhook-signature": "v1,c2lnbmF0dXJl"},
                 next_attempt_at=started + timedelta(seconds=1))
    make_attempt(delivery.id, 2, response_status=None, error_class="timeout", error="read timed out", outcome="retrying")
    make_attempt(delivery.id, 3, response_status=200, response_body="ok", outcome="delivered")
    make_attempt(delivery.id, 4, trigger="resend", response_status=200, outcome="delivered")
    log_in(client, "operator")

    html = page(client, f"/console/events/{delivery.event_id}")

    assert html.count('class="attempt"') == 4
    assert "&#34;order&#34;: 42" in html  # pretty-printed, escaped
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "first try" in html and "tier 1 (after 1s)" in html and "tier 2 (after 2s)" in html and "manual resend" in html
    assert "webhook-signature: v1,c2lnbmF0dXJl" in html
    assert "1.50 s" in html and "timed out: no answer within the time limit" in html and "read timed out" in html
    assert "3 min ago" in html and "UTC" in html
    assert f'/console/deliveries/{delivery.id}/resend' in html


def test_event_page_shows_attempts_up_to_its_size_budget_and_says_how_many_it_left_out(
    client: FlaskClient, headers
) -> None:
    delivery = failed_delivery(client, headers, attempts=0)
    huge = {f"x-big-{n}": "v" * 8000 for n in range(120)}  # stored before headers were capped: 961 KB
    for number in range(1, 7):
        make_attempt(delivery.id, number, response_headers=huge)
    log_in(client, "viewer")

    html = page(client, f"/console/events/{delivery.event_id}")

    assert html.count('class="attempt"') == 4  # 4 x 961 KB fit in 4 MB
    assert "2 later attempts of this event are not shown" in html
    assert f"GET /v1/events/{delivery.event_id}/attempts" in html


def test_a_viewer_sees_no_operator_buttons(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers)
    log_in(client, "viewer")

    event_page = page(client, f"/console/events/{delivery.event_id}")
    endpoint_page = page(client, f"/console/endpoints/{delivery.endpoint_id}")
    dead = page(client, "/console/dead-letters")

    assert "/resend" not in event_page and "Resend</button>" not in event_page
    assert "/recover" not in endpoint_page and "/disable" not in endpoint_page
    assert delivery.id in dead and f"/deliveries/{delivery.id}/replay" not in dead and "Replay all" not in dead


def test_resend_queues_a_fresh_attempt_and_is_audited(client: FlaskClient, headers, settings) -> None:
    from tests.conftest import queue_messages

    delivery = failed_delivery(client, headers)
    user = log_in(client, "operator")

    response = post_form(client, f"/console/deliveries/{delivery.id}/resend", follow_redirects=True)

    html = response.get_data(as_text=True)
    assert response.status_code == 200 and f"Resend of {delivery.id} queued" in html
    # The event's first publish may still be on its way (the relay sends it after the 202): count only resends.
    resends = [meta for _, meta in queue_messages(settings.topology.primary) if meta.get("trigger") == "resend"]
    assert [message["attempt"] for message in resends] == [4]
    assert user.email in html and "resend" in html  # the audit entry on the event page
    assert f"{user.email}" in page(client, "/console/audit")


def test_every_resend_and_recover_is_shown_on_the_event_page_with_who_asked(
    app, client: FlaskClient, headers, tenant
) -> None:
    delivery = failed_delivery(client, headers)
    fresh = post_event(client, headers).json  # nobody touched this one
    user = log_in(client, "operator")
    key_id = tenant.api_key.partition(".")[0]
    untouched = page(client, f"/console/events/{delivery.event_id}")

    assert client.post(f"/v1/deliveries/{delivery.id}/resend", headers=headers).status_code == 202
    recovered = client.post(f"/v1/endpoints/{delivery.endpoint_id}/recover", json={"since": "2000-01-01T00:00:00Z"},
                            headers=headers)
    post_form(client, f"/console/deliveries/{delivery.id}/resend")
    cli = app.test_cli_runner().invoke(args=["deliveries", "resend", delivery.id])

    assert recovered.json["queued"] == 1 and cli.exit_code == 0, cli.output
    html = page(client, f"/console/events/{delivery.event_id}")
    assert "No one has resent" in untouched
    assert "No one has resent" not in html
    rows = html.split('class="manual-request"')[1:]
    assert len(rows) == 4  # newest first
    assert "command line" in rows[0] and f"cli:" not in rows[0]
    assert user.email in rows[1] and "resend" in rows[1]
    assert f"API key" in rows[2] and key_id in rows[2] and "default" in rows[2] and "recover" in rows[2]
    assert key_id in rows[3] and "resend" in rows[3]
    assert [r.attempt_no for r in ManualAttempt.select().order_by(ManualAttempt.id)] == [4, 4, 4, 4]
    assert "No one has resent" in page(client, f"/console/events/{fresh['id']}")


def test_a_delivered_delivery_shows_no_next_attempt_still_due(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers, attempts=0)
    started = utcnow() - timedelta(minutes=3)
    make_attempt(delivery.id, 1, started_at=started, outcome="retrying", next_attempt_at=started + timedelta(minutes=30.5))
    make_attempt(delivery.id, 2, trigger="resend", response_status=200, outcome="delivered")
    Delivery.update(status="delivered", attempts=2, delivered_at=utcnow(), next_attempt_at=None).where(
        Delivery.id == delivery.id).execute()
    waiting = failed_delivery(client, headers, attempts=0)
    make_attempt(waiting.id, 1, started_at=started, outcome="retrying", next_attempt_at=started + timedelta(minutes=30.5))
    Delivery.update(status="retrying", attempts=1, next_attempt_at=started + timedelta(minutes=30.5)).where(
        Delivery.id == waiting.id).execute()
    log_in(client, "viewer")

    delivered = page(client, f"/console/events/{delivery.event_id}")
    retrying = page(client, f"/console/events/{waiting.event_id}")

    assert "in 27 min" not in delivered and "Delivered" in delivered
    assert "in 27 min" in retrying  # still due: shown


def test_resend_while_the_broker_is_down_says_nothing_changed(make_app, headers, client: FlaskClient) -> None:
    delivery = failed_delivery(client, headers)
    down = make_app(amqp_url=DEAD_AMQP_URL).test_client()
    log_in(down, "operator")

    response = post_form(down, f"/console/deliveries/{delivery.id}/resend", follow_redirects=True)

    assert "Nothing was changed" in response.get_data(as_text=True)
    assert "No operator action yet" in page(down, "/console/audit")


# --- endpoints ---------------------------------------------------------------------------------


def test_endpoint_page_shows_health_history_charts_counts_and_failures_by_cause(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers)
    make_attempt(delivery.id, 4, trigger="resend", response_status=None, error_class="connection",
                 error="Connection refused", outcome="failed")
    endpoint = Endpoint.get_by_id(delivery.endpoint_id)
    Endpoint.update(health="offline", consecutive_failures=4, offline_since=utcnow()).where(Endpoint.id == endpoint.id).execute()
    HealthChange.create(endpoint=endpoint.id, tenant=endpoint.tenant_id, from_state="online", to_state="offline",
                        reason="5 consecutive failures")
    log_in(client, "operator")

    html = page(client, f"/console/endpoints/{endpoint.id}")

    assert html.count("<svg") == 2 and "0 of 4 attempts succeeded" in html
    assert "HTTP 500" in html and "connection" in html and "Connection refused" in html
    assert "5 consecutive failures" in html and "offline" in html
    assert f"/console/dead-letters?endpoint_id={endpoint.id}" in html
    assert "Resend failed deliveries created since" in html and "Parked deliveries are not sent" in html and "Disable endpoint" in html


def test_endpoint_page_shows_the_concurrency_window_the_workers_use_now(client: FlaskClient, headers) -> None:
    endpoint = create_endpoint(client, headers)["id"]
    log_in(client, "operator")
    assert "not being called now" in page(client, f"/console/endpoints/{endpoint}")

    endpoint_windows.save("host-a:1", [(endpoint, 24, 64, 17)], [])
    endpoint_windows.save("host-b:2", [(endpoint, 20, 64, 3)], [])

    assert "44 of 128 · 20 in flight" in page(client, f"/console/endpoints/{endpoint}")


def test_disable_and_enable_go_through_the_actions_and_are_audited(client: FlaskClient, headers) -> None:
    endpoint = create_endpoint(client, headers)["id"]
    user = log_in(client, "operator")

    disabled = post_form(client, f"/console/endpoints/{endpoint}/disable", {"reason": "customer asked"})
    assert disabled.status_code == 303
    row = Endpoint.get_by_id(endpoint)
    assert row.disabled and row.disabled_reason == "customer asked"
    post_form(client, f"/console/endpoints/{endpoint}/enable")
    assert not Endpoint.get_by_id(endpoint).disabled

    html = page(client, f"/console/endpoints/{endpoint}")
    assert html.count(user.email) >= 2 and "customer asked" in html


def test_recover_since_resends_the_endpoints_dead_letters(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers)
    log_in(client, "operator")

    response = post_form(client, f"/console/endpoints/{delivery.endpoint_id}/recover", {"since": "1h"},
                         follow_redirects=True)
    bad = post_form(client, f"/console/endpoints/{delivery.endpoint_id}/recover", {"since": "whenever"},
                    follow_redirects=True)

    assert ": 1 failed queued for a fresh attempt now; 0 parked stay parked" in response.get_data(as_text=True)
    assert Delivery.get_by_id(delivery.id).next_attempt_at is not None
    assert "Nothing was changed" in bad.get_data(as_text=True)


def test_try_now_probes_an_offline_endpoint_at_once_and_is_audited(client: FlaskClient, headers, settings) -> None:
    from tests.conftest import queue_messages
    from webhooks.messaging.messages import DeliveryMessage

    endpoint = create_endpoint(client, headers)["id"]
    log_in(client, "operator")
    online_page = page(client, f"/console/endpoints/{endpoint}")
    Endpoint.update(health="offline", offline_since=utcnow() - timedelta(minutes=1)).where(Endpoint.id == endpoint).execute()
    event = post_event(client, headers).json
    offline_page = page(client, f"/console/endpoints/{endpoint}")

    tried = post_form(client, f"/console/endpoints/{endpoint}/probe", follow_redirects=True)

    assert "Try now</button>" not in online_page and "Next probe" not in online_page
    assert "Try now</button>" in offline_page and "Next probe" in offline_page and "55 s ago" in offline_page  # overdue
    probe = Delivery.get(Delivery.event == event["id"])
    assert f"Probe of {endpoint} queued with its oldest undelivered delivery {probe.id}" in tried.get_data(as_text=True)
    queued = [DeliveryMessage.decode(*message) for message in queue_messages(settings.topology.primary)]
    assert [(m.delivery_id, m.trigger) for m in queued] == [(probe.id, "probe")]
    assert "probe" in page(client, "/console/audit")
    assert f'probed offline endpoint <a class="mono" href="/console/endpoints/{endpoint}">' in page(client, "/console/")
    Endpoint.update(disabled=True).where(Endpoint.id == endpoint).execute()
    refused = post_form(client, f"/console/endpoints/{endpoint}/probe", follow_redirects=True)
    assert "Nothing was changed: endpoint" in refused.get_data(as_text=True) and "is disabled" in refused.get_data(as_text=True)


def test_probes_are_labelled_and_do_not_count_as_ladder_tiers_on_the_event_page(client: FlaskClient, headers) -> None:
    delivery = failed_delivery(client, headers, attempts=0)
    make_attempt(delivery.id, 1, outcome="retrying")
    make_attempt(delivery.id, 2, trigger="probe", outcome="parked")
    make_attempt(delivery.id, 3, trigger="probe", outcome="parked")
    make_attempt(delivery.id, 4, outcome="retrying")
    log_in(client, "viewer")

    html = page(client, f"/console/events/{delivery.event_id}")

    assert html.count("probe (endpoint offline)") == 2 and "tier 1 (after 1s)" in html and "tier 3" not in html


def test_endpoint_list_filters_by_state(client: FlaskClient, headers) -> None:
    quiet = create_endpoint(client, headers, url="http://127.0.0.1:9/quiet")["id"]
    broken = create_endpoint(client, headers, url="http://127.0.0.1:9/broken")["id"]
    Endpoint.update(health="offline").where(Endpoint.id == broken).execute()
    log_in(client, "viewer")

    offline = page(client, "/console/endpoints?state=offline")

    assert broken in offline and quiet not in offline
    assert quiet in page(client, "/console/endpoints?q=quiet")


# --- overview, dead letters, errors ----------------------------------------------------------------


def test_overview_counts_link_to_their_lists_and_shows_queue_depths(client: FlaskClient, headers, settings) -> None:
    failed = failed_delivery(client, headers)
    Endpoint.update(disabled=True).where(Endpoint.id == failed.endpoint_id).execute()
    post_event(client, headers)
    log_in(client, "viewer")

    html = page(client, "/console/")

    assert 'href="/console/dead-letters?since=1h">1</a>' in html
    assert 'href="/console/search?status=pending&amp;since=24h">' in html
    assert settings.topology.primary in html and settings.topology.dead in html
    for queue in settings.topology.wait_queues():
        assert queue in html
    assert "Oldest undelivered" in html and "/console/endpoints/" + failed.endpoint_id in html


def test_overview_says_broker_unavailable_when_it_is(make_app, database_url) -> None:
    client = make_app(amqp_url=DEAD_AMQP_URL).test_client()
    log_in(client, "viewer")

    assert "broker unavailable" in page(client, "/console/")


def test_dead_letters_filter_by_tenant_endpoint_and_event_type(client: FlaskClient, headers, other_tenant, auth, tenant) -> None:
    ours = failed_delivery(client, headers, event_type="invoice.paid")
    theirs = failed_delivery(client, auth(other_tenant), event_type="order.created")
    log_in(client, "viewer")

    everything = page(client, "/console/dead-letters")
    by_name = page(client, "/console/dead-letters?tenant=GLOBEX")
    by_endpoint = page(client, f"/console/dead-letters?endpoint_id={ours.endpoint_id}")
    by_type = page(client, "/console/dead-letters?event_type=order.created")

    assert ours.id in everything and theirs.id in everything and "<strong>2</strong> dead letters" in everything
    assert theirs.id in by_name and ours.id not in by_name
    assert ours.id in by_endpoint and theirs.id not in by_endpoint
    assert theirs.id in by_type and ours.id not in by_type
    assert "no tenant with the id or name" in page(client, "/console/dead-letters?tenant=initech", status=400)


def test_empty_lists_say_what_to_do(client: FlaskClient, database_url) -> None:
    log_in(client, "viewer")

    assert "No dead letters" in page(client, "/console/dead-letters")
    assert "No bulk replay yet" in page(client, "/console/replays")
    assert "No operator action yet" in page(client, "/console/audit")
    assert "No endpoints yet" in page(client, "/console/endpoints")


def test_unknown_ids_and_paths_are_html_404_pages(client: FlaskClient, database_url) -> None:
    log_in(client, "viewer")

    for path in ("/console/events/evt_nope", "/console/deliveries/dlv_nope", "/console/endpoints/ep_nope",
                 "/console/replays/999", "/console/no/such/page"):
        html = page(client, path, status=404)
        assert "<html" in html and "404" in html and "Traceback" not in html


def test_failures_by_cause_say_what_happened_once_in_words(client: FlaskClient, headers) -> None:
    """34.11: the cause read ``HTTP 500`` with ``HTTP 500`` again under it."""
    delivery = failed_delivery(client, headers, attempts=0)
    make_attempt(delivery.id, 1, response_status=500, error_class="http_status", error="HTTP 500")
    log_in(client, "viewer")

    html = page(client, f"/console/endpoints/{delivery.endpoint_id}")

    causes = html.split('id="causes"')[1].split("</section>")[0]
    assert "HTTP 500 Internal Server Error: an error at the receiver" in causes
    assert causes.count("HTTP 500") == 1


def test_recent_operator_actions_read_as_sentences(app, client: FlaskClient, headers) -> None:
    """34.11: the overview said ``cli:root · replay_all 1``."""
    delivery = failed_delivery(client, headers)
    replayed = app.test_cli_runner().invoke(args=["dlq", "replay", "--endpoint", delivery.endpoint_id])
    user = log_in(client, "operator")
    post_form(client, f"/console/endpoints/{delivery.endpoint_id}/disable", {"reason": "customer asked"})

    html = page(client, "/console/")

    actions = " ".join(html.split('id="recent-actions"')[1].split("</section>")[0].split())
    assert replayed.exit_code == 0, replayed.output
    assert " on the command line</strong> replayed 1 dead letter (endpoint " in actions and ">replay job " in actions
    assert f"<strong>{user.email}</strong> disabled endpoint <a" in actions and "(“customer asked”)" in actions
    assert "replay_all" not in actions and "cli:" not in actions
