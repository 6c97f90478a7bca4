"""Shared fixtures: a fresh database per test, one queue prefix per session, real services.

``TEST_DATABASE=postgresql`` runs the suite on PostgreSQL (``TEST_POSTGRES_URL``,
default ``postgresql://postgres@127.0.0.1:5432/postgres`` for the admin connection);
the default is SQLite. RabbitMQ is real (``AMQP_URL``); queues are purged between
tests and deleted at the end of the session.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pika
import psycopg2
import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from webhooks import sealing
from webhooks.storage import db
from webhooks.messaging.brokers import connect
from webhooks.cli import create_tenant, migrate
from webhooks.config import Settings
from webhooks.console.models import CONSOLE_MODELS
from webhooks.pages.models import PAGE_MODELS
from webhooks.portal.models import PORTAL_MODELS
from webhooks.storage.models import ALL_MODELS
from webhooks.messaging.topology import Topology
from webhooks.delivery.engine import Engine

from tests.url_builders import reuse_url_builders

reuse_url_builders()

#: Fixtures of their own modules every test may ask for (a browser, the app served for it or for a client).
pytest_plugins = ["tests.browser", "tests.live_api", "tests.key_clock", "tests.isolation"]

AMQP_URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
POSTGRES_ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
DATABASE_KIND = os.environ.get("TEST_DATABASE", "sqlite")

#: One prefix per test session, so suites running side by side on one broker never share a queue;
#: ``.ci/run`` deletes stale ``test_*`` queues.
SESSION_PREFIX = f"test_{os.getpid()}_{secrets.token_hex(3)}"

#: The session's SECRETS_KEY: in this process (tests with no app of their own) and every
#: subprocess the tests start, so they all open the same sealed secrets.
TEST_SECRETS_KEY = sealing.new_key()
sealing.configure(TEST_SECRETS_KEY)

#: Every topology a test declared, deleted at the end of the session.
_declared: dict[tuple[str, tuple[int, ...]], Topology] = {}


#: Fixtures through which a test reaches the pass's database; a test that uses none of them
#: runs alike in both passes.
DATABASE_FIXTURES = frozenset({"database_url", "postgres_database"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgresql: a PostgreSQL behaviour (server connections, row locks, the pool, advisory locks): "
        "it runs in the PostgreSQL pass (TEST_DATABASE=postgresql) and is left out of the SQLite one",
    )


def touches_database(item: pytest.Item) -> bool:
    """Does ``item`` use the pass's database (one of ``DATABASE_FIXTURES``, directly or through another fixture)?"""
    return not DATABASE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test runs in one pass only where the two passes would run it alike.

    The SQLite pass (the default) leaves out the tests of PostgreSQL behaviour; the
    PostgreSQL pass leaves out the tests that touch no database, and the browser tests
    (what Chromium shows and does; the queries behind those pages are tested without a
    browser in both passes), which the SQLite pass has run already. ``./dev test`` and CI
    run both passes."""
    if DATABASE_KIND == "postgresql":
        left_out = [item for item in items if item.get_closest_marker("postgresql") is None
                    and (not touches_database(item) or "browser" in getattr(item, "fixturenames", ()))]
    else:
        left_out = [item for item in items if item.get_closest_marker("postgresql") is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


def amqp_channel() -> tuple[pika.BlockingConnection, Any]:
    connection = connect(AMQP_URL, timeout=5.0)
    return connection, connection.channel()


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str | None]:
    """One PostgreSQL database for the session (tables are emptied between tests)."""
    if DATABASE_KIND != "postgresql":
        yield None
        return
    name = SESSION_PREFIX
    admin = psycopg2.connect(POSTGRES_ADMIN_URL)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base}/{name}"
    db.init_database(url)
    migrate()
    yield url
    db.database.obj.close_all()
    admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory, postgres_database: str | None) -> Path | None:
    """A migrated SQLite database made once for the session; each test gets a copy of the file
    (migrating from nothing again costs about 0.14 s of CPU a test)."""
    if postgres_database is not None:
        return None
    path = tmp_path_factory.mktemp("template") / "webhooks.storage.db"
    db.init_database(f"sqlite:///{path}")
    migrate()
    with db.database.connection_context():
        db.database.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    return path


@pytest.fixture
def database_url(tmp_path: Any, postgres_database: str | None, sqlite_template: Path | None) -> Iterator[str]:
    """A fresh, migrated database for this test."""
    if sqlite_template is not None:
        path = tmp_path / "webhooks.storage.db"
        shutil.copyfile(sqlite_template, path)
        url = f"sqlite:///{path}"
        db.init_database(url)
        yield url
        db.database.close() if not db.database.is_closed() else None
        return
    db.init_database(postgres_database)
    tables = ", ".join(f'"{model._meta.table_name}"' for model in (*ALL_MODELS, *CONSOLE_MODELS, *PAGE_MODELS, *PORTAL_MODELS))
    with db.database.connection_context():
        db.database.execute_sql(f"TRUNCATE {tables} CASCADE")
    yield postgres_database


@pytest.fixture(scope="session", autouse=True)
def _delete_session_queues() -> Iterator[None]:
    yield
    if not _declared:
        return
    connection, channel = amqp_channel()
    for topology in _declared.values():
        topology.delete(channel)
    connection.close()


def declare(topology: Topology) -> Topology:
    """Declare ``topology`` (once per session) and purge its queues for this test."""
    connection, channel = amqp_channel()
    try:
        topology.declare(channel)
        for queue in topology.all_queues():
            channel.queue_purge(queue)
    finally:
        connection.close()
    _declared[(topology.prefix, topology.ladder.delays_ms)] = topology
    return topology


@pytest.fixture
def make_settings(database_url: str) -> Callable[..., Settings]:
    """Settings for this test's database and the session's queues; keyword overrides win."""

    def build(**overrides: Any) -> Settings:
        defaults: dict[str, Any] = {
            "database_url": database_url,
            "amqp_url": AMQP_URL,
            "queue_prefix": SESSION_PREFIX,
            "ladder": "1s,2s",
            "delivery_timeout": 3.0,
            "allow_private_targets": True,
            "relay_grace": 1.0,
            "secret_key": "test-secret-key",
            "secrets_key": TEST_SECRETS_KEY,
        }
        settings = Settings.from_env(env={}, **{**defaults, **overrides})
        declare(settings.topology)
        return settings

    return build


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def app(settings: Settings) -> Flask:
    return create_app({"SETTINGS": settings, "TESTING": True})


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def make_app(make_settings: Callable[..., Settings]) -> Callable[..., Flask]:
    """``make_app(**settings_overrides)``: another app on this test's database."""
    return lambda **overrides: create_app({"SETTINGS": make_settings(**overrides), "TESTING": True})


