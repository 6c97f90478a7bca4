"""The Svix API's applications are our tenants: the official SDK lists, creates, gets-or-creates by uid,
reads by id or uid, upserts, patches and deletes them; errors are Svix's JSON, never HTML."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from svix.api import ApplicationIn, ApplicationListOptions, ApplicationPatch, Svix
from svix.api.errors.http_error import HttpError
from svix.api.errors.http_validation_error import HTTPValidationError


def test_health_answers_without_a_key(client: FlaskClient) -> None:
    assert client.get("/api/v1/health").status_code == 204


def test_an_application_is_a_tenant_with_its_uid(svix_client: Svix, client: FlaskClient,
                                                  platform: dict[str, str]) -> None:
    app = svix_client.application.create(ApplicationIn(name="Acme", uid="cus_42", metadata={"plan": "pro"}))

    assert app.id.startswith("ten_") and app.uid == "cus_42" and app.metadata == {"plan": "pro"}
    tenant = client.get("/v1/tenants/cus_42", headers=platform).json
    assert tenant["id"] == app.id and tenant["name"] == "Acme"


def test_get_or_create_returns_the_application_with_this_uid(svix_client: Svix, client: FlaskClient,
                                                             platform: dict[str, str]) -> None:
    first = svix_client.application.get_or_create(ApplicationIn(name="Acme", uid="cus_42"))
    again = svix_client.application.get_or_create(ApplicationIn(name="Acme", uid="cus_42"))

    assert again.id == first.id
    response = client.post("/api/v1/app?get_if_exists=true", json={"name": "Acme", "uid": "cus_42"}, headers=platform)
    assert response.status_code == 200 and response.json["id"] == first.id
    assert client.post("/api/v1/app", json={"name": "Beta", "uid": "cus_43"}, headers=platform).status_code == 201


def test_an_application_is_read_by_id_or_uid_patched_upserted_and_deleted(svix_client: Svix) -> None:
    app = svix_client.application.create(ApplicationIn(name="Acme", uid="cus_42"))

    assert svix_client.application.get("cus_42").id == app.id == svix_client.application.get(app.id).id
    patched = svix_client.application.patch("cus_42", ApplicationPatch(name="Acme Inc"))
    assert patched.name == "Acme Inc" and patched.uid == "cus_42"
    replaced = svix_client.application.upsert(app.id, ApplicationIn(name="Acme Ltd", uid="cus_42"))
    assert replaced.name == "Acme Ltd" and replaced.id == app.id
    created = svix_client.application.upsert("cus_99", ApplicationIn(name="New"))
    assert created.uid == "cus_99" and created.id != app.id

    svix_client.application.delete("cus_42")
    with pytest.raises(HttpError) as error:
        svix_client.application.get("cus_42")
    assert error.value.status_code == 404 and error.value.code == "not_found"


def test_applications_come_a_page_at_a_time(svix_client: Svix) -> None:
    ids = [svix_client.application.create(ApplicationIn(name=f"App {n}")).id for n in range(3)]

    first = svix_client.application.list(ApplicationListOptions(limit=2))
    assert [app.id for app in first.data] == ids[:2] and not first.done
    second = svix_client.application.list(ApplicationListOptions(limit=2, iterator=first.iterator))
    assert [app.id for app in second.data] == ids[2:] and second.done
    newest = svix_client.application.list(ApplicationListOptions(limit=1, order="descending"))
    assert [app.id for app in newest.data] == ids[-1:]


def test_errors_are_svix_json(client: FlaskClient, platform: dict[str, str]) -> None:
    no_key = client.get("/api/v1/app")
    assert no_key.status_code == 401 and no_key.json["code"] == "authentication_failed" and no_key.json["detail"]
    unknown = client.get("/api/v1/nowhere", headers=platform)
    assert unknown.status_code == 404 and unknown.is_json and set(unknown.json) == {"code", "detail"}
    limit = client.get("/api/v1/app?limit=251", headers=platform)
    assert limit.status_code == 422 and limit.json["detail"][0]["loc"] == ["query", "limit"]
    nameless = client.post("/api/v1/app", json={"uid": "x"}, headers=platform)
    assert nameless.status_code == 422
    assert nameless.json["detail"] == [{"loc": ["body", "name"], "msg": "Missing data for required field.",
                                        "type": "value_error"}]


def test_a_taken_uid_is_a_409_and_a_bad_one_a_422_through_the_sdk(svix_client: Svix) -> None:
    svix_client.application.create(ApplicationIn(name="Acme", uid="cus_42"))

    with pytest.raises(HttpError) as taken:
        svix_client.application.create(ApplicationIn(name="Other", uid="cus_42"))
    assert taken.value.status_code == 409 and "cus_42" in taken.value.detail
    with pytest.raises(HTTPValidationError):
        svix_client.application.create(ApplicationIn(name="Bad", uid="has space"))


def test_a_tenant_key_is_refused(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.get("/api/v1/app", headers=headers)
    assert response.status_code == 403 and response.json["code"] == "permission_denied"
