"""``python bench/run.py page-memory [--no-budget]``: a page of attempts whose rows hold 961 KB of response
headers each (stored before the headers' cap, issue 36 item 3), through the app in this process on SQLite: how
large ``GET /v1/endpoints/<id>/attempts?limit=250`` is, and how much the process's peak RSS grows answering it."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from app import create_app
from webhooks.cli import create_tenant, migrate
from webhooks.config import Settings
from webhooks.sealing import new_key
from webhooks.storage.db import database
from webhooks.storage.ids import new_id
from webhooks.storage.models import Attempt, Delivery, Endpoint, Event
from webhooks.storage.timeutil import utcnow

ROWS = 250
HEADERS = {f"x-big-{n}": "v" * 8000 for n in range(120)}


def peak_rss_mb() -> float:
    """The process's peak RSS (VmHWM) since it was last reset."""
    return next(int(line.split()[1]) / 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmHWM:"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-budget", action="store_true", help="the page as it was before the budget, to compare")


def main(args: argparse.Namespace) -> int:
    if args.no_budget:
        from webhooks.api import common
        common.MAX_ATTEMPT_PAGE_CHARS = 1 << 62
    directory = tempfile.mkdtemp(prefix="attempt-page-")
    settings = Settings.from_env(env={}, database_url=f"sqlite:///{directory}/db.sqlite", secrets_key=new_key(),
                                 secret_key="bench", amqp_url="amqp://guest:guest@127.0.0.1:5672/%2F")
    app = create_app({"SETTINGS": settings, "TESTING": True})
    with app.app_context():
        migrate()
        tenant = create_tenant("memory")
        with database.connection_context():
            endpoint = Endpoint.create(id=new_id("ep"), tenant=tenant["id"], url="http://127.0.0.1:9/hook",
                                       secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            event = Event.create(id=new_id("evt"), tenant=tenant["id"], seq=1, event_type="a", payload={})
            delivery = Delivery.create(id=new_id("dlv"), tenant=tenant["id"], event=event.id, endpoint=endpoint.id)
            for number in range(1, ROWS + 1):
                Attempt.create(id=new_id("att"), delivery=delivery.id, tenant=tenant["id"], event=event.id,
                               endpoint=endpoint.id, attempt_no=number, started_at=utcnow(), duration_ms=1.0,
                               url=endpoint.url, request_headers={}, response_status=200, response_headers=HEADERS,
                               response_body="ok", outcome="delivered")
    client = app.test_client()
    auth = {"Authorization": f"Bearer {tenant['api_key']}"}
    import gc
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # Linux: the peak RSS starts again from the current RSS
    before = peak_rss_mb()
    started = time.monotonic()
    response = client.get(f"/v1/endpoints/{endpoint.id}/attempts?limit={ROWS}", headers=auth)
    took = time.monotonic() - started
    page = response.json
    print(f"{ROWS} attempts of 961 KB stored; GET ?limit={ROWS}: {response.status_code}, "
          f"{len(response.data) / 1e6:.1f} MB, {len(page['data'])} rows, has_more={page['has_more']}, "
          f"peak RSS {before:.0f} -> {peak_rss_mb():.0f} MB, {took:.2f} s")
    return 0
