"""SSRF end to end: the production policy through the API and a real worker; loopback opened only on purpose.

(IP literals refused at registration are in test_api_endpoints.py, the address rules in test_netguard.py.)
"""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask import Flask

from tests.api_helpers import create_endpoint, post_event, row_counts
from tests.conftest import wait_until
from tests.receivers import Receiver
from webhooks.config import Settings
from webhooks.delivery.netguard import RESOLVES_TO_BLOCKED
from webhooks.storage.models import Attempt, Delivery, Endpoint


@pytest.fixture
def private_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Names that resolve to internal addresses (``socket.getaddrinfo`` answers them; others fail)."""
    table = {"intranet.example": "10.0.0.1", "metadata.example": "169.254.169.254", "sneaky.example": "::1"}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host in table:
            family = socket.AF_INET6 if ":" in table[host] else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (table[host], port or 80))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


@pytest.mark.parametrize("name", ["intranet.example", "metadata.example", "sneaky.example"])
def test_a_name_resolving_to_an_internal_address_is_refused_with_422_naming_the_name_not_the_address(
    make_app: Callable[..., Flask], headers: dict[str, str], private_dns: dict[str, str], name: str
) -> None:
    client = make_app(allow_private_targets=False).test_client()
    before = row_counts()

    response = client.post("/v1/endpoints", json={"url": f"https://{name}/hook"}, headers=headers)

    assert response.status_code == 422
    (message,) = response.json["errors"]["json"]["url"]
    assert message == f"{name} {RESOLVES_TO_BLOCKED}"
    assert private_dns[name] not in response.get_data(as_text=True)  # no tenant reads our DNS answers
    assert row_counts() == before


def test_allowed_target_networks_open_loopback_on_purpose_for_registration_and_delivery(
    make_app: Callable[..., Flask],
    make_settings: Callable[..., Settings],
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    start_worker: Callable[[Settings], object],
) -> None:
    policy = {"allow_private_targets": False, "allowed_target_networks": "127.0.0.0/8"}
    client = make_app(**policy).test_client()
    headers = auth(tenant)
    with Receiver() as receiver:
        create_endpoint(client, headers, url=receiver.url + "/hook")
        ipv6_loopback = client.post("/v1/endpoints", json={"url": "http://[::1]:9/hook"}, headers=headers)
        private = client.post("/v1/endpoints", json={"url": "http://10.0.0.1/hook"}, headers=headers)
        start_worker(make_settings(**policy))

        event = post_event(client, headers).json
        (request,) = receiver.wait_for(1, timeout=10)

    assert request.headers["webhook-id"] == event["id"]
    assert ipv6_loopback.status_code == 422 and "loopback" in ipv6_loopback.json["errors"]["json"]["url"][0]
    assert private.status_code == 422 and "private" in private.json["errors"]["json"]["url"][0]


def test_a_worker_under_the_production_policy_never_calls_a_loopback_endpoint(
    client: Any,
    make_settings: Callable[..., Settings],
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    start_worker: Callable[[Settings], object],
) -> None:
    headers = auth(tenant)
    with Receiver() as receiver:
        # Registered while private targets were allowed (or before a DNS change): the connect-time check decides.
        create_endpoint(client, headers, url=receiver.url + "/hook")
        start_worker(make_settings(allow_private_targets=False))

        event = post_event(client, headers).json
        delivery = event["deliveries"][0]["id"]
        attempt = wait_until(lambda: Attempt.get_or_none(Attempt.delivery == delivery))

        assert receiver.requests == []
    assert attempt.error_class == "blocked_address"
    # One vocabulary: the attempt says what went wrong in the words of its delivery.
    assert attempt.error == Delivery.get_by_id(delivery).last_error == "blocked_address: 127.0.0.1 is a loopback address"


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/",
                                 "http://100.100.100.200/latest/meta-data/", "http://metadata.example/computeMetadata/"])
def test_dev_mode_refuses_cloud_metadata_endpoints_with_422(
    make_app: Callable[..., Flask], headers: dict[str, str], private_dns: dict[str, str], url: str
) -> None:
    client = make_app(allow_private_targets=True).test_client()
    before = row_counts()

    response = client.post("/v1/endpoints", json={"url": url}, headers=headers)

    assert response.status_code == 422
    (message,) = response.json["errors"]["json"]["url"]
    host = url.split("/")[2]
    # An address the URL names is explained; what a name resolves to is not told.
    assert message == (f"{host} {RESOLVES_TO_BLOCKED}" if host == "metadata.example"
                       else f"{host.strip('[]')} is a cloud metadata service address")
    assert row_counts() == before


def test_a_dev_mode_worker_never_calls_a_metadata_address_registered_before_the_rule(
    client: Any,
    make_settings: Callable[..., Settings],
    tenant: SimpleNamespace,
    auth: Callable[..., dict[str, str]],
    start_worker: Callable[[Settings], object],
) -> None:
    headers = auth(tenant)
    endpoint = create_endpoint(client, headers)
    Endpoint.update(url="http://169.254.169.254/latest/meta-data/").where(Endpoint.id == endpoint["id"]).execute()
    start_worker(make_settings(allow_private_targets=True))

    delivery = post_event(client, headers).json["deliveries"][0]["id"]
    attempt = wait_until(lambda: Attempt.get_or_none(Attempt.delivery == delivery))

    assert attempt.error_class == "blocked_address" and attempt.response_status is None
    assert "169.254.169.254 is a cloud metadata service" in attempt.error


def test_an_ipv4_mapped_url_is_registered_and_delivered_to_its_ipv4_address_where_that_is_allowed(
    client: Any, headers: dict[str, str], settings: Settings, start_worker: Callable[[Settings], object]
) -> None:
    with Receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", "[::ffff:127.0.0.1]") + "/hook"
        create_endpoint(client, headers, url=url)  # dev mode: loopback allowed, as [::1] is
        start_worker(settings)

        event = post_event(client, headers).json
        (request,) = receiver.wait_for(1, timeout=10)
        wait_until(lambda: Delivery.get(Delivery.event == event["id"]).status == "delivered")

    assert request.headers["webhook-id"] == event["id"]
