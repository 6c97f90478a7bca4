"""Bulk replay of dead letters: background jobs with progress in the database, resumable, and the CLI."""

from __future__ import annotations

import json
import time

from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import DEAD_AMQP_URL, create_endpoint, post_event
from tests.conftest import queue_messages, wait_until
from tests.console_helpers import failed_delivery, log_in, post_form
from webhooks.console import replay
from webhooks.console.models import AuditEntry, ReplayJob
from webhooks.console.queries import DeliveryFilter
from webhooks.storage.models import Delivery, Tenant
from webhooks.storage.timeutil import utcnow

DEAD = DeliveryFilter(statuses=("failed",))


def dead_letters(client: FlaskClient, headers: dict[str, str], count: int, **event) -> list[Delivery]:
    """``count`` failed deliveries to one endpoint (no attempt rows: only the status matters here)."""
    endpoint = create_endpoint(client, headers)["id"]
    ids = [post_event(client, headers, **event).json["deliveries"][0]["id"] for _ in range(count)]
    for delivery_id in ids:
        assert Delivery.get_by_id(delivery_id).endpoint_id == endpoint
    Delivery.update(status="failed", attempts=3, next_attempt_at=None).where(Delivery.id.in_(ids)).execute()
    return [Delivery.get_by_id(delivery_id) for delivery_id in ids]


def replayed(settings) -> list[str]:
    return [json.loads(body)["delivery_id"] for body, headers in queue_messages(settings.topology.primary)
            if headers.get("trigger") == "recover"]


def test_a_job_replays_every_matching_dead_letter_once_with_trigger_recover(client, headers, settings) -> None:
    rows = dead_letters(client, headers, 5)
    other = failed_delivery(client, headers, event_type="invoice.paid")

    job = replay.create_job(DeliveryFilter(statuses=("failed",), event_type="order.created"), "ops@example.com")
    finished = replay.run_job(job.id, settings)

    assert (finished.status, finished.total, finished.done, finished.percent) == ("done", 5, 5, 100)
    assert sorted(replayed(settings)) == sorted(row.id for row in rows)
    assert other.id not in replayed(settings)
    assert all(Delivery.get_by_id(row.id).next_attempt_at is not None for row in rows)


def test_running_a_finished_or_resumed_job_again_replays_nothing_twice(client, headers, settings) -> None:
    rows = dead_letters(client, headers, 4)
    job = replay.create_job(DEAD, "ops@example.com")
    replay.run_job(job.id, settings)

    # As if the runner died after its last resend but before it reported: the job is resumed.
    ReplayJob.update(status="failed", done=1, cursor=None).where(ReplayJob.id == job.id).execute()
    resumed = replay.run_job(job.id, settings)

    assert resumed.status == "done" and resumed.done == 4
    assert sorted(replayed(settings)) == sorted(row.id for row in rows)  # each once


def test_a_job_only_takes_what_matched_when_it_was_made(client, headers, settings) -> None:
    dead_letters(client, headers, 2)
    job = replay.create_job(DEAD, "ops@example.com")
    later = failed_delivery(client, headers)

    replay.run_job(job.id, settings)

    assert job.total == 2 and later.id not in replayed(settings)


def test_a_running_job_with_a_live_heartbeat_is_not_taken_over_but_a_stale_one_is(client, headers, settings) -> None:
    dead_letters(client, headers, 2)
    job = replay.create_job(DEAD, "ops@example.com")
    ReplayJob.update(status="running", runner="other", heartbeat_at=utcnow()).where(ReplayJob.id == job.id).execute()

    assert replay.run_job(job.id, settings).status == "running" and replayed(settings) == []

    ReplayJob.update(heartbeat_at=utcnow() - replay.STALE_AFTER * 2).where(ReplayJob.id == job.id).execute()
    assert replay.is_stale(ReplayJob.get_by_id(job.id))
    assert replay.run_job(job.id, settings).status == "done" and len(replayed(settings)) == 2


def test_a_job_that_cannot_reach_the_broker_fails_resumably(client, headers, make_settings, monkeypatch) -> None:
    dead_letters(client, headers, 2)
    monkeypatch.setattr(replay, "BROKER_RETRY_DELAY", 0.01)
    job = replay.create_job(DEAD, "ops@example.com")

    stopped = replay.run_job(job.id, make_settings(amqp_url=DEAD_AMQP_URL))

    assert stopped.status == "failed" and "BrokerUnavailable" in stopped.error and stopped.done == 0


