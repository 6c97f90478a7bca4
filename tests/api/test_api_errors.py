"""Errors are always JSON: routing (404/405), bodies (400/413), keys (401), failures (500); ops routes."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import DEAD_AMQP_URL, row_counts
from webhooks import readiness as health
from webhooks.api import events as events_api
from webhooks.ingest.auth_keys import revoke_api_keys
from webhooks.storage.models import Event, Tenant

#: The helpers' fixtures (``headers``, ``make_app``); to merge into conftest.py.

BIG_BODY = b'{"event_type": "a", "payload": {"blob": "' + b"x" * 300_000 + b'"}}'


def assert_json_error(response: Any, code: int) -> dict[str, Any]:
    assert response.status_code == code
    assert response.mimetype == "application/json"
    body = response.json
    assert body["code"] == code and isinstance(body["status"], str)
    return body


# --- routing -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/nope", "/v1/nope", "/v1/endpoints/ep_x/nothing", "/v2/events"])
def test_unknown_route_is_404_json(client: FlaskClient, headers: dict[str, str], path: str) -> None:
    body = assert_json_error(client.get(path, headers=headers), 404)

    assert body["status"] == "Not Found" and body["message"]


def test_wrong_method_is_405_json_with_allow_header(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.put("/v1/endpoints", json={}, headers=headers)

    assert_json_error(response, 405)
    assert set(response.headers["Allow"].split(", ")) >= {"GET", "POST"}


# --- bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/events", "/v1/endpoints"])
def test_oversized_body_is_413_json_and_nothing_is_written(
    client: FlaskClient, headers: dict[str, str], path: str
) -> None:
    before = row_counts()

    response = client.post(path, data=BIG_BODY, content_type="application/json", headers=headers)

    body = assert_json_error(response, 413)
    assert "262144" in body["message"]
    assert row_counts() == before


def test_oversized_body_is_refused_before_it_is_parsed(client: FlaskClient, headers: dict[str, str]) -> None:
    garbage = b"{" * 300_000  # would be a 400 if anything tried to parse it

    response = client.post("/v1/events", data=garbage, content_type="application/json", headers=headers)

    assert_json_error(response, 413)


def test_body_just_under_the_limit_is_parsed(client: FlaskClient, headers: dict[str, str]) -> None:
    padding = "x" * (262_144 - 100)
    response = client.post("/v1/events", json={"event_type": "a", "payload": {"p": padding}}, headers=headers)

    assert response.status_code == 202


@pytest.mark.parametrize("data", [b'{"event_type": ', b"not json", b'{"a": 1,}', b"\xff\xfe"])
def test_malformed_json_is_400_json_and_nothing_is_written(
    client: FlaskClient, headers: dict[str, str], data: bytes
) -> None:
    before = row_counts()

    response = client.post("/v1/events", data=data, content_type="application/json", headers=headers)

    body = assert_json_error(response, 400)
    assert "json" in body["errors"]
    assert row_counts() == before


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ('{"n": NaN}', "NaN is not valid JSON"),
        ('{"n": -Infinity}', "-Infinity is not valid JSON"),
        ('{"n": 1e400}', "out of range"),
        ('{"n": ' + "9" * 5000 + "}", "digits"),
        ('{"n": ' + "[" * 64 + "]" * 64 + "}", "nested deeper than 64 levels"),
        ('{"n": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
    ],
)
def test_json_that_is_not_plain_json_is_400_saying_why(
    client: FlaskClient, headers: dict[str, str], payload: str, reason: str
) -> None:
    body = '{"event_type": "a", "payload": ' + payload + "}"

    response = client.post("/v1/events", data=body, content_type="application/json", headers=headers)

    errors = assert_json_error(response, 400)["errors"]
    assert reason in errors["json"][0]
    assert Event.select().count() == 0


def test_nesting_up_to_the_limit_is_accepted(client: FlaskClient, headers: dict[str, str]) -> None:
    nested = "[" * 62 + "]" * 62  # plus the body object and the payload object: 64 levels
    body = '{"event_type": "a", "payload": {"n": ' + nested + "}}"

    response = client.post("/v1/events", data=body, content_type="application/json", headers=headers)

    assert response.status_code == 202


def test_syntax_errors_say_where(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.post("/v1/events", data=b'{"a": }', content_type="application/json", headers=headers)

    assert "char 6" in assert_json_error(response, 400)["errors"]["json"][0]


@pytest.mark.parametrize("path", ["/v1/events", "/v1/endpoints"])
@pytest.mark.parametrize("document", [b"null", b"[]", b'"hi"', b"42", b'["http://127.0.0.1/hook"]'])
def test_json_that_is_not_an_object_is_422_expected_a_json_object(
    client: FlaskClient, headers: dict[str, str], path: str, document: bytes
) -> None:
    response = client.post(path, data=document, content_type="application/json", headers=headers)

    assert assert_json_error(response, 422)["errors"] == {"json": {"_schema": ["expected a JSON object"]}}


def test_a_batch_that_is_not_an_array_of_objects_says_which(client: FlaskClient, headers: dict[str, str]) -> None:
    not_an_array = client.post("/v1/events/batch", data=b"null", content_type="application/json", headers=headers)
    not_objects = client.post("/v1/events/batch", json=[{"event_type": "a", "payload": {}}, 42], headers=headers)

    assert assert_json_error(not_an_array, 422)["errors"] == {"json": {"_schema": ["expected a JSON array of objects"]}}
    assert assert_json_error(not_objects, 422)["errors"] == {"json": {"1": {"_schema": ["expected a JSON object"]}}}


@pytest.mark.parametrize("path, body, field, message", [
    ("/v1/events", {"event_type": "a", "payload": {}, "idempotency_key": "a\x00b"}, "idempotency_key",
     "must not contain NUL characters"),
    ("/v1/endpoints", {"url": "ftp://example.com/hook"}, "url", "URL scheme must be http, https, amqp, amqps, redis, rediss or mailto, not 'ftp'"),
    ("/v1/endpoints", {"url": "http://127.0.0.1/hook", "description": "a\x00b"}, "description",
     "must not contain NUL characters"),
])
def test_a_field_refused_by_several_checks_gets_one_message_the_clearest(
    client: FlaskClient, headers: dict[str, str], path: str, body: dict[str, Any], field: str, message: str
) -> None:
    response = client.post(path, json=body, headers=headers)

    assert assert_json_error(response, 422)["errors"] == {"json": {field: [message]}}


def test_a_bad_secret_on_rotate_gets_one_message(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = client.post("/v1/endpoints", json={"url": "http://127.0.0.1/hook"}, headers=headers).json

    response = client.post(f"/v1/endpoints/{endpoint['id']}/secret/rotate", json={"secret": "nope"}, headers=headers)

    assert assert_json_error(response, 422)["errors"] == {
        "json": {"secret": ["must be 'whsec_' followed by the base64 of 24 to 64 bytes"]}}


def test_an_ipv4_mapped_ipv6_url_is_judged_by_its_address_not_refused_as_malformed(
    client: FlaskClient, headers: dict[str, str], make_app: Callable[..., Flask]
) -> None:
    mapped, native = "http://[::ffff:127.0.0.1]:9009/", "http://[::1]:9009/"

    allowed = [client.post("/v1/endpoints", json={"url": url}, headers=headers) for url in (mapped, native)]
    production = make_app(allow_private_targets=False).test_client()
    refused = production.post("/v1/endpoints", json={"url": mapped}, headers=headers)

    assert [response.status_code for response in allowed] == [201, 201]  # where private targets are allowed
    assert assert_json_error(refused, 422)["errors"] == {"json": {"url": [
        "::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback address"]}}


# --- keys --------------------------------------------------------------------------------


def assert_unauthorized(response: Any, says: str) -> None:
    body = assert_json_error(response, 401)
    assert says in body["message"]
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_missing_authorization_header_is_401_saying_so(client: FlaskClient) -> None:
    assert_unauthorized(client.get("/v1/endpoints"), "missing Authorization header")


@pytest.mark.parametrize("value", ["Basic dXNlcjpwdw==", "Bearer", "Bearer   ", "Token abc"])
def test_malformed_authorization_header_is_401_saying_so(client: FlaskClient, value: str) -> None:
    assert_unauthorized(client.get("/v1/endpoints", headers={"Authorization": value}), "malformed Authorization header")


def test_wrong_keys_are_401_invalid_key(client: FlaskClient, tenant: SimpleNamespace) -> None:
    key_id, _, secret = tenant.api_key.partition(".")
    wrong = [
        f"{key_id}.{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}",  # right id, wrong secret
        f"key_{'0' * 26}.{secret}",  # unknown id
        key_id,  # no secret
        "garbage",
    ]

    for key in wrong:
        assert_unauthorized(client.get("/v1/endpoints", headers={"Authorization": f"Bearer {key}"}), "invalid API key")


def test_scheme_name_is_case_insensitive(client: FlaskClient, tenant: SimpleNamespace) -> None:
    response = client.get("/v1/endpoints", headers={"Authorization": f"bearer {tenant.api_key}"})

    assert response.status_code == 200


def test_revoked_key_is_401(client: FlaskClient, tenant: SimpleNamespace, auth: Callable[..., dict[str, str]]) -> None:
    assert client.get("/v1/endpoints", headers=auth(tenant)).status_code == 200
    revoke_api_keys(Tenant.get_by_id(tenant.id))

    assert_unauthorized(client.get("/v1/endpoints", headers=auth(tenant)), "invalid API key")


def test_unauthenticated_write_is_refused_before_validation_and_writes_nothing(client: FlaskClient) -> None:
    before = row_counts()

    response = client.post("/v1/events", json={"event_type": "a", "payload": {}})
    invalid = client.post("/v1/events", json={"bogus": 1}, headers={"Authorization": "Bearer nope.nope"})

    assert_unauthorized(response, "missing")
    assert_unauthorized(invalid, "invalid API key")
    assert row_counts() == before


# --- unexpected failures -----------------------------------------------------------------


def test_unexpected_error_is_500_json_that_leaks_nothing_and_is_logged(
    client: FlaskClient,
    headers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError('relation "event" violates secret_internal_detail')

    monkeypatch.setattr(events_api.ingest, "store_events", explode)

    with caplog.at_level(logging.ERROR):
        response = client.post("/v1/events", json={"event_type": "a", "payload": {}}, headers=headers)

    body = assert_json_error(response, 500)
    assert body["status"] == "Internal Server Error"
    assert "secret_internal_detail" not in response.get_data(as_text=True)
    assert "RuntimeError" not in response.get_data(as_text=True)
    (record,) = [r for r in caplog.records if r.name == "webhooks.web"]
    assert "POST /v1/events" in record.getMessage()
    assert record.exc_info is not None and "secret_internal_detail" in str(record.exc_info[1])
    assert Event.select().count() == 0


# --- ops and documentation ---------------------------------------------------------------


def test_healthz_needs_no_key_and_reports_each_dependency(client: FlaskClient) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def test_healthz_with_the_broker_down_is_200_degraded(make_app: Callable[..., Flask]) -> None:
    response = make_app(amqp_url=DEAD_AMQP_URL).test_client().get("/healthz")

    assert response.status_code == 200
    assert response.json["status"] == "degraded"
    assert response.json["checks"]["database"] == "ok"
    assert response.json["checks"]["broker"].startswith("down")


def test_healthz_with_the_database_down_is_503(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "database_status", lambda: "down: OperationalError")

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json == {"status": "down", "checks": {"database": "down: OperationalError", "broker": "ok"}}


def test_openapi_document_lists_every_route_and_the_bearer_scheme(client: FlaskClient, app: Flask) -> None:
    response = client.get("/openapi.json")

    assert response.status_code == 200
    spec = response.json
    documented = {path.replace("{", "<").replace("}", ">") for path in spec["paths"]}
    routed = {rule.rule.replace("<event_id:", "<") for rule in app.url_map.iter_rules()
              if rule.rule.startswith(("/v1", "/healthz"))}
    assert documented == routed
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "A tenant API key, `<key_id>.<secret>`: the plain `/v1/…` routes, for its tenant.",
    }
    assert spec["security"] == [{"bearerAuth": []}]
    assert spec["paths"]["/healthz"]["get"]["security"] == []
    assert "EndpointCreate" in spec["components"]["schemas"]
    assert "422" in spec["paths"]["/v1/events"]["post"]["responses"]


def test_docs_page_is_served(client: FlaskClient) -> None:
    response = client.get("/docs")

    assert response.status_code == 200
    assert b"swagger-ui-bundle.js" in response.data and b"/openapi.json" in response.data
