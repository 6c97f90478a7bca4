"""Standard Webhooks signatures, checked with the official verifiers."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

import pytest
import svix
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from webhooks.outgoing import active_secrets, build_request
from webhooks.signing import generate_secret, is_valid_secret, secret_key, sign


def test_secret_is_whsec_and_base64_of_32_random_bytes():
    secret = generate_secret()
    assert secret.startswith("whsec_")
    assert len(secret_key(secret)) == 32
    assert is_valid_secret(secret)
    assert generate_secret() != secret


@pytest.mark.parametrize("bad", ["nope", "whsec_", "whsec_!!!", "whsec_" + base64.b64encode(b"short").decode()])
def test_malformed_or_short_secrets_are_invalid(bad):
    assert not is_valid_secret(bad)


def test_signature_matches_the_specification_example():
    # Example from the Standard Webhooks specification.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    assert sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def _headers(request):
    return {k: v for k, v in request.headers.items()}


def test_both_official_libraries_verify_our_requests():
    secret = generate_secret()
    now = int(datetime.now().timestamp())
    request = build_request("evt_1", "order.created", "2026-11-22T10:00:00.000Z", {"a": [1, "é"]}, [secret], now)
    expected = {"type": "order.created", "timestamp": "2026-11-22T10:00:00.000Z", "data": {"a": [1, "é"]}}
    assert Webhook(secret).verify(request.body, _headers(request)) == expected
    svix_headers = {"svix-id": request.headers["webhook-id"], "svix-timestamp": request.headers["webhook-timestamp"],
                    "svix-signature": request.headers["webhook-signature"]}
    svix.Webhook(secret).verify(request.body, svix_headers)  # raises WebhookVerificationError on mismatch
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix.Webhook(generate_secret()).verify(request.body, svix_headers)


def test_during_rotation_both_secrets_verify_and_after_it_only_the_new_one():
    old, new = generate_secret(), generate_secret()
    now = datetime.utcnow()
    during = active_secrets(new, old, now + timedelta(hours=1), now)
    assert during == [new, old]
    request = build_request("evt_1", "t", "ts", {}, during, int(datetime.now().timestamp()))
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(request.body, _headers(request))["type"] == "t"
    after = active_secrets(new, old, now - timedelta(seconds=1), now)
    assert after == [new]
    request = build_request("evt_1", "t", "ts", {}, after, int(datetime.now().timestamp()))
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(request.body, _headers(request))


def test_a_tampered_body_fails_verification():
    secret = generate_secret()
    request = build_request("evt_1", "t", "ts", {"amount": 1}, [secret], int(datetime.now().timestamp()))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(request.body.replace(b"1", b"2"), _headers(request))


@settings(max_examples=50, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=20), st.booleans()), max_size=5),
       msg_id=st.from_regex(r"evt_[0-9a-z]{26}", fullmatch=True))
def test_any_payload_signed_verifies_with_the_official_library(payload, msg_id):
    secret = generate_secret()
    request = build_request(msg_id, "x", "ts", payload, [secret], int(datetime.now().timestamp()))
    assert Webhook(secret).verify(request.body, _headers(request))["data"] == payload
