"""Specification of the SSRF address policy (pure: nothing here opens a connection)."""

from __future__ import annotations

import ipaddress
import pickle
import re
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhooks.delivery.netguard import (
    RESOLVES_TO_BLOCKED,
    URL_PATTERN,
    split_url,
    BlockedAddress,
    TargetPolicy,
    Resolver,
    UnresolvableHost,
    blocked_reason,
    check_url,
    is_allowed_ip,
    resolve,
)

ip = ipaddress.ip_address

BLOCKED = {
    # IPv4
    "127.0.0.1": "loopback",
    "127.255.255.254": "loopback",
    "10.0.0.1": "private",
    "10.255.255.255": "private",
    "172.16.0.1": "private",
    "172.31.255.255": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "cloud metadata service",  # named before "link-local"
    "169.254.0.1": "link-local",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "240.0.0.1": "reserved",
    "255.255.255.255": "broadcast",
    "0.0.0.0": "unspecified",
    "0.1.2.3": "this network",
    "100.64.0.1": "CGNAT",
    "100.127.255.254": "CGNAT",
    "198.18.0.1": "benchmarking",
    "198.19.255.255": "benchmarking",
    "192.0.2.1": "documentation",
    "198.51.100.7": "documentation",
    "203.0.113.9": "documentation",
    "192.0.0.1": "reserved",
    # IPv6
    "::1": "loopback",
    "::": "unspecified",
    "fe80::1": "link-local",
    "fc00::1": "private",
    "fd12:3456::1": "private",
    "fec0::1": "site-local",
    "ff02::1": "multicast",
    "2001:db8::1": "documentation",
    "3fff::1": "documentation",
    "2001::1": "Teredo",
    "100::1": "discard",
    "1::1": "reserved",
    # IPv6 forms that embed an IPv4 address: the embedded address is judged
    "::ffff:127.0.0.1": "loopback",
    "::ffff:10.0.0.1": "private",
    "::ffff:169.254.169.254": "cloud metadata service",
    "::127.0.0.1": "loopback",  # IPv4-compatible
    "64:ff9b::a00:1": "private",  # NAT64 of 10.0.0.1
    "64:ff9b::7f00:1": "loopback",
    "64:ff9b:1::a9fe:a9fe": "cloud metadata service",  # local-use NAT64 of 169.254.169.254
    "2002:7f00:1::": "loopback",  # 6to4 of 127.0.0.1
    "2002:a00:1::": "private",  # 6to4 of 10.0.0.1
}

PUBLIC = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "11.0.0.1",
    "172.15.255.255",  # just below 172.16.0.0/12
    "172.32.0.1",  # just above it
    "100.63.255.255",  # just below 100.64.0.0/10
    "100.128.0.1",
    "198.17.255.255",  # around 198.18.0.0/15
    "198.20.0.1",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:93.184.216.34",  # IPv4-mapped public address
    "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
]


@pytest.mark.parametrize(("address", "why"), sorted(BLOCKED.items()))
def test_non_global_addresses_are_blocked_with_a_reason(address: str, why: str) -> None:
    assert not is_allowed_ip(ip(address))
    reason = blocked_reason(ip(address))
    assert reason is not None and why.lower() in reason.lower()


@pytest.mark.parametrize("address", PUBLIC)
def test_globally_routable_unicast_addresses_are_allowed(address: str) -> None:
    assert is_allowed_ip(ip(address))
    TargetPolicy().check_ip("example.com", address)  # does not raise


def test_link_local_with_a_zone_id_is_blocked() -> None:
    assert not is_allowed_ip(ip("fe80::1%eth0"))


def test_allowed_networks_open_only_the_listed_range() -> None:
    opened = (ipaddress.ip_network("10.1.0.0/16"),)
    assert is_allowed_ip(ip("10.1.2.3"), opened)
    assert is_allowed_ip(ip("::ffff:10.1.2.3"), opened)  # same address, IPv4-mapped
    assert not is_allowed_ip(ip("10.2.0.1"), opened)
    assert not is_allowed_ip(ip("127.0.0.1"), opened)
    assert not is_allowed_ip(ip("169.254.169.254"), opened)


def test_check_ip_says_the_name_is_not_allowed_and_keeps_address_and_reason_for_the_code() -> None:
    with pytest.raises(BlockedAddress) as caught:
        TargetPolicy().check_ip("example.internal", "10.0.0.5")
    assert str(caught.value) == f"example.internal {RESOLVES_TO_BLOCKED}"
    assert (caught.value.host, caught.value.address, caught.value.reason) == ("example.internal", "10.0.0.5", "private")


def test_check_ip_explains_an_embedded_ipv4_in_an_address_the_url_names() -> None:
    with pytest.raises(BlockedAddress, match=r"^::ffff:127\.0\.0\.1 is an IPv4-mapped form of 127\.0\.0\.1, a loopback"):
        TargetPolicy().check_ip("::ffff:127.0.0.1", "::ffff:127.0.0.1")
    with pytest.raises(BlockedAddress, match=f"^sneaky.example {re.escape(RESOLVES_TO_BLOCKED)}$"):
        TargetPolicy().check_ip("sneaky.example", "::ffff:127.0.0.1")


