"""The AMQP message format."""

from __future__ import annotations

import pytest

from webhooks.storage.ids import has_prefix, new_id
import json

from webhooks.delivery.outgoing import body_bytes
from webhooks.messaging.messages import DeliveryMessage, PoisonMessage
from webhooks.storage.payload_json import PayloadJSON, payload_json

MESSAGE = DeliveryMessage("dlv_1", "evt_1", "ep_1", "ten_1", "order.created", "2026-11-22T10:00:00.000Z", {"a": 1})


def test_a_message_round_trips_with_attempt_trigger_and_not_before():
    message = MESSAGE.next(attempt=3, trigger="resend", not_before=1234.5)
    body, headers = message.encode()
    assert all(isinstance(value, int) for key, value in headers.items() if key != "trigger")  # AMQP-safe types
    assert DeliveryMessage.decode(body, headers) == message.next(payload=PayloadJSON(b'{"a":1}'))


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_trace_context_travels_in_a_header_and_stays_with_every_next_attempt():
    message = MESSAGE.next(traceparent=TRACEPARENT)
    body, headers = message.encode()

    assert headers["traceparent"] == TRACEPARENT
    decoded = DeliveryMessage.decode(body, {**headers, "traceparent": TRACEPARENT.encode()})  # as pika may hand it
    assert decoded.traceparent == TRACEPARENT
    assert decoded.next(attempt=2, trigger="ladder").traceparent == TRACEPARENT


def test_a_message_without_a_trace_context_has_no_traceparent_header_and_an_oversized_one_is_ignored():
    assert "traceparent" not in MESSAGE.encode()[1]
    body, headers = MESSAGE.encode()
    assert DeliveryMessage.decode(body, {**headers, "traceparent": "0" * 500}).traceparent is None


PAYLOADS = [{"a": 1}, {"z": [1, {"b": None}], "a": 1.5, "é": "ü\u2028\n\"q"}, {}]
EVENT_TYPES = ["order.created", 'we"ird,"payload":{"x":1}}', "ünï"]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_a_worker_sends_the_payload_bytes_the_message_carried_without_parsing_them(payload, event_type):
    message = DeliveryMessage("dlv_1", "evt_1", "ep_1", "ten_1", event_type, "2026-11-22T10:00:00.000Z", payload)
    body, headers = message.encode()
    decoded = DeliveryMessage.decode(body, headers)

    assert isinstance(decoded.payload, PayloadJSON) and decoded.event_type == event_type
    # The body of the whole message is what json.dumps makes of it (older workers read it), and the
    # request body is byte for byte what encoding the parsed payload would give.
    assert body == json.dumps({**{k: v for k, v in message.__dict__.items() if k not in ("payload", "attempt", "trigger", "not_before", "traceparent")},
                               "payload": payload}, separators=(",", ":")).encode()
    expected = json.dumps({"type": event_type, "timestamp": "t", "data": payload}, separators=(",", ":")).encode()
    assert body_bytes(event_type, "t", decoded.payload) == body_bytes(event_type, "t", payload) == expected
    assert payload_json(payload) == decoded.payload


def test_a_body_in_another_shape_is_parsed_in_full():
    body = json.dumps({"payload": {"a": 1}, "delivery_id": "dlv_1", "event_id": "evt_1", "endpoint_id": "ep_1",
                       "tenant_id": "ten_1", "event_type": "x", "event_created_at": "t"}).encode()
    decoded = DeliveryMessage.decode(body, {})
    assert decoded.delivery_id == "dlv_1" and decoded.payload == b'{"a":1}'


def test_a_message_carries_no_url_or_secret():
    body, headers = MESSAGE.encode()
    assert b"http" not in body and b"whsec" not in body and set(headers) == {"attempt", "trigger"}


@pytest.mark.parametrize(
    "body,headers",
    [(b"not json", {}), (b"{}", {}), (MESSAGE.encode()[0], {"attempt": "x"}), (MESSAGE.encode()[0], {"attempt": 0}),
     (MESSAGE.encode()[0], {"trigger": "magic"}), (b'{"delivery_id":1}', None),
     (MESSAGE.encode()[0].replace(b'{"a":1}', b'[1]'), {}), (MESSAGE.encode()[0][:-1], {})],
)
def test_malformed_messages_are_poison(body, headers):
    with pytest.raises(PoisonMessage):
        DeliveryMessage.decode(body, headers)


def test_ids_are_prefixed_and_sort_by_creation_time():
    first, second = new_id("evt", now_ms=1_000), new_id("evt", now_ms=2_000)
    assert has_prefix(first, "evt") and not has_prefix(first, "dlv")
    assert first < second
    assert not has_prefix("evt_../../etc", "evt")
