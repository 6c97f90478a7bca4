"""``AMQP_URL`` as a list of cluster nodes: parsed in order, validated with the bad entry named,
and every process other than the worker connects to the first node that answers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pika.exceptions
import pytest
from flask import Flask

from tests.api_helpers import DEAD_AMQP_URL
from tests.conftest import AMQP_URL, SESSION_PREFIX, amqp_channel, settings_env
from webhooks.messaging.brokers import BrokerUrlError, broker_parameters, connect, describe
from webhooks.config import Settings

ROOT = Path(__file__).resolve().parents[2]

#: A second address where nothing listens (port 2 is unassigned and closed here).
OTHER_DEAD_URL = "amqp://guest:guest@127.0.0.1:2/%2F"

#: ``host:port`` of the test broker's first node.
LIVE_NODE = describe(broker_parameters(AMQP_URL, 1.0)[0])


def test_one_url_is_one_node() -> None:
    (node,) = broker_parameters("amqp://guest:guest@rabbit.internal:5672/%2F", 1.0)

    assert (node.host, node.port, node.virtual_host) == ("rabbit.internal", 5672, "/")


def test_a_comma_separated_list_is_one_node_per_url_in_the_order_given() -> None:
    nodes = broker_parameters("amqp://u:p@rabbit-1:5672/prod , amqp://u:p@rabbit-2:5673/prod,amqps://u:p@rabbit-3/prod", 1.0)

    assert [describe(node) for node in nodes] == ["rabbit-1:5672", "rabbit-2:5673", "rabbit-3:5671"]
    assert {node.virtual_host for node in nodes} == {"prod"}
    assert [node.ssl_options is not None for node in nodes] == [False, False, True]


def test_every_node_gives_up_after_the_same_timeouts() -> None:
    nodes = broker_parameters("amqp://a/%2F,amqp://b/%2F", 2.0)

    for node in nodes:
        assert (node.socket_timeout, node.stack_timeout, node.blocked_connection_timeout) == (2.0, 4.0, 10.0)
        assert node.connection_attempts == 1


@pytest.mark.parametrize(
    ("amqp_url", "message"),
    [
        ("", "AMQP_URL is empty"),
        ("amqp://a/%2F,,amqp://c/%2F", "AMQP_URL entry 2 of 3 is empty"),
        ("amqp://a/%2F,amqp://b/%2F,", "AMQP_URL entry 3 of 3 is empty"),
        ("amqp://a/%2F,http://b/", "AMQP_URL entry 2 of 2 ('http://b/') is not an amqp:// or amqps:// URL"),
        ("rabbit-1:5672", "AMQP_URL entry 1 of 1 ('rabbit-1:5672') is not an amqp:// or amqps:// URL"),
        ("amqp://a/%2F,amqp://b:fivesixseven/%2F", "AMQP_URL entry 2 of 2 ('amqp://b:fivesixseven/%2F'): Port could not be cast"),
        ("amqp:///%2F", "AMQP_URL entry 1 of 1 ('amqp:///%2F'): no host"),
        ("amqp://a/%2F?heartbeet=5", "AMQP_URL entry 1 of 1 ('amqp://a/%2F?heartbeet=5'): Unknown URL parameter: 'heartbeet'"),
        ("amqp://a/prod,amqp://b/staging", "AMQP_URL entries name different virtual hosts ('prod', 'staging')"),
    ],
)
def test_a_bad_amqp_url_is_refused_naming_the_bad_entry(amqp_url: str, message: str) -> None:
    with pytest.raises(BrokerUrlError) as refused:
        broker_parameters(amqp_url, 1.0)

    assert str(refused.value).startswith(message)


def test_the_error_never_shows_a_password() -> None:
    with pytest.raises(BrokerUrlError) as refused:
        broker_parameters("amqp://svc:s3cret@a/%2F,amqp://svc:s3cret@b:x/%2F", 1.0)

    assert "s3cret" not in str(refused.value)
    assert "amqp://svc:***@b:x/%2F" in str(refused.value)


def test_a_percent_encoded_comma_stays_inside_its_password() -> None:
    (node,) = broker_parameters("amqp://svc:pass%2Cword@a/%2F", 1.0)

    assert node.credentials.password == "pass,word"


def test_settings_refuse_a_bad_amqp_url_at_start() -> None:
    with pytest.raises(BrokerUrlError, match="AMQP_URL entry 2 of 2 is empty"):
        Settings.from_env(env={"AMQP_URL": "amqp://a/%2F,"})


def test_connect_uses_the_first_node_that_answers() -> None:
    connection = connect(f"{DEAD_AMQP_URL},{OTHER_DEAD_URL},{AMQP_URL}", 1.0)
    try:
        assert connection.is_open
        assert describe(connection._impl.params) == LIVE_NODE  # noqa: SLF001 - which node answered
    finally:
        connection.close()


def test_connect_fails_quickly_when_no_node_answers() -> None:
    started = time.monotonic()

    with pytest.raises(pika.exceptions.AMQPConnectionError):
        connect(f"{DEAD_AMQP_URL},{OTHER_DEAD_URL}", 1.0)

    assert time.monotonic() - started < 5.0


def test_healthz_reports_the_broker_up_while_a_later_node_answers(make_app: Callable[..., Flask]) -> None:
    response = make_app(amqp_url=f"{DEAD_AMQP_URL},{AMQP_URL}").test_client().get("/healthz")

    assert response.json == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def test_metrics_read_queue_depths_from_a_later_node(make_app: Callable[..., Flask]) -> None:
    app = make_app(amqp_url=f"{DEAD_AMQP_URL},{AMQP_URL}")

    text = app.test_client().get("/metrics").get_data(as_text=True)

    assert "webhooks_broker_up 1.0" in text
    assert f'webhooks_queue_messages{{queue="{SESSION_PREFIX}.deliver"}} 0.0' in text


def test_rabbit_setup_declares_through_the_first_node_that_answers(settings: Settings) -> None:
    prefix = f"{SESSION_PREFIX}_setup"
    env = {**settings_env(settings), "AMQP_URL": f"{DEAD_AMQP_URL},{AMQP_URL}", "QUEUE_PREFIX": prefix}

    result = subprocess.run([sys.executable, "rabbit_setup.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)

    assert result.returncode == 0, result.stderr
    topology = Settings.from_env(env={}, queue_prefix=prefix, ladder=settings.ladder).topology
    connection, channel = amqp_channel()
    try:
        topology.check(channel)  # every queue exists
        topology.delete(channel)
    finally:
        connection.close()


def test_rabbit_setup_names_a_bad_amqp_url() -> None:
    result = subprocess.run([sys.executable, "rabbit_setup.py"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PATH": "", "AMQP_URL": "amqp://a/%2F,amqp:/b"})

    assert result.returncode != 0
    assert "AMQP_URL entry 2 of 2 ('amqp:/b') is not an amqp:// or amqps:// URL" in result.stderr


@pytest.mark.parametrize("url, says", [
    ("amqp://guest:guest@127.0.0.1:2/%2F",
     "cannot connect to RabbitMQ at 127.0.0.1:2 (AMQP_URL): connection refused (nothing listens there); "
     "start RabbitMQ there, or point AMQP_URL at it"),
    (AMQP_URL.replace("guest:guest@", "guest:wrong-password@"),
     f"cannot connect to RabbitMQ at {LIVE_NODE} (AMQP_URL): the user name or password was refused; "
     "check AMQP_URL's user and password"),
    (AMQP_URL.rsplit("/", 1)[0] + "/no_such_vhost_34",
     f"cannot connect to RabbitMQ at {LIVE_NODE} (AMQP_URL): the virtual host 'no_such_vhost_34' does not exist "
     "or the user may not use it; create it (rabbitmqctl add_vhost no_such_vhost_34) or fix AMQP_URL's path"),
])
def test_rabbit_setup_says_in_one_line_where_it_looked_what_went_wrong_and_what_to_do(
    url: str, says: str, settings: Settings
) -> None:
    result = subprocess.run([sys.executable, "rabbit_setup.py"], cwd=ROOT, env={**settings_env(settings), "AMQP_URL": url},
                            capture_output=True, text=True, timeout=60)

    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"rabbit_setup.py: {says}"]
    assert "wrong-password" not in result.stderr
