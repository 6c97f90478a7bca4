"""Standard Webhooks signatures, checked with the official verifiers."""

from __future__ import annotations

import base64
import time
from datetime import datetime, timedelta

import pytest
import svix
from cryptography.exceptions import InvalidSignature
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from tests.verifiers import V1aVerificationError, verify_v1a
from webhooks.delivery.outgoing import active_secrets, build_request
from webhooks.delivery.signing import (
    generate_secret,
    generate_signing_key,
    is_valid_secret,
    private_key,
    public_key,
    scheme_of,
    secret_key,
    shared_secret,
    sign,
)


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


# -- v1a: ed25519 --------------------------------------------------------------------------------

#: The test vector of the Standard Webhooks Go library (webhook_asymmetric_test.go): a 32-byte seed.
SPEC_SEED = "VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk="
SPEC_V1A = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="


def test_v1a_signature_matches_the_reference_library_vector_in_both_key_forms():
    seed_form = "whsk_" + SPEC_SEED
    seed = base64.b64decode(SPEC_SEED)
    full_form = "whsk_" + base64.b64encode(seed + base64.b64decode(public_key(seed_form)[5:])).decode()
    body = b'{"test": 2432232314}'
    for key in (seed_form, full_form):
        assert sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == SPEC_V1A


def test_a_signing_key_is_whsk_of_seed_and_public_key_and_its_public_key_is_whpk_of_32_bytes():
    key = generate_signing_key()
    raw = base64.b64decode(key.removeprefix("whsk_"), validate=True)
    public = public_key(key)
    assert key.startswith("whsk_") and len(raw) == 64
    assert public is not None and public.startswith("whpk_")
    assert base64.b64decode(public.removeprefix("whpk_")) == raw[32:]
    assert (scheme_of(key), shared_secret(key)) == ("v1a", None)
    assert generate_signing_key() != key


def test_a_v1_secret_has_no_public_key_and_is_its_own_shared_secret():
    secret = generate_secret()
    assert (scheme_of(secret), public_key(secret), shared_secret(secret)) == ("v1", None, secret)


@pytest.mark.parametrize(
    "bad",
    [
        "whsk_!!!",
        "whsk_" + base64.b64encode(b"x" * 31).decode(),
        # a seed followed by a public key that is not its own
        "whsk_" + base64.b64encode(b"s" * 32 + b"p" * 32).decode(),
        "whsec_" + base64.b64encode(b"x" * 32).decode(),
    ],
)
def test_malformed_signing_keys_are_refused(bad):
    with pytest.raises(ValueError):
        private_key(bad)


def test_a_v1a_request_verifies_with_the_public_key_alone_and_not_with_another():
    key = generate_signing_key()
    request = build_request("evt_1", "order.created", "ts", {"a": 1}, [key], int(time.time()))
    assert request.headers["webhook-signature"].startswith("v1a,")
    assert verify_v1a(public_key(key), request.body, request.headers)["data"] == {"a": 1}
    with pytest.raises(V1aVerificationError):
        verify_v1a(public_key(generate_signing_key()), request.body, request.headers)
    with pytest.raises(V1aVerificationError):
        verify_v1a(public_key(key), request.body.replace(b"1", b"2"), request.headers)


def test_during_a_v1a_rotation_both_public_keys_verify_and_after_it_only_the_new_one():
    old, new = generate_signing_key(), generate_signing_key()
    now = datetime.utcnow()
    during = build_request("evt_1", "t", "ts", {}, active_secrets(new, old, now + timedelta(hours=1), now), int(time.time()))
    assert [s.split(",")[0] for s in during.headers["webhook-signature"].split(" ")] == ["v1a", "v1a"]
    for key in (old, new):
        verify_v1a(public_key(key), during.body, during.headers)
    after = build_request("evt_1", "t", "ts", {}, active_secrets(new, old, now - timedelta(seconds=1), now), int(time.time()))
    verify_v1a(public_key(new), after.body, after.headers)
    with pytest.raises(V1aVerificationError):
        verify_v1a(public_key(old), after.body, after.headers)


def test_switching_from_v1_to_v1a_sends_both_kinds_and_each_verifier_finds_its_own():
    old, new = generate_secret(), generate_signing_key()
    request = build_request("evt_1", "t", "ts", {}, [new, old], int(time.time()))
    assert Webhook(old).verify(request.body, _headers(request))["type"] == "t"
    assert verify_v1a(public_key(new), request.body, request.headers)["type"] == "t"


@settings(max_examples=30, deadline=None)
@given(body=st.binary(max_size=200), msg_id=st.from_regex(r"evt_[0-9a-z]{26}", fullmatch=True),
       timestamp=st.integers(0, 2**40))
def test_any_v1a_signature_verifies_with_its_public_key_only_over_the_exact_content(body, msg_id, timestamp):
    key = private_key(generate_signing_key())
    signature = sign("whsk_" + base64.b64encode(key.private_bytes_raw()).decode(), msg_id, timestamp, body)
    version, _, encoded = signature.partition(",")
    assert version == "v1a"
    content = f"{msg_id}.{timestamp}.".encode() + body
    key.public_key().verify(base64.b64decode(encoded), content)  # raises InvalidSignature on mismatch
    with pytest.raises(InvalidSignature):
        key.public_key().verify(base64.b64decode(encoded), content + b" ")
