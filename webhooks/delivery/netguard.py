"""Address policy for outbound webhook calls: which IPs a customer URL may reach (SSRF guard).

Used twice: at endpoint registration (``check_url``) and at socket connect time (``TargetPolicy.check_ip``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from yarl import URL

from webhooks.errors import WebhooksError

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``resolver(host, port) -> [ip, ...]``; injectable so tests can simulate DNS (and DNS rebinding).
Resolver: TypeAlias = Callable[[str, int], list[str]]

#: Schemes a webhook URL may use.
ALLOWED_SCHEMES = frozenset({"http", "https"})
#: Characters a (punycoded) DNS host name may contain; "_" appears in real-world records.
_HOSTNAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
#: Port used when the URL does not name one.
DEFAULT_PORTS = {"http": 80, "https": 443}


def _v4(cidr: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(cidr)


def _v6(cidr: str) -> ipaddress.IPv6Network:
    return ipaddress.IPv6Network(cidr)


#: IPv4 ranges that are never a legitimate webhook target, with the reason shown to users.
#: Order matters only for the wording: the first match names the reason.
BLOCKED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_v4("0.0.0.0/32"), "unspecified"),
    (_v4("0.0.0.0/8"), '"this network" (0.0.0.0/8)'),
    (_v4("10.0.0.0/8"), "private"),
    (_v4("100.64.0.0/10"), "shared/CGNAT (100.64.0.0/10)"),
    (_v4("127.0.0.0/8"), "loopback"),
    (_v4("169.254.0.0/16"), "link-local"),
    (_v4("172.16.0.0/12"), "private"),
    (_v4("192.0.0.0/24"), "reserved (IETF protocol assignments)"),
    (_v4("192.0.2.0/24"), "documentation"),
    (_v4("192.88.99.0/24"), "reserved (6to4 relay anycast)"),
    (_v4("192.168.0.0/16"), "private"),
    (_v4("198.18.0.0/15"), "benchmarking"),
    (_v4("198.51.100.0/24"), "documentation"),
    (_v4("203.0.113.0/24"), "documentation"),
    (_v4("224.0.0.0/4"), "multicast"),
    (_v4("255.255.255.255/32"), "broadcast"),
    (_v4("240.0.0.0/4"), "reserved"),
)

#: IPv6 ranges that are never a legitimate webhook target (embedded-IPv4 forms are unwrapped first).
BLOCKED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_v6("::/128"), "unspecified"),
    (_v6("::1/128"), "loopback"),
    (_v6("100::/64"), "reserved (discard-only)"),
    (_v6("2001::/23"), "reserved (IETF protocol assignments, incl. Teredo)"),
    (_v6("2001:db8::/32"), "documentation"),
    (_v6("3fff::/20"), "documentation"),
    (_v6("fc00::/7"), "private (unique local)"),
    (_v6("fe80::/10"), "link-local"),
    (_v6("fec0::/10"), "private (site-local)"),
    (_v6("ff00::/8"), "multicast"),
)

#: Cloud metadata services: they hand out instance credentials, so they stay blocked even with
#: ``ALLOW_PRIVATE_TARGETS=1``. Only an ``ALLOWED_TARGET_NETWORKS`` entry inside one of these ranges
#: (i.e. naming the address itself, e.g. ``169.254.169.254/32``) opens it; a wider one such as
#: ``169.254.0.0/16`` or ``0.0.0.0/0`` does not. Sources:
#: - 169.254.169.254: AWS EC2 IMDS (docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html),
#:   Google Cloud (cloud.google.com/compute/docs/metadata/overview), Azure IMDS
#:   (learn.microsoft.com/azure/virtual-machines/instance-metadata-service), Oracle Cloud
#:   (docs.oracle.com/iaas/Content/Compute/Tasks/gettingmetadata.htm), DigitalOcean, Hetzner, OpenStack Nova
#: - fd00:ec2::254: AWS EC2 IMDS over IPv6 (same AWS page)
#: - 169.254.170.2: AWS ECS task metadata and credentials (docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html)
#: - 169.254.170.23, fd00:ec2::23: AWS EKS Pod Identity agent (docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html)
#: - 100.100.100.200: Alibaba Cloud ECS metadata (alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata)
#: - 192.0.0.192: Oracle Cloud's legacy metadata address (same Oracle page)
#: - 169.254.0.23: Tencent Cloud CVM metadata, metadata.tencentyun.com (cloud.tencent.com/document/product/213/4934)
METADATA_SERVICES: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(cidr)
    for cidr in ("169.254.169.254/32", "fd00:ec2::254/128", "169.254.170.2/32", "169.254.170.23/32",
                 "fd00:ec2::23/128", "100.100.100.200/32", "192.0.0.192/32", "169.254.0.23/32")
)
#: The reason a metadata address is blocked, as messages show it.
METADATA_REASON = "cloud metadata service"

#: All globally routable IPv6 unicast lives here (RFC 4291 / IANA); anything else is reserved.
GLOBAL_UNICAST_V6 = _v6("2000::/3")
#: IPv4-compatible IPv6 (deprecated, ::a.b.c.d); :: and ::1 are matched before this.
IPV4_COMPATIBLE = _v6("::/96")
#: Well-known NAT64 prefix (RFC 6052): the last 32 bits are the IPv4 destination.
NAT64_WELL_KNOWN = _v6("64:ff9b::/96")
#: Local-use NAT64 prefix (RFC 8215); judged as if it used the /96 layout (IPv4 in the last 32 bits).
NAT64_LOCAL_USE = _v6("64:ff9b:1::/48")


#: What a refused name is said to resolve to (never the address itself, see ``BlockedAddress``).
RESOLVES_TO_BLOCKED = "resolves to an address that is not allowed (webhooks go to public addresses only)"


class BlockedAddress(WebhooksError):
    """A URL's host is (or resolves to) an address webhooks must not reach.

    For a name, the message says that it resolves to an address that is not allowed, never
    which address or what kind: it reaches the tenant (a 422, an attempt's error), and any
    tenant could otherwise read the service's DNS answers by registering names. ``address``
    and ``reason`` keep the detail for the code.
    """

    def __init__(self, host: str, address: str | None, reason: str) -> None:
        self.host = host
        self.address = address
        self.reason = reason
        if address is None or address == host:
            message = f"{host} is {_article(reason)} {reason} address"
        else:
            message = f"{host} {RESOLVES_TO_BLOCKED}"
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # Custom __init__ signature: keep the exception picklable (e.g. across worker processes).
        return (type(self), (self.host, self.address, self.reason))


class UnresolvableHost(BlockedAddress):
    """The host name does not resolve; the caller decides whether that is fatal."""

    def __init__(self, host: str, detail: str) -> None:
        self.detail = detail
        Exception.__init__(self, f"{host} does not resolve ({detail})")
        self.host = host
        self.address = None
        self.reason = "unresolvable"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.host, self.detail))


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    last32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in NAT64_WELL_KNOWN or ip in NAT64_LOCAL_USE:
        return last32, "NAT64"
    if ip in IPV4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are their own (blocked) classes
        return last32, "IPv4-compatible"
    return None


def _strip_scope(ip: IPAddress) -> IPAddress:
    # fe80::1%eth0 compares unequal to fe80::1; judge the bare address.
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return ipaddress.IPv6Address(int(ip))
    return ip


def _in_allowed(ip: IPAddress, allowed_networks: Sequence[IPNetwork]) -> bool:
    return any(ip.version == net.version and ip in net for net in allowed_networks)


def metadata_service(ip: IPAddress, allowed_networks: Sequence[IPNetwork] = ()) -> str | None:
    """The metadata service ``ip`` is (also in an embedded IPv4 form), unless an allowed network names it."""
    ip = _strip_scope(ip)
    if isinstance(ip, ipaddress.IPv6Address) and (embedded := _embedded_ipv4(ip)) is not None:
        inner, form = embedded
        reason = metadata_service(inner, allowed_networks)
        return None if reason is None else f"{form} form of {inner}, {_article(reason)} {reason}"
    for net in METADATA_SERVICES:
        if ip.version == net.version and ip in net:
            named = any(
                allowed.version == net.version and ip in allowed and allowed.subnet_of(net)  # type: ignore[arg-type]
                for allowed in allowed_networks
            )
            return None if named else METADATA_REASON
    return None


def blocked_reason(ip: IPAddress, allowed_networks: Sequence[IPNetwork] = ()) -> str | None:
    """Why ``ip`` must not be reached (e.g. ``"loopback"``), or None when it is allowed."""
    ip = _strip_scope(ip)
    metadata = metadata_service(ip, allowed_networks)
    if metadata is not None:
        return metadata
    if _in_allowed(ip, allowed_networks):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner, form = embedded
            inner_reason = blocked_reason(inner, allowed_networks)
            # Worded to read "..., an IPv4-mapped form of 127.0.0.1, a loopback address".
            return None if inner_reason is None else f"{form} form of {inner}, {_article(inner_reason)} {inner_reason}"
        for net, reason in BLOCKED_V6:
            if ip in net:
                return reason
        if ip not in GLOBAL_UNICAST_V6:
            return "reserved"
    else:
        for v4net, reason in BLOCKED_V4:
            if ip in v4net:
                return reason
    # Belt and braces: whatever else the stdlib knows is not global (its tables grow over time).
    if not ip.is_global or ip.is_multicast:
        return "non-global"
    return None


def is_allowed_ip(ip: IPAddress, allowed_networks: Sequence[IPNetwork] = ()) -> bool:
    """True only for globally routable unicast addresses, or ones inside ``allowed_networks``."""
    return blocked_reason(ip, allowed_networks) is None


@dataclass(frozen=True)
class TargetPolicy:
    """Which addresses outbound webhook calls may reach.

    ``allow_private`` opens every address but the cloud metadata services (local development, tests).
    ``allowed_networks`` opens specific ranges (e.g. a partner VPN) while keeping the rest closed; a
    metadata service only when an entry names it (``METADATA_SERVICES``).
    """

    allow_private: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    def check_ip(self, host: str, ip: str | IPAddress) -> None:
        """Raise BlockedAddress if ``host``'s address ``ip`` may not be reached."""
        address = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
        if self.allow_private:
            reason = metadata_service(address, self.allowed_networks)
        else:
            reason = blocked_reason(address, self.allowed_networks)
        if reason is not None:
            raise BlockedAddress(host, ip if isinstance(ip, str) else str(ip), reason)

    @classmethod
    def from_strings(cls, allow_private: bool, networks_csv: str) -> TargetPolicy:
        """Build from config: ``networks_csv`` is e.g. ``"10.1.0.0/16, fd00:1::/64"`` (may be empty)."""
        networks: list[IPNetwork] = []
        for entry in (part.strip() for part in networks_csv.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry))
            except ValueError as exc:
                raise ValueError(f"invalid network {entry!r} in allowed networks: {exc}") from exc
        return cls(allow_private=allow_private, allowed_networks=tuple(networks))


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def resolve(host: str, port: int, resolver: Resolver | None = None) -> list[str]:
    """Addresses ``host`` resolves to, in resolver order without duplicates; IP literals as-is.

    Raises UnresolvableHost when the name does not resolve (or the resolver answers nonsense).
    """
    if _literal(host) is not None:
        return [host.strip("[]")]
    try:
        if resolver is not None:
            answers = list(resolver(host, port))
        else:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            answers = [str(info[4][0]) for info in infos]
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError; bad IDNA is a UnicodeError
        raise UnresolvableHost(host, str(exc) or type(exc).__name__) from exc
    addresses: list[str] = []
    for answer in answers:
        if _literal(answer) is None:
            raise UnresolvableHost(host, f"resolver returned a non-address {answer!r}")
        if answer not in addresses:
            addresses.append(answer)
    if not addresses:
        raise UnresolvableHost(host, "no addresses")
    return addresses


