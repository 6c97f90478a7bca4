"""The verification snippets of destinations that are not HTTP receivers: the RabbitMQ and Redis
ones run as shown against what the service delivers there (the machine's RabbitMQ and Redis) and
tell a signed message from a forged one; an endpoint's page shows the guide of each of its kinds."""

from __future__ import annotations

import uuid
from typing import Any

import pika
import pytest
import redis

from tests.delivery.destination_helpers import SECRET, deliver, parcel
from webhooks.delivery.destinations.rabbitmq import RabbitMQ
from webhooks.delivery.destinations.redis_streams import RedisStreams
from webhooks.portal.snippets import AMQP_GUIDE, HTTP_GUIDE, REDIS_GUIDE, guides_for

BROKER = "amqp://guest:guest@127.0.0.1:5672/%2F"


def test_each_kind_of_url_gets_its_guide_once() -> None:
    assert guides_for("https://example.com/hook", None) == [HTTP_GUIDE]
    assert guides_for("amqps://u:p@h/v?exchange=x", "redis://h/0?stream=s") == [AMQP_GUIDE, REDIS_GUIDE]
    assert guides_for("redis://h/0?stream=s", "rediss://h/0?stream=t") == [REDIS_GUIDE]
    for guide in (AMQP_GUIDE, REDIS_GUIDE):
        (snippet,) = guide.snippets
        assert "WEBHOOK_SECRET" in snippet.code and "standardwebhooks" in snippet.install


def test_the_rabbitmq_snippet_acks_a_signed_message_and_rejects_a_forged_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    (snippet,) = AMQP_GUIDE.snippets
    namespace: dict[str, Any] = {}
    exec(snippet.code.split("connection = ")[0], namespace)  # noqa: S102 - the snippet as shown, up to consuming
    queue = f"webhooks-snippet-{uuid.uuid4().hex}"
    connection = pika.BlockingConnection(pika.URLParameters(BROKER))
    try:
        channel = connection.channel()
        channel.queue_declare(queue)
        (result,) = deliver(RabbitMQ, f"{BROKER}?exchange=&routing_key={queue}", parcel("evt_signed"))
        assert result.error_class is None, result.error
        forged = pika.BasicProperties(headers={"webhook-id": "evt_forged", "webhook-timestamp": "1",
                                               "webhook-signature": "v1,Zm9yZ2Vk"})
        channel.basic_publish("", queue, b'{"type":"order.paid"}', forged)
        channel.basic_consume(queue, namespace["handle"])
        printed = ""
        for _ in range(50):
            connection.process_data_events(time_limit=0.1)
            printed += capsys.readouterr().out
            if channel.queue_declare(queue, passive=True).method.message_count == 0 and printed:
                break
        assert printed.splitlines() == ["order.paid {'n': 1}"]  # the signed one; the forged one rejected
        channel.close()  # whatever the snippet neither acked nor rejected would be back in the queue now
        after = connection.channel()
        assert after.queue_declare(queue, passive=True).method.message_count == 0
        after.queue_delete(queue)
    finally:
        connection.close()


def test_the_redis_snippet_verifies_the_entries_of_a_stream(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = f"webhooks-snippet-{uuid.uuid4().hex}"
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    (snippet,) = REDIS_GUIDE.snippets
    try:
        (result,) = deliver(RedisStreams, f"redis://127.0.0.1:6379/0?stream={stream}", parcel("evt_entry"))
        assert result.error_class is None, result.error
        redis.Redis(port=6379).xadd(stream, {"id": "evt_forged", "type": "order.paid", "timestamp": "1",
                                             "signature": "v1,Zm9yZ2Vk", "body": "{}"})
        code = snippet.code.replace("your-stream", stream).replace("while True:", "for _ in range(1):")
        exec(code, {})  # noqa: S102 - the snippet as shown, reading the stream once
        printed = capsys.readouterr().out.splitlines()
        assert printed == ["order.paid {'n': 1}"]  # the forged entry is skipped
    finally:
        redis.Redis(port=6379).delete(stream)