def _tenant(name: str) -> SimpleNamespace:
    return SimpleNamespace(**create_tenant(name))


@pytest.fixture
def tenant(database_url: str) -> SimpleNamespace:
    """A tenant with ``.id``, ``.name`` and ``.api_key``."""
    return _tenant("acme")


@pytest.fixture
def other_tenant(database_url: str) -> SimpleNamespace:
    return _tenant("globex")


@pytest.fixture
def platform_key(database_url: str) -> SimpleNamespace:
    """A live platform key (``flask platform create-key``'s): ``.id`` and ``.api_key``."""
    from webhooks.ingest.auth_keys import PLATFORM, create_api_key
    from webhooks.storage.db import write

    with db.database.connection_context(), write():
        row, api_key = create_api_key(PLATFORM, "backend")
    return SimpleNamespace(id=row.id, api_key=api_key)


@pytest.fixture
def platform(platform_key: SimpleNamespace) -> dict[str, str]:
    """The Authorization header of the platform key."""
    return {"Authorization": f"Bearer {platform_key.api_key}"}


@pytest.fixture
def auth() -> Callable[[SimpleNamespace], dict[str, str]]:
    """``auth(tenant)``: the Authorization header of that tenant."""
    return lambda tenant: {"Authorization": f"Bearer {tenant.api_key}"}


@pytest.fixture
def headers(tenant: SimpleNamespace, auth: Callable[[SimpleNamespace], dict[str, str]]) -> dict[str, str]:
    """The Authorization header of ``tenant``."""
    return auth(tenant)