_HEX = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
#: An IPv6 literal in brackets: the RFC 4291 forms with and without "::", in hexadecimal groups,
#: or ending in an IPv4 address (``[::ffff:127.0.0.1]``, ``[64:ff9b::1.2.3.4]``: the guard unwraps those).
_IPV6_LITERAL = r"\[(?:" + "|".join(
    [f"(?:{_HEX}:){{7}}{_HEX}", f"(?:{_HEX}:){{1,7}}:"]
    + [f"(?:{_HEX}:){{1,{6 - i}}}(?::{_HEX}){{1,{i + 1}}}" for i in range(6)]
    + [f":(?:(?::{_HEX}){{1,7}}|:)"]
    + [f"(?:{_HEX}:){{6}}{_IPV4}", f"::(?:{_HEX}:){{0,5}}{_IPV4}"]
    + [f"(?:{_HEX}:){{1,{5 - i}}}:(?:{_HEX}:){{{i}}}{_IPV4}" for i in range(5)]
) + r")\]"
#: A port 1..65535 without leading zeros.
_PORT = r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?"
#: The webhook URLs the API accepts, as a regex that reads the same in Python and in ECMA (OpenAPI):
#: http(s), a host name (letters, digits, "-", "_", dots) or an IPv6 literal, an optional port, then
#: printable ASCII. Every string it matches passes ``split_url`` (tests/delivery/test_netguard.py checks that
#: with generated strings), so the documented pattern is exactly what the server enforces.
#: ``$(?!\n)``: Python's ``$`` also matches before a final newline.
#: A host name; four dot-separated numbers only as a valid IPv4 address (``1.2.3.04`` is refused).
_HOST = (
    rf"{_IPV4}"
    r"|(?![0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(?![A-Za-z0-9_.-]))[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?"
)
#: The authority of a URL as the API accepts it for every kind of destination: a host name, an IPv4
#: address or a bracketed IPv6 literal, and an optional port.
HOST_AND_PORT_PATTERN = rf"(?:{_HOST}|{_IPV6_LITERAL}){_PORT}"
URL_PATTERN = (
    rf"^[Hh][Tt][Tt][Pp][Ss]?://{HOST_AND_PORT_PATTERN}"
    r"(?:[/?#][\x21-\x7e]*)?$(?!\n)"
)


