"""An endpoint's figures for the portal: its latest attempts within a window, at most ``SAMPLE``."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, make_attempt, post_event
from webhooks.health import summary
from webhooks.storage.timeutil import utcnow


def test_answer_stats_reads_the_latest_attempts_within_the_window_at_most_the_sample(
    client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = create_endpoint(client, headers)["id"]
    delivery = post_event(client, headers).json["deliveries"][0]["id"]
    for number, (outcome, ms) in enumerate([("failed", 900.0), ("delivered", 10.0), ("delivered", 20.0),
                                            ("failed", 30.0), ("delivered", 40.0)], start=1):
        make_attempt(delivery, number, outcome=outcome, duration_ms=ms)

    everything = summary.answer_stats([endpoint], utcnow() - timedelta(hours=24))[endpoint]
    monkeypatch.setattr(summary, "SAMPLE", 3)
    latest = summary.answer_stats([endpoint], utcnow() - timedelta(hours=24))[endpoint]

    assert (everything.attempts, everything.delivered, everything.p50_ms, everything.p95_ms) == (5, 3, 30.0, 900.0)
    assert not everything.sampled
    assert (latest.attempts, latest.delivered, latest.p95_ms, latest.sampled) == (3, 2, 40.0, True)
    assert summary.answer_stats([endpoint], utcnow() + timedelta(minutes=1)) == {}


def test_catch_up_is_paced_by_the_release_rate_or_the_round_trip_whichever_is_slower() -> None:
    assert summary.catch_up(0, 20.0, 5.0) is None
    assert summary.catch_up(100, 20.0, 5.0) == timedelta(seconds=5)
    assert summary.catch_up(100, 20.0, 200.0) == timedelta(seconds=20)
