"""Request bodies are JSON sent as ``content-type: application/json``: anything else is a 415 saying so."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, row_counts

EXPECTED = "expected a JSON body sent with 'content-type: application/json'"


@pytest.mark.parametrize("path", ["/v1/events", "/v1/events/batch", "/v1/endpoints", "/v1/api-keys"])
@pytest.mark.parametrize(
    ("content_type", "said"),
    [
        ("application/x-www-form-urlencoded", ", not 'application/x-www-form-urlencoded'"),
        ("text/plain", ", not 'text/plain'"),
        (None, " (the request has no content type)"),
    ],
)
def test_a_post_whose_body_is_not_declared_json_is_415_naming_the_expected_content_type(
    client: FlaskClient, headers: dict[str, str], path: str, content_type: str | None, said: str
) -> None:
    before = row_counts()
    sent = {**headers, **({"Content-Type": content_type} if content_type else {})}

    response = client.post(path, data='{"event_type": "order.created", "payload": {}}', headers=sent)

    assert response.status_code == 415
    assert response.json["message"] == EXPECTED + said
    assert row_counts() == before


def test_a_post_with_no_body_where_one_is_required_is_415(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.post("/v1/events", headers=headers)

    assert response.status_code == 415 and response.json["message"].startswith(EXPECTED)


def test_a_patch_with_no_body_is_415_as_the_document_requires_one(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers)

    response = client.patch(f"/v1/endpoints/{endpoint['id']}", headers=headers)

    assert response.status_code == 415 and response.json["message"].startswith(EXPECTED)


def test_an_empty_json_body_where_one_is_required_is_400(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers)

    response = client.patch(
        f"/v1/endpoints/{endpoint['id']}", data="", headers={**headers, "Content-Type": "application/json"}
    )

    assert response.status_code == 400 and "empty" in response.json["message"]


def test_an_optional_body_may_be_left_out(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers)

    response = client.post(f"/v1/endpoints/{endpoint['id']}/secret/rotate", headers=headers)

    assert response.status_code == 200


def test_the_document_lists_415_on_every_operation_with_a_body(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").json["paths"]

    with_body = [(p, m, op) for p, ops in paths.items() for m, op in ops.items() if "requestBody" in op]

    assert with_body and all("415" in op["responses"] for _, _, op in with_body)