def test_check_ip_on_an_ip_literal_does_not_repeat_it() -> None:
    with pytest.raises(BlockedAddress, match=r"^127\.0\.0\.1 is a loopback address$"):
        TargetPolicy().check_ip("127.0.0.1", "127.0.0.1")


def test_allow_private_switches_the_guard_off() -> None:
    TargetPolicy(allow_private=True).check_ip("localhost", "127.0.0.1")


def test_blocked_address_survives_pickling() -> None:
    for exc in (BlockedAddress("h", "10.0.0.1", "private"), UnresolvableHost("h", "no such name")):
        copy = pickle.loads(pickle.dumps(exc))
        assert type(copy) is type(exc) and str(copy) == str(exc)


def test_policy_from_strings_parses_a_csv_of_networks() -> None:
    policy = TargetPolicy.from_strings(False, " 10.1.0.0/16, fd00:1::/64 ,,192.168.5.7")
    assert policy.allowed_networks == (
        ipaddress.ip_network("10.1.0.0/16"),
        ipaddress.ip_network("fd00:1::/64"),
        ipaddress.ip_network("192.168.5.7/32"),
    )
    assert not policy.allow_private
    assert TargetPolicy.from_strings(True, "") == TargetPolicy(allow_private=True)


@pytest.mark.parametrize("bad", ["bogus", "10.1.0.1/16", "10.0.0.0/33"])
def test_policy_from_strings_names_the_bad_entry(bad: str) -> None:
    with pytest.raises(ValueError, match=bad.replace(".", r"\.")):
        TargetPolicy.from_strings(False, f"10.1.0.0/16,{bad}")


def test_policy_is_frozen() -> None:
    with pytest.raises(AttributeError):
        TargetPolicy().allow_private = True  # type: ignore[misc]


# -- resolve ------------------------------------------------------------------------------------


def test_resolve_returns_ip_literals_without_asking_the_resolver() -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("resolver must not be called for an IP literal")

    assert resolve("127.0.0.1", 80, never) == ["127.0.0.1"]
    assert resolve("::1", 80, never) == ["::1"]
    assert resolve("[::1]", 80, never) == ["::1"]


def test_resolve_uses_the_injected_resolver_and_drops_duplicates() -> None:
    calls: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return ["192.0.2.1", "2001:db8::1", "192.0.2.1"]

    assert resolve("example.test", 8443, resolver) == ["192.0.2.1", "2001:db8::1"]
    assert calls == [("example.test", 8443)]


def test_resolve_uses_getaddrinfo_by_default() -> None:
    assert "127.0.0.1" in resolve("localhost", 80) or "::1" in resolve("localhost", 80)


def test_resolve_turns_gaierror_into_unresolvable_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", failing)
    with pytest.raises(UnresolvableHost, match="nowhere.test does not resolve"):
        resolve("nowhere.test", 80)


def test_resolve_rejects_a_resolver_answering_nonsense() -> None:
    with pytest.raises(UnresolvableHost, match="non-address"):
        resolve("odd.test", 80, lambda host, port: ["not-an-ip"])
    with pytest.raises(UnresolvableHost, match="no addresses"):
        resolve("empty.test", 80, lambda host, port: [])


# -- check_url ----------------------------------------------------------------------------------


def fixed(*answers: str) -> Resolver:
    """A resolver that always gives the same answers."""

    def resolver(host: str, port: int) -> list[str]:
        return list(answers)

    return resolver


def test_check_url_accepts_a_public_https_url() -> None:
    seen: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        seen.append((host, port))
        return ["93.184.216.34", "2606:4700:4700::1111"]

    check_url("https://hooks.example.com/in?x=1", TargetPolicy(), resolver)
    check_url("http://hooks.example.com:8080/in", TargetPolicy(), resolver)
    assert seen == [("hooks.example.com", 443), ("hooks.example.com", 8080)]


def test_check_url_blocks_a_name_resolving_to_a_private_address() -> None:
    with pytest.raises(BlockedAddress, match=f"^example.internal {re.escape(RESOLVES_TO_BLOCKED)}$"):
        check_url("https://example.internal/hook", TargetPolicy(), fixed("10.0.0.5"))


def test_check_url_blocks_if_any_resolved_address_is_not_allowed() -> None:
    with pytest.raises(BlockedAddress) as caught:
        check_url("https://mixed.example/", TargetPolicy(), fixed("93.184.216.34", "127.0.0.1"))
    assert caught.value.address == "127.0.0.1"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
    ],
)
def test_check_url_blocks_internal_ip_literals_without_dns(url: str) -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("no DNS for IP literals")

    with pytest.raises(BlockedAddress):
        check_url(url, TargetPolicy(), never)


def test_check_url_honours_allowed_networks() -> None:
    policy = TargetPolicy.from_strings(False, "10.1.0.0/16")
    check_url("http://partner.vpn/hook", policy, fixed("10.1.4.4"))
    with pytest.raises(BlockedAddress):
        check_url("http://other.vpn/hook", policy, fixed("10.2.4.4"))