@pytest.fixture
def start_worker() -> Iterator[Callable[[Settings], Engine]]:
    """Start in-process workers (a thread and event loop each), consuming before this returns;
    they are stopped and joined after the test."""
    running: list[tuple[Engine, threading.Thread]] = []

    def start(settings: Settings) -> Engine:
        engine = Engine(settings)
        thread = threading.Thread(target=engine.run, name="worker", daemon=True)
        thread.start()
        running.append((engine, thread))
        wait_until(lambda: engine.consuming.is_set() or not thread.is_alive(), timeout=15)
        return engine

    yield start
    for engine, thread in running:
        engine.stop()
    for engine, thread in running:
        thread.join(timeout=15)
        assert not thread.is_alive(), "a worker did not stop within 15 s"


@pytest.fixture
def start_clock() -> Iterator[Callable[[Settings], None]]:
    """Start in-process clocks (a thread each); stopped and joined after the test."""
    from webhooks import clock

    running: list[tuple[threading.Event, threading.Thread]] = []

    def start(settings: Settings) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=clock.run, args=(settings, stop), name="clock", daemon=True)
        thread.start()
        running.append((stop, thread))

    yield start
    for stop, thread in running:
        stop.set()
    for stop, thread in running:
        thread.join(timeout=15)


class IngestClock:
    """The time the ingest transaction reads (its rate-limit bucket refills by it), moved by hand."""

    def __init__(self) -> None:
        from webhooks.storage.timeutil import utcnow

        self.now = utcnow()

    def __call__(self) -> Any:
        return self.now

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self.now += timedelta(seconds=seconds)


@pytest.fixture
def ingest_clock(monkeypatch: pytest.MonkeyPatch) -> IngestClock:
    """Stop the ingest clock, so that rate-limit tests never depend on how fast requests run."""
    clock = IngestClock()
    monkeypatch.setattr("webhooks.ingest.accept.utcnow", clock)
    return clock


@pytest.fixture
def socket_gate() -> Iterator[Any]:
    """Where ``tests.gated_app`` holds a tenant's events (``tests.web_process.SocketGate``)."""
    from tests.web_process import SocketGate

    gate = SocketGate()
    yield gate
    gate.close()


@pytest.fixture
def smtp() -> Iterator[Any]:
    """A real SMTP server on 127.0.0.1 (aiosmtpd) that keeps what it receives (``tests.smtp_server.SmtpServer``)."""
    from tests.smtp_server import SmtpServer

    server = SmtpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def start_web(tmp_path: Any) -> Iterator[Callable[..., str]]:
    """``start_web(settings, app=…, **env)``: gunicorn as the Procfile runs it, serving ``app``
    (``tests.gated_app`` by default); its URL."""
    from tests.web_process import WebProcesses

    processes = WebProcesses(tmp_path)
    yield processes.start
    processes.stop()


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment a subprocess (worker, clock, web) needs to run with ``settings``."""
    ladder = ",".join(f"{ms}ms" for ms in settings.ladder.delays_ms)
    return {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "AMQP_URL": settings.amqp_url,
        "QUEUE_PREFIX": settings.queue_prefix,
        "RETRY_LADDER": ladder,
        "DELIVERY_TIMEOUT": str(settings.delivery_timeout),
        "ALLOW_PRIVATE_TARGETS": "1" if settings.allow_private_targets else "0",
        "RELAY_GRACE": str(settings.relay_grace),
        "SECRET_KEY": settings.secret_key or "test",
        "SECRETS_KEY": settings.secrets_key or TEST_SECRETS_KEY,
    }


def queue_messages(queue: str) -> list[tuple[bytes, dict[str, Any]]]:
    """Every message now in ``queue`` (fetched, then returned to the queue unchanged)."""
    connection, channel = amqp_channel()
    messages, tags = [], []
    try:
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=False)
            if method is None:
                break
            tags.append(method.delivery_tag)
            messages.append((body, dict(properties.headers or {})))
        for tag in tags:
            channel.basic_nack(tag, requeue=True)
    finally:
        connection.close()
    return messages
