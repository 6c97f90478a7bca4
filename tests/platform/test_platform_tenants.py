"""/v1/tenants with a platform key: create, list and search, read by id or uid, change, delete."""

from __future__ import annotations

from types import SimpleNamespace

from flask.testing import FlaskClient


def create(client: FlaskClient, platform: dict[str, str], **body: object) -> dict:
    response = client.post("/v1/tenants", json=body, headers=platform)
    assert response.status_code == 201, response.json
    return response.json


def test_a_platform_key_creates_a_tenant_with_its_uid_and_metadata(client: FlaskClient, platform: dict[str, str]) -> None:
    response = client.post("/v1/tenants", json={"name": "Acme", "uid": "cus_42", "metadata": {"plan": "pro"}},
                           headers=platform)

    assert response.status_code == 201
    body = response.json
    assert body["id"].startswith("ten_") and body["name"] == "Acme" and body["uid"] == "cus_42"
    assert body["metadata"] == {"plan": "pro"} and body["created_at"].endswith("Z")
    assert response.headers["Location"].endswith(f"/v1/tenants/{body['id']}")


def test_a_tenant_is_read_by_its_id_or_its_uid(client: FlaskClient, platform: dict[str, str]) -> None:
    tenant = create(client, platform, name="Acme", uid="cus_42")

    assert client.get(f"/v1/tenants/{tenant['id']}", headers=platform).json == tenant
    assert client.get("/v1/tenants/cus_42", headers=platform).json == tenant
    assert client.get("/v1/tenants/cus_43", headers=platform).status_code == 404


def test_a_taken_uid_or_name_is_a_409_naming_the_field(client: FlaskClient, platform: dict[str, str]) -> None:
    create(client, platform, name="Acme", uid="cus_42")

    uid = client.post("/v1/tenants", json={"name": "Other", "uid": "cus_42"}, headers=platform)
    name = client.post("/v1/tenants", json={"name": "ACME"}, headers=platform)

    assert uid.status_code == 409 and "uid" in uid.json["errors"]["json"]
    assert name.status_code == 409 and "name" in name.json["errors"]["json"]


def test_a_bad_uid_is_a_422_that_says_what_a_uid_may_hold(client: FlaskClient, platform: dict[str, str]) -> None:
    for uid in ["", "has space", "x" * 65, "ten_01jd0000000000000000000000", "é"]:
        response = client.post("/v1/tenants", json={"name": "Acme", "uid": uid}, headers=platform)

        assert response.status_code == 422, uid
        assert "letters, digits" in response.json["errors"]["json"]["uid"][0]


def test_the_list_pages_with_a_cursor_and_searches_name_and_uid(client: FlaskClient, platform: dict[str, str]) -> None:
    made = [create(client, platform, name=f"Shop {n}", uid=f"cus_{n}") for n in range(3)]
    create(client, platform, name="100% Bakery", uid="b_1")

    first = client.get("/v1/tenants?limit=2", headers=platform).json
    second = client.get(f"/v1/tenants?limit=2&cursor={first['next_cursor']}", headers=platform).json

    assert [t["id"] for t in first["data"]] == [t["id"] for t in made[:2]] and first["has_more"] is True
    assert [t["name"] for t in second["data"]] == ["Shop 2", "100% Bakery"] and second["next_cursor"] is None
    assert [t["name"] for t in client.get("/v1/tenants?search=shop", headers=platform).json["data"]] == [
        "Shop 0", "Shop 1", "Shop 2"]
    assert [t["uid"] for t in client.get("/v1/tenants?search=cus_1", headers=platform).json["data"]] == ["cus_1"]
    assert [t["uid"] for t in client.get("/v1/tenants?search=0%25", headers=platform).json["data"]] == ["b_1"]
    assert client.get("/v1/tenants?search=S_op", headers=platform).json["data"] == []  # '_' is no wildcard


def test_patch_changes_name_uid_and_metadata_and_null_clears_the_uid(
    client: FlaskClient, platform: dict[str, str]
) -> None:
    tenant = create(client, platform, name="Acme", uid="cus_42", metadata={"plan": "free"})

    changed = client.patch("/v1/tenants/cus_42", json={"name": "Acme Ltd", "metadata": {"plan": "pro"}},
                           headers=platform).json
    cleared = client.patch(f"/v1/tenants/{tenant['id']}", json={"uid": None}, headers=platform).json

    assert (changed["name"], changed["uid"], changed["metadata"]) == ("Acme Ltd", "cus_42", {"plan": "pro"})
    assert cleared["uid"] is None and client.get("/v1/tenants/cus_42", headers=platform).status_code == 404


def test_a_tenant_key_on_the_tenants_routes_is_a_403_that_names_the_platform_key(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    for response in (client.get("/v1/tenants", headers=headers), client.get(f"/v1/tenants/{tenant.id}", headers=headers),
                     client.get(f"/v1/tenants/{tenant.id}/endpoints", headers=headers)):
        assert response.status_code == 403
        assert "platform API key" in response.json["message"]


def test_no_key_on_the_tenants_routes_is_a_401(client: FlaskClient) -> None:
    assert client.get("/v1/tenants").status_code == 401
