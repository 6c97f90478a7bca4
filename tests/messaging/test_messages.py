"""The AMQP message format."""

from __future__ import annotations

import pytest

from webhooks.storage.ids import has_prefix, new_id
from webhooks.messaging.messages import DeliveryMessage, PoisonMessage

MESSAGE = DeliveryMessage("dlv_1", "evt_1", "ep_1", "ten_1", "order.created", "2026-11-22T10:00:00.000Z", {"a": 1})


def test_a_message_round_trips_with_attempt_trigger_and_not_before():
    message = MESSAGE.next(attempt=3, trigger="resend", not_before=1234.5)
    body, headers = message.encode()
    assert all(isinstance(value, int) for key, value in headers.items() if key != "trigger")  # AMQP-safe types
    assert DeliveryMessage.decode(body, headers) == message


def test_a_message_carries_no_url_or_secret():
    body, headers = MESSAGE.encode()
    assert b"http" not in body and b"whsec" not in body and set(headers) == {"attempt", "trigger"}


@pytest.mark.parametrize(
    "body,headers",
    [(b"not json", {}), (b"{}", {}), (MESSAGE.encode()[0], {"attempt": "x"}), (MESSAGE.encode()[0], {"attempt": 0}),
     (MESSAGE.encode()[0], {"trigger": "magic"}), (b'{"delivery_id":1}', None)],
)
def test_malformed_messages_are_poison(body, headers):
    with pytest.raises(PoisonMessage):
        DeliveryMessage.decode(body, headers)


def test_ids_are_prefixed_and_sort_by_creation_time():
    first, second = new_id("evt", now_ms=1_000), new_id("evt", now_ms=2_000)
    assert has_prefix(first, "evt") and not has_prefix(first, "dlv")
    assert first < second
    assert not has_prefix("evt_../../etc", "evt")
