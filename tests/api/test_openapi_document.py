"""The OpenAPI document states the rules the server enforces (formats, patterns, required bodies, cursors)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint


@pytest.fixture
def spec(client: FlaskClient) -> dict[str, Any]:
    return client.get("/openapi.json").json


def test_the_url_of_an_endpoint_is_documented_as_a_non_empty_http_or_https_url(spec: dict[str, Any]) -> None:
    url = spec["components"]["schemas"]["EndpointCreate"]["properties"]["url"]

    assert url["minLength"] == 1 and url["maxLength"] == 2048
    pattern = re.compile(url["pattern"])
    assert pattern.match("https://hooks.example.com/in?x=1") and pattern.match("http://[2001:db8::1]:8080/")
    assert not any(pattern.match(bad) for bad in ["", "ftp://example.com/", "http://", "http://a b/", "http://a\n"])


def test_a_rotated_secret_is_documented_as_whsec_and_base64_of_24_to_64_bytes(spec: dict[str, Any]) -> None:
    pattern = re.compile(spec["components"]["schemas"]["SecretRotate"]["properties"]["secret"]["pattern"])

    assert pattern.match("whsec_" + "A" * 32) and pattern.match("whsec_" + "A" * 84 + "AA==")
    assert not any(pattern.match(bad) for bad in ["whsec_", "whsec_" + "A" * 28, "whsec_" + "A" * 88, "sk_" + "A" * 32])


@pytest.mark.parametrize("path", ["/v1/endpoints", "/v1/events/{event_id}/attempts"])
def test_a_cursor_is_documented_as_the_opaque_next_cursor_and_a_bad_one_as_422(
    spec: dict[str, Any], path: str
) -> None:
    operation = spec["paths"][path]["get"]
    (cursor,) = [p for p in operation["parameters"] if p["name"] == "cursor"]

    assert "Opaque" in cursor["description"] and "next_cursor" in cursor["description"]
    assert "pattern" in cursor["schema"] and "422" in operation["responses"]


def test_a_bad_cursor_is_a_422_that_says_where_cursors_come_from(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.get("/v1/endpoints?cursor=att_00000000000000000000000000", headers=headers)

    assert response.status_code == 422
    assert response.json["errors"]["query"]["cursor"] == ["must be the next_cursor of a previous page of this list"]


def test_patch_documents_a_required_body_and_the_server_requires_one(
    spec: dict[str, Any], client: FlaskClient, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers)

    assert spec["paths"]["/v1/endpoints/{endpoint_id}"]["patch"]["requestBody"]["required"] is True
    assert client.patch(f"/v1/endpoints/{endpoint['id']}", headers=headers).status_code == 415


def test_the_idempotency_key_rule_is_in_the_operation_description(spec: dict[str, Any]) -> None:
    operation = spec["paths"]["/v1/events"]["post"]

    assert "both: they must be equal, else 409" in operation["description"]
    assert "409" in operation["responses"]


def test_last_success_at_is_documented_with_its_lag_as_the_code_has_it(spec: dict[str, Any]) -> None:
    from pathlib import Path

    from webhooks.health.presence import LAST_SUCCESS_RESOLUTION_SECONDS

    lag = int(LAST_SUCCESS_RESOLUTION_SECONDS)
    for schema in ("Endpoint", "EndpointHealth"):
        described = spec["components"]["schemas"][schema]["properties"]["last_success_at"]["description"]
        assert f"up to {lag} seconds" in described, schema
    customers = (Path(__file__).resolve().parents[2] / "docs" / "customers.md").read_text()
    assert re.search(rf"`last_success_at`, which is\s+recorded at most once a minute .* up to {lag} s", customers,
                     re.DOTALL)
