"""/metrics: counters from every process, gauges read at scrape time, closed to the outside."""

from __future__ import annotations

import hmac
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import settings_env, wait_until
from tests.receivers import Receiver, always
from tests.api_helpers import create_endpoint, send
from webhooks.storage.models import Delivery


def scrape(client, **environ) -> tuple[int, str]:
    response = client.get("/metrics", environ_base={"REMOTE_ADDR": "127.0.0.1", **environ})
    return response.status_code, response.get_data(as_text=True)


def test_metrics_show_deliveries_attempts_queues_and_endpoint_health(client, tenant, auth, settings, start_worker):
    with Receiver(always(200)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        event = send(client, auth(tenant))
        wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"))
    status, text = scrape(client)
    assert status == 200
    assert 'webhooks_deliveries_total{outcome="delivered"}' in text
    assert 'webhooks_attempts_total{status_class="2xx"}' in text
    assert "webhooks_attempt_duration_seconds_bucket" in text
    assert "webhooks_events_ingested_total" in text
    assert f'webhooks_queue_messages{{queue="{settings.topology.primary}"}}' in text
    assert f'webhooks_queue_messages{{queue="{settings.topology.dead}"}}' in text
    assert "webhooks_broker_up 1.0" in text
    assert 'webhooks_endpoints{health="online"} 1.0' in text
    assert "webhooks_parked_deliveries 0.0" in text
    assert "webhooks_oldest_undelivered_seconds 0.0" in text


def test_metrics_are_refused_to_remote_addresses_unless_a_token_is_set(client, monkeypatch):
    assert scrape(client, REMOTE_ADDR="203.0.113.9")[0] == 403
    monkeypatch.setenv("METRICS_TOKEN", "s3cret")
    assert scrape(client, REMOTE_ADDR="203.0.113.9")[0] == 403
    response = client.get("/metrics", headers={"Authorization": "Bearer s3cret"}, environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert response.status_code == 200


def test_the_metrics_token_is_compared_in_constant_time(client, monkeypatch):
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    monkeypatch.setenv("METRICS_TOKEN", "s3cret")
    wrong = client.get("/metrics", headers={"Authorization": "Bearer s3creX"})
    right = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})

    assert (wrong.status_code, right.status_code) == (403, 200)
    assert compared == [(b"Bearer s3creX", b"Bearer s3cret"), (b"Bearer s3cret", b"Bearer s3cret")]


@pytest.mark.parametrize("header", ["Forwarded", "X-Forwarded-For", "X-Real-IP"])
def test_a_request_a_proxy_on_this_host_forwards_is_not_a_loopback_scrape(client, header):
    """A proxy on the same host connects from loopback for anyone on the internet."""
    assert scrape(client)[0] == 200
    response = client.get("/metrics", headers={header: "203.0.113.9"})
    assert response.status_code == 403


def test_counters_of_a_worker_process_reach_the_web_process_in_multiprocess_mode(
    client, tenant, auth, settings, tmp_path
):
    (tmp_path / "metrics").mkdir()  # its own folder: every *.db file in it is read as metrics
    env = {**settings_env(settings), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    with Receiver(always(200)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        worker = subprocess.Popen([sys.executable, "-m", "webhooks.worker"], env=env, stderr=subprocess.DEVNULL)
        try:
            for _ in range(3):
                send(client, auth(tenant))
            receiver.wait_for(3, timeout=15)
            wait_until(lambda: Delivery.select().where(Delivery.status == "delivered").count() == 3)
        finally:
            worker.terminate()
            worker.wait(timeout=20)
    scraper = textwrap.dedent(
        """
        from app import create_app
        response = create_app().test_client().get("/metrics", environ_base={"REMOTE_ADDR": "127.0.0.1"})
        print(response.get_data(as_text=True))
        """
    )
    output = subprocess.run([sys.executable, "-c", scraper], env=env, capture_output=True, text=True, check=True).stdout
    assert 'webhooks_deliveries_total{outcome="delivered"} 3.0' in output