def test_check_url_reports_an_unresolvable_name_distinctly() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(UnresolvableHost) as caught:
        check_url("https://no-such-host.test/", TargetPolicy(), resolver)
    assert isinstance(caught.value, BlockedAddress)
    assert "no-such-host.test" in str(caught.value)


def test_check_url_with_allow_private_accepts_a_name_that_does_not_resolve_yet() -> None:
    def nowhere(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    check_url("http://receiver.local:8080/hook", TargetPolicy(allow_private=True), nowhere)


METADATA_ADDRESSES = [
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2", "169.254.170.23", "fd00:ec2::23",
    "192.0.0.192", "169.254.0.23", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
]


@pytest.mark.parametrize("address", METADATA_ADDRESSES)
def test_metadata_services_stay_blocked_with_allow_private(address: str) -> None:
    with pytest.raises(BlockedAddress) as caught:
        TargetPolicy(allow_private=True).check_ip("h", address)

    assert "cloud metadata service" in caught.value.reason


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/",
                                 "http://100.100.100.200/latest/meta-data/", "http://metadata.example/"])
def test_check_url_with_allow_private_refuses_metadata_services_literal_or_resolved(url: str) -> None:
    with pytest.raises(BlockedAddress) as caught:
        check_url(url, TargetPolicy(allow_private=True), lambda host, port: ["169.254.169.254"])
    assert caught.value.reason == "cloud metadata service"


def test_allow_private_opens_loopback_and_private_networks_but_nothing_else_changes() -> None:
    policy = TargetPolicy(allow_private=True)
    for address in ["127.0.0.1", "::1", "10.1.2.3", "192.168.1.1", "169.254.1.1", "fd12::1", "100.64.0.1"]:
        policy.check_ip("h", address)


@pytest.mark.parametrize("networks", ["169.254.169.254/32", "169.254.169.254"])
def test_a_metadata_service_opens_only_when_allowed_target_networks_names_it(networks: str) -> None:
    TargetPolicy.from_strings(True, networks).check_ip("h", "169.254.169.254")
    TargetPolicy.from_strings(False, networks).check_ip("h", "169.254.169.254")
    with pytest.raises(BlockedAddress):
        TargetPolicy.from_strings(True, networks).check_ip("h", "100.100.100.200")


@pytest.mark.parametrize("networks", ["169.254.0.0/16", "0.0.0.0/0", "fd00::/8"])
def test_a_wider_allowed_network_does_not_open_a_metadata_service(networks: str) -> None:
    for allow_private in (True, False):
        policy = TargetPolicy.from_strings(allow_private, networks)
        for address in ("169.254.169.254", "fd00:ec2::254"):
            with pytest.raises(BlockedAddress) as caught:
                policy.check_ip("h", address)
            assert caught.value.reason == "cloud metadata service"


@given(st.from_regex(URL_PATTERN))
def test_every_url_the_documented_pattern_allows_splits_as_the_sender_will_send_it(url: str) -> None:
    split_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",  # unterminated IPv6 literal
        "http://example.com:abc/",
        "http:///path-only",
        "not a url",
        "http://exa mple.com/",
        "http://example.com:0/",
        "",
    ],
)
def test_check_url_rejects_a_malformed_url(url: str) -> None:
    with pytest.raises(ValueError):
        check_url(url, TargetPolicy(allow_private=True))


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)"])
def test_check_url_rejects_non_http_schemes(url: str) -> None:
    with pytest.raises(ValueError, match="http or https"):
        check_url(url, TargetPolicy(allow_private=True))


# -- properties ---------------------------------------------------------------------------------


@given(st.ip_addresses(network="10.0.0.0/8"))
def test_every_address_in_10_slash_8_is_blocked(address: ipaddress.IPv4Address) -> None:
    assert not is_allowed_ip(address)


@given(st.ip_addresses(network="127.0.0.0/8"))
def test_every_loopback_address_is_blocked(address: ipaddress.IPv4Address) -> None:
    assert not is_allowed_ip(address)


@given(st.ip_addresses(v=4))
def test_ipv6_wrappings_of_an_ipv4_get_the_same_verdict(address: ipaddress.IPv4Address) -> None:
    verdict = is_allowed_ip(address)
    packed = int(address)
    mapped = ipaddress.IPv6Address((0xFFFF << 32) | packed)
    nat64 = ipaddress.IPv6Address((0x0064FF9B << 96) | packed)
    sixtofour = ipaddress.IPv6Address((0x2002 << 112) | (packed << 80) | 1)
    assert is_allowed_ip(mapped) == is_allowed_ip(nat64) == is_allowed_ip(sixtofour) == verdict


@given(st.ip_addresses(network="fc00::/7") | st.ip_addresses(network="fe80::/10") | st.ip_addresses(network="ff00::/8"))
def test_every_ula_link_local_and_multicast_ipv6_is_blocked(address: ipaddress.IPv6Address) -> None:
    assert not is_allowed_ip(address)