def test_replay_all_in_the_console_returns_at_once_and_shows_progress_until_done(client: FlaskClient, headers, settings) -> None:
    rows = dead_letters(client, headers, 120)
    user = log_in(client, "operator")

    started = time.monotonic()
    response = post_form(client, "/console/dead-letters/replay", {"tenant": "acme", "endpoint_id": "", "since": "1h"})
    took = time.monotonic() - started

    assert response.status_code == 303 and took < 1.0
    job_page = response.headers["Location"]
    running = client.get(job_page).get_data(as_text=True)
    assert "<progress" in running and "of 120 replayed" in running
    job = wait_until(lambda: ReplayJob.get_or_none(ReplayJob.status == "done"), timeout=30)
    assert job.done == 120 and len(replayed(settings)) == len(rows)
    done = client.get(job_page).get_data(as_text=True)
    assert "120 of 120 replayed (100%)" in done and 'http-equiv="refresh"' not in done
    entry = AuditEntry.get(AuditEntry.action == "replay_all")
    assert entry.actor == user.email and entry.detail["total"] == 120


def test_replaying_one_dead_letter_from_the_list_returns_to_the_same_filter(client: FlaskClient, headers, settings) -> None:
    delivery = failed_delivery(client, headers)
    log_in(client, "operator")

    response = post_form(client, f"/console/deliveries/{delivery.id}/replay",
                         {"next": f"/console/dead-letters?endpoint_id={delivery.endpoint_id}"})

    assert response.headers["Location"] == f"/console/dead-letters?endpoint_id={delivery.endpoint_id}"
    assert replayed(settings) == [delivery.id]
    assert AuditEntry.get(AuditEntry.action == "replay").event_id == delivery.event_id


def test_a_stale_job_page_offers_resume_to_operators(client: FlaskClient, headers, settings) -> None:
    dead_letters(client, headers, 1)
    job = replay.create_job(DEAD, "ops@example.com")
    ReplayJob.update(status="running", heartbeat_at=utcnow() - replay.STALE_AFTER * 2).where(ReplayJob.id == job.id).execute()
    log_in(client, "operator")

    assert "Resume</button>" in client.get(f"/console/replays/{job.id}").get_data(as_text=True)
    post_form(client, f"/console/replays/{job.id}/resume")

    assert wait_until(lambda: ReplayJob.get_by_id(job.id).status == "done")


def test_flask_dlq_replay_runs_the_job_with_a_progress_bar(app: Flask, client: FlaskClient, headers, settings) -> None:
    rows = dead_letters(client, headers, 3)

    result = app.test_cli_runner().invoke(args=["dlq", "replay", "--tenant", "acme", "--since", "1h"])

    assert result.exit_code == 0, result.output
    assert "replay job" in result.output  # the progress bar's label
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert (summary["status"], summary["total"], summary["done"]) == ("done", 3, 3)
    tenant = Tenant.get(Tenant.name == "acme")
    assert summary["tenants"] == [{"id": tenant.id, "name": "acme"}]
    assert f"replaying failed deliveries of tenant acme ({tenant.id})" in result.output
    assert sorted(replayed(settings)) == sorted(row.id for row in rows)
    assert AuditEntry.get(AuditEntry.action == "replay_all").actor.startswith("cli:")


def test_flask_dlq_replay_rejects_an_unknown_tenant(app: Flask, database_url) -> None:
    result = app.test_cli_runner().invoke(args=["dlq", "replay", "--tenant", "initech"])

    assert result.exit_code == 2 and "no tenant" in result.output


def test_flask_deliveries_resend_queues_an_attempt_and_is_audited(app: Flask, client: FlaskClient, headers, settings) -> None:
    delivery = failed_delivery(client, headers)
    runner = app.test_cli_runner()

    result = runner.invoke(args=["deliveries", "resend", delivery.id])
    unknown = runner.invoke(args=["deliveries", "resend", "dlv_nope"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["id"] == delivery.id
    assert [json.loads(body)["delivery_id"] for body, _ in queue_messages(settings.topology.primary)][-1] == delivery.id
    assert AuditEntry.get(AuditEntry.action == "resend").target_id == delivery.id
    assert unknown.exit_code == 1 and "no delivery dlv_nope" in unknown.output


def test_a_replay_that_matches_nothing_is_finished_at_once(client: FlaskClient, database_url) -> None:
    log_in(client, "operator")

    response = post_form(client, "/console/dead-letters/replay", {"event_type": "nothing.matches"})

    job = ReplayJob.get()
    assert (job.status, job.total) == ("done", 0)
    assert "0 of 0 replayed (100%)" in client.get(response.headers["Location"]).get_data(as_text=True)