def split_url(url: str, default_ports: Mapping[str, int] = DEFAULT_PORTS) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a webhook URL, parsed by yarl, as the sender's aiohttp will send it.

    Raises ValueError for a malformed URL, a scheme not in ``default_ports`` (http(s) unless another
    kind of destination names its own) or a missing host. An IPv6
    literal is named as it was written (yarl shortens ``::ffff:127.0.0.1`` to ``::ffff:7f00:1``).
    """
    try:
        # yarl's parser, the sender's own: the host checked here is the host aiohttp connects to.
        parsed = URL(url)
        port = parsed.port
    except (ValueError, TypeError) as exc:
        raise ValueError(f"malformed URL: {exc}") from exc
    scheme = parsed.scheme
    if scheme not in default_ports:
        raise ValueError(f"URL scheme must be {' or '.join(default_ports)}, not {scheme or 'missing'!r}")
    host = parsed.raw_host or ""
    if not host:
        raise ValueError("URL has no host")
    if ":" in host:
        host = _as_written(url, host)
    elif not _HOSTNAME_CHARS.issuperset(host):
        # e.g. a space in the host: such a name can never resolve.
        raise ValueError(f"URL host {host!r} is not a valid host name")
    port = default_ports[scheme] if port is None else port
    if not 0 < port < 65536:
        raise ValueError(f"URL port {port} is out of range")
    return scheme, host, port


def _as_written(url: str, host: str) -> str:
    """The IPv6 literal ``host`` as ``url`` writes it (the same address), for messages that quote it."""
    start, end = url.find("["), url.find("]")
    written = url[start + 1:end] if 0 <= start < end else host
    try:
        same = ipaddress.IPv6Address(written) == ipaddress.IPv6Address(host)
    except ValueError:
        same = False
    return written if same else host


def check_url(url: str, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
    """Registration-time check: well-formed http(s) URL whose host resolves only to allowed addresses.

    Raises ValueError (malformed), UnresolvableHost (no DNS answer) or BlockedAddress (any address
    not allowed). This is advisory against DNS rebinding; the connect-time check is the real guard.
    With ``allow_private`` a name that does not resolve (yet) is accepted: only metadata services
    are refused then, and the connect-time check refuses them again.
    """
    _, host, port = split_url(url)
    check_host(host, port, policy, resolver)


def check_host(host: str, port: int, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
    """``check_url``'s rule for one host of any kind of destination (HTTP, Redis, …): it resolves
    only to allowed addresses (a name that does not resolve yet passes under ``allow_private``)."""
    try:
        addresses = resolve(host, port, resolver)
    except UnresolvableHost:
        if policy.allow_private:
            return
        raise
    for address in addresses:
        policy.check_ip(host, address)
