"""Specification of the asyncio webhook Sender against real servers on 127.0.0.1 (never any other address).

Each test drives the Sender inside ``asyncio.run``; the thread-based receivers of ``tests.receivers``
serve it. There is no pool timeout: this Sender has no connection limit of its own (the
engine's per-endpoint windows bound the calls in flight).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiohappyeyeballs
import aiohttp
import pytest

from tests.receivers import Receiver, always, drip, raw_server, sequence, sleep_then, unused_port
from webhooks.delivery.guard import GuardedConnector, GuardedResolver
from webhooks.delivery.http_result import MAX_KEPT_HEADERS, HttpResult
from webhooks.delivery.sender import Sender
from webhooks.delivery.netguard import RESOLVES_TO_BLOCKED, BlockedAddress, IPAddress, Resolver, TargetPolicy, check_url

OPEN = TargetPolicy(allow_private=True)
STRICT = TargetPolicy()

T = TypeVar("T")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Safety net: even with a broken guard, no test connection ever leaves this machine.

    aiohttp opens every socket through ``aiohappyeyeballs.start_connection``; a non-loopback address
    fails there as unreachable (so the test that expected ``blocked_address`` fails, quietly).
    """
    real = aiohappyeyeballs.start_connection

    async def start_connection(addr_infos: list[aiohappyeyeballs.AddrInfoType], **kwargs: object) -> socket.socket:
        for *_, address in addr_infos:
            ip = ipaddress.ip_address(address[0])
            ip = getattr(ip, "ipv4_mapped", None) or ip
            if not ip.is_loopback:
                raise OSError(errno.ENETUNREACH, f"test safety net: {address[0]} is not on this machine")
        return await real(addr_infos, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(aiohappyeyeballs, "start_connection", start_connection)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run one async scenario on a fresh event loop (a Sender lives and dies inside its loop)."""

    async def main() -> T:
        return await scenario()

    return asyncio.run(main())


def mapping(**names: str) -> Resolver:
    """A fake DNS: ``mapping(receiver_test="127.0.0.1")`` answers for receiver.test ("_" -> ".")."""
    table = {name.replace("_", "."): address for name, address in names.items()}

    def resolver(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [table[host]]

    return resolver


def post(url: str, *, timeout: float = 2.0, policy: TargetPolicy = OPEN, **kwargs: object) -> HttpResult:
    """One POST from a fresh Sender."""

    async def once() -> HttpResult:
        async with Sender(timeout=timeout, policy=policy, **kwargs) as sender:  # type: ignore[arg-type]
            return await sender.post(url, {"Content-Type": "application/json"}, b'{"event": "ping"}')

    return run(once)


def posts(url: str, bodies: list[bytes], *, timeout: float = 2.0, **kwargs: object) -> list[HttpResult]:
    """POSTs one after the other from one Sender (so kept-alive connections are reused)."""

    async def each() -> list[HttpResult]:
        async with Sender(timeout=timeout, policy=OPEN, **kwargs) as sender:  # type: ignore[arg-type]
            return [await sender.post(url, {}, body) for body in bodies]

    return run(each)


def nothing_accepted(listener: socket.socket) -> bool:
    """True when no client ever connected to ``listener`` (its accept queue is empty)."""
    listener.setblocking(False)
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


# -- responses ----------------------------------------------------------------------------------


def test_2xx_is_ok_with_body_and_lowercased_headers() -> None:
    with Receiver(always(200, [("X-Trace", "a"), ("X-Trace", "b")], b"thanks")) as receiver:
        result = post(receiver.url + "/hook")
    assert result.ok
    assert (result.status_code, result.body, result.error_class, result.error) == (200, b"thanks", None, None)
    assert result.headers["x-trace"] == "a, b"
    assert result.headers["content-length"] == "6"
    assert all(name == name.lower() for name in result.headers)
    assert result.duration_ms > 0


def test_a_receivers_headers_are_kept_up_to_8_kb_in_all() -> None:
    many = [(f"X-Big-{n}", "v" * 8000) for n in range(120)]  # 961 KB of headers, as the attack sent
    with Receiver(always(200, many, b"ok")) as receiver:
        result = post(receiver.url + "/hook")
    assert result.ok
    assert sum(len(name) + len(value) for name, value in result.headers.items()) <= MAX_KEPT_HEADERS
    assert result.headers["x-big-0"] == "v" * 8000  # the first ones whole, in the order received
    assert "x-big-119" not in result.headers


def test_request_is_a_post_with_headers_and_body_verbatim() -> None:
    async def scenario() -> None:
        async with Sender(timeout=2, policy=OPEN) as sender:
            await sender.post(receiver.url + "/in?x=1", {"Webhook-Id": "msg_1", "Content-Type": "application/json",
                                                         "User-Agent": "webhooks-test/9"}, b"{}")
            await sender.post(receiver.url + "/bare", {}, b"raw")

    with Receiver() as receiver:
        run(scenario)
        request, bare = receiver.wait_for(2)
    assert (request.method, request.path, request.body) == ("POST", "/in?x=1", b"{}")
    assert request.headers["Webhook-Id"] == "msg_1"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == "webhooks-test/9"
    assert request.headers["accept-encoding"] == "identity"
    assert request.headers["content-length"] == "2"
    assert (bare.body, "content-type" in bare.headers) == (b"raw", False)  # no guessed type added


def test_500_is_recorded_not_raised() -> None:
    with Receiver(always(500, None, b"boom")) as receiver:
        result = post(receiver.url)
    assert not result.ok
    assert (result.status_code, result.body, result.error_class) == (500, b"boom", None)


def test_redirect_is_returned_not_followed() -> None:
    with Receiver() as target, Receiver() as receiver:
        receiver.responder = always(302, {"Location": target.url + "/stolen"})
        result = post(receiver.url + "/hook")
        assert len(receiver.wait_for(1)) == 1
        time.sleep(0.05)
        assert target.requests == []
    assert (result.status_code, result.ok) == (302, False)
    assert result.headers["location"] == target.url + "/stolen"


def test_large_body_is_truncated_to_max_body() -> None:
    with Receiver(always(200, None, b"x" * 1_000_000)) as receiver:
        result = post(receiver.url)
        small = post(receiver.url, max_body=100)
    assert result.ok and result.body == b"x" * 20 * 1024
    assert small.body == b"x" * 100


def test_a_truncated_response_closes_its_connection_instead_of_draining_it() -> None:
    # Announces 10 MB, sends 30 KB, then stalls: draining the rest would wait out the deadline.
    def endless(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n" + b"y" * 30 * 1024)
        stop.wait(5)

    with raw_server(endless) as port:
        started = time.monotonic()
        result = post(f"http://127.0.0.1:{port}/", timeout=3.0)
        elapsed = time.monotonic() - started
    assert (result.ok, result.error_class, result.body) == (True, None, b"y" * 20 * 1024)
    assert elapsed < 2.0  # well inside the 3 s deadline: nothing waited for the rest


def test_a_complete_response_keeps_its_connection_for_the_next_call() -> None:
    with Receiver() as receiver:
        results = posts(receiver.url, [b"1", b"2"])
        first, second = receiver.wait_for(2)
    assert all(r.ok for r in results)
    assert first.client_address == second.client_address


def test_cookies_are_never_stored_between_deliveries() -> None:
    with Receiver(always(200, {"Set-Cookie": "session=abc; Path=/"})) as receiver:
        posts(receiver.url, [b"1", b"2"])
        requests = receiver.wait_for(2)
    assert all("cookie" not in r.headers for r in requests)


def test_keep_alive_reuses_one_connection_and_resolves_once() -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    with Receiver() as receiver:
        results = posts(f"http://receiver.test:{receiver.port}/", [b"x"] * 3, resolver=resolver)
        requests = receiver.wait_for(3)
    assert all(r.ok for r in results)
    assert len({r.client_address for r in requests}) == 1
    assert lookups == ["receiver.test"]


def test_host_header_is_the_url_host_and_port_not_the_ip() -> None:
    with Receiver() as receiver:
        result = post(f"http://receiver.test:{receiver.port}/hook", resolver=mapping(receiver_test="127.0.0.1"))
        (request,) = receiver.wait_for(1)
    assert result.ok
    assert request.headers["host"] == f"receiver.test:{receiver.port}"


def test_proxy_environment_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    with Receiver() as receiver, Receiver() as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY"):
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        result = post(receiver.url)
        receiver.wait_for(1)
    assert result.ok
    assert proxy.requests == []


def test_the_guarded_connector_refuses_to_go_through_a_proxy() -> None:
    async def through_proxy() -> BaseException | None:
        connector = GuardedConnector(resolver=GuardedResolver(OPEN))
        async with aiohttp.ClientSession(connector=connector) as session:
            try:
                await session.post(receiver.url, data=b"x", proxy=proxy.url)
            except aiohttp.ClientError as exc:
                return exc
        return None

    with Receiver() as receiver, Receiver() as proxy:
        error = run(through_proxy)
        assert (proxy.requests, receiver.requests) == ([], [])
    assert isinstance(error, aiohttp.ClientConnectionError) and "prox" in str(error)


# -- time limits --------------------------------------------------------------------------------


def test_server_slower_than_the_timeout_gives_timeout() -> None:
    with Receiver(sleep_then(5)) as receiver:
        started = time.monotonic()
        result = post(receiver.url, timeout=0.5)
        elapsed = time.monotonic() - started
    assert result.error_class == "timeout" and result.status_code is None
    assert result.error == "total deadline of 0.5 s exceeded before the response headers arrived"
    assert elapsed < 0.5 + 0.5
    assert 400 < result.duration_ms < 1000


def test_slow_drip_body_cannot_outlast_the_total_deadline() -> None:
    with Receiver(drip(0.2)) as receiver:  # one byte every 0.2 s, forever: no single read ever times out
        started = time.monotonic()
        result = post(receiver.url, timeout=1.0)
        elapsed = time.monotonic() - started
    assert result.error_class == "timeout"
    assert result.error == "total deadline of 1 s exceeded while reading the response body"
    assert 0.9 < elapsed < 1.5
    assert result.status_code == 200 and 1 <= len(result.body) <= 8  # the partial response is kept
    assert not result.ok


def test_slow_drip_headers_cannot_outlast_the_total_deadline() -> None:
    def drip_headers(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.1):
            conn.sendall(b"X-Drip: 1\r\n")

    with raw_server(drip_headers) as port:
        started = time.monotonic()
        result = post(f"http://127.0.0.1:{port}/", timeout=1.0)
        elapsed = time.monotonic() - started
    assert result.error_class == "timeout" and result.status_code is None
    assert 0.9 < elapsed < 1.5


def test_hanging_dns_lookup_is_bounded_by_the_deadline() -> None:
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(5)
        return ["127.0.0.1"]

    try:
        started = time.monotonic()
        result = post("http://slow-dns.test/", timeout=0.5, resolver=hanging)  # includes closing the Sender
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert result.error_class == "timeout"
    assert elapsed < 1.0


# -- connection failures ------------------------------------------------------------------------


def test_connection_refused_is_a_connection_error() -> None:
    port = unused_port()
    result = post(f"http://127.0.0.1:{port}/hook")
    assert result.error_class == "connection" and result.status_code is None
    assert result.error == f"cannot connect to 127.0.0.1:{port}: Connection refused"
    assert result.duration_ms > 0


def test_unresolvable_name_is_a_dns_error() -> None:
    result = post("http://nowhere.test/hook", resolver=mapping())
    assert result.error_class == "dns"
    assert "nowhere.test" in (result.error or "")


def test_name_the_system_resolver_cannot_find_is_a_dns_error() -> None:
    result = post("http://no-such-host.invalid/hook")  # .invalid never resolves (RFC 6761)
    assert result.error_class == "dns" and "no-such-host.invalid does not resolve" in (result.error or "")


def test_an_answer_that_is_not_http_is_a_protocol_error() -> None:
    def garbage(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")

    with raw_server(garbage) as port:
        result = post(f"http://127.0.0.1:{port}/")
    assert result.error_class == "protocol" and result.status_code is None
    assert result.error is not None and "\n" not in result.error and "NOT HTTP" in result.error


def test_error_messages_never_contain_request_headers() -> None:
    secret = "Bearer s3cr3t-t0ken"

    async def scenario() -> list[HttpResult]:
        async with Sender(timeout=0.5, policy=OPEN) as sender:
            refused = await sender.post(f"http://127.0.0.1:{unused_port()}/", {"Authorization": secret}, b"")
            slow = await sender.post(receiver.url, {"Authorization": secret}, b"")
            # aiohttp refuses a CR/LF in a header value; the message must not quote it.
            injected = await sender.post(receiver.url, {"X-Sig": secret + "\r\nEvil: 1"}, b"")
            return [refused, slow, injected]

    with Receiver(sleep_then(5)) as receiver:
        results = run(scenario)
    assert [r.error_class for r in results] == ["connection", "timeout", "protocol"]
    for result in results:
        assert "s3cr3t" not in (result.error or "")


def test_one_sender_serves_many_concurrent_posts() -> None:
    async def scenario() -> list[HttpResult]:
        async with Sender(timeout=5, policy=OPEN) as sender:
            return await asyncio.gather(*(sender.post(receiver.url, {}, str(n).encode()) for n in range(20)))

    with Receiver(sleep_then(0.05)) as receiver:
        results = run(scenario)
        requests = receiver.wait_for(20)
    assert len(results) == 20 and all(r.ok for r in results)
    assert sorted(int(r.body) for r in requests) == list(range(20))


def test_server_dropping_the_connection_mid_answer_is_a_protocol_error() -> None:
    receiver = Receiver(sleep_then(10))

    async def scenario() -> HttpResult:
        async with Sender(timeout=3, policy=OPEN) as sender:
            call = asyncio.create_task(sender.post(receiver.url, {}, b""))
            await asyncio.to_thread(receiver.wait_for, 1)
            await asyncio.to_thread(receiver.stop)  # the endpoint goes down while "processing"
            return await call

    result = run(scenario)
    assert result.error_class == "protocol" and result.status_code is None


def test_responses_follow_the_receiver_sequence() -> None:
    with Receiver(sequence([sleep_then(0.01, 201), (503, {"Retry-After": "7"}, b"busy"), 200])) as receiver:
        results = posts(receiver.url, [b""] * 4)
    assert [r.status_code for r in results] == [201, 503, 200, 200]
    assert results[1].headers["retry-after"] == "7" and results[1].body == b"busy"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http://[::1/x", "ws://127.0.0.1/x", "http:///x", "not a url"])
def test_unusable_url_is_reported_not_raised(url: str) -> None:
    result = post(url)
    assert result.error_class == "protocol" and result.status_code is None


# -- many at once -------------------------------------------------------------------------------


@dataclass
class HoldingReceiver:
    """An asyncio HTTP receiver that holds every request until ``expected`` of them are open at once.

    Only a client with no connection cap below ``expected`` can ever get an answer from it.
    """

    expected: int
    open_now: int = 0
    most_at_once: int = 0
    all_in: asyncio.Event = field(default_factory=asyncio.Event)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")),
            0,
        )
        await reader.readexactly(length)
        self.open_now += 1
        self.most_at_once = max(self.most_at_once, self.open_now)
        if self.open_now >= self.expected:
            self.all_in.set()
        try:
            await asyncio.wait_for(self.all_in.wait(), timeout=30)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        finally:
            self.open_now -= 1
            writer.close()


@asynccontextmanager
async def holding_receiver(expected: int) -> AsyncIterator[tuple[HoldingReceiver, str]]:
    receiver = HoldingReceiver(expected)
    server = await asyncio.start_server(receiver.serve, "127.0.0.1", 0, backlog=expected)
    async with server:
        yield receiver, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"


def test_five_hundred_posts_at_once_are_all_in_flight_together() -> None:
    # aiohttp's default connector would allow 100 connections; this Sender must set no cap at all.
    async def scenario() -> tuple[list[HttpResult], int, float]:
        async with holding_receiver(500) as (receiver, url), Sender(timeout=20, policy=OPEN) as sender:
            started = time.monotonic()
            results = await asyncio.gather(*(sender.post(url, {}, b"%d" % n) for n in range(500)))
            return results, receiver.most_at_once, time.monotonic() - started

    results, most_at_once, elapsed = run(scenario)
    assert most_at_once == 500
    assert [r.status_code for r in results] == [200] * 500
    assert elapsed < 20  # nobody waited for a free connection until its deadline


# -- SSRF guard ---------------------------------------------------------------------------------


def test_loopback_is_blocked_before_any_connection_is_made() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        result = post(f"http://127.0.0.1:{port}/hook", policy=STRICT)
        assert nothing_accepted(listener)  # no SYN was ever sent
    finally:
        listener.close()
    assert result.error_class == "blocked_address" and result.status_code is None
    assert result.error == "127.0.0.1 is a loopback address"


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("[::1]", "::1 is a loopback address"),
        ("[::ffff:127.0.0.1]", "IPv4-mapped form of 127.0.0.1, a loopback address"),
        ("[64:ff9b::a00:1]", "NAT64 form of 10.0.0.1, a private address"),
        ("[2002:a9fe:a9fe::1]", "6to4 form of 169.254.169.254, a cloud metadata service address"),
        ("169.254.169.254", "169.254.169.254 is a cloud metadata service address"),
        ("10.0.0.1", "10.0.0.1 is a private address"),
    ],
)
def test_ip_literal_urls_are_checked_although_aiohttp_skips_the_resolver_for_them(host: str, reason: str) -> None:
    result = post(f"http://{host}:8080/hook", policy=STRICT, timeout=1.0)
    assert result.error_class == "blocked_address" and result.status_code is None
    assert reason in (result.error or "")


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.0.0.1", "017700000001"])
def test_legacy_numeric_forms_of_loopback_never_connect(host: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        result = post(f"http://{host}:{port}/hook", policy=STRICT)
        assert nothing_accepted(listener)
    finally:
        listener.close()
    # aiohttp refuses some forms as URLs; the others resolve to 127.0.0.1 and are blocked.
    assert (result.error_class, result.status_code) in (("blocked_address", None), ("protocol", None))


def test_loopback_receiver_never_sees_a_request_under_the_strict_policy() -> None:
    with Receiver() as receiver:
        result = post(receiver.url + "/hook", policy=STRICT)
        time.sleep(0.05)
        assert receiver.requests == []
    assert result.error_class == "blocked_address"


@pytest.mark.parametrize("answer", ["127.0.0.1", "::ffff:127.0.0.1", "10.0.0.1", "169.254.169.254"])
def test_name_resolving_to_an_internal_address_is_blocked_at_connect(answer: str) -> None:
    result = post("http://internal.test:8080/", policy=STRICT, resolver=mapping(internal_test=answer))
    assert result.error_class == "blocked_address"
    assert result.error == f"internal.test {RESOLVES_TO_BLOCKED}"  # not the address: a tenant reads this


def test_the_system_resolver_is_asked_and_its_answers_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: object, port: object, *args: object, **kwargs: object) -> list[object]:
        if host == "metadata.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]
        return real(host, port, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    result = post("http://metadata.example/latest/meta-data/", policy=STRICT)
    assert result.error_class == "blocked_address"
    assert result.error == f"metadata.example {RESOLVES_TO_BLOCKED}"


def test_one_internal_answer_among_public_ones_blocks_the_name() -> None:
    result = post("http://mixed.test/", policy=STRICT, resolver=lambda host, port: ["93.184.216.34", "10.1.2.3"])
    assert result.error_class == "blocked_address"
    assert result.error == f"mixed.test {RESOLVES_TO_BLOCKED}"


def test_dns_rebinding_is_blocked_at_connect() -> None:
    answers = iter(["93.184.216.34"])  # public answer, only ever given to the registration check
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return [next(answers, "127.0.0.1")]

    with Receiver() as receiver:
        url = f"http://rebind.test:{receiver.port}/hook"
        check_url(url, STRICT, rebinding)  # registration: passes, and connects nowhere
        assert len(lookups) == 1
        result = post(url, policy=STRICT, resolver=rebinding)
        time.sleep(0.05)
        assert receiver.requests == []
    assert result.error_class == "blocked_address"
    assert result.error == f"rebind.test {RESOLVES_TO_BLOCKED}"
    assert len(lookups) == 2


def test_allowed_networks_open_a_range_at_connect() -> None:
    with Receiver() as receiver:
        result = post(receiver.url, policy=TargetPolicy.from_strings(False, "127.0.0.0/8"))
    assert result.ok


@dataclass(frozen=True)
class RecordingPolicy(TargetPolicy):
    """A policy that notes every address it was asked about."""

    asked: list[tuple[str, str]] = field(default_factory=list)

    def check_ip(self, host: str, ip: str | IPAddress) -> None:
        self.asked.append((host, str(ip)))
        super().check_ip(host, ip)


def test_the_policy_decides_every_address_even_when_private_targets_are_allowed() -> None:
    # The policy, not the sender, decides what "allow private" means (some addresses stay closed).
    policy = RecordingPolicy(allow_private=True)
    with Receiver() as receiver:
        by_name = post(f"http://receiver.test:{receiver.port}/", policy=policy, resolver=mapping(receiver_test="127.0.0.1"))
        by_literal = post(receiver.url, policy=policy)
    assert by_name.ok and by_literal.ok
    assert policy.asked == [("receiver.test", "127.0.0.1"), ("127.0.0.1", "127.0.0.1")]


# -- TLS ----------------------------------------------------------------------------------------


def test_tls_to_a_plain_http_server_is_a_tls_error() -> None:
    with Receiver() as receiver:
        result = post(f"https://127.0.0.1:{receiver.port}/")
    assert result.error_class == "tls"


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    assert shutil.which("openssl"), "the openssl command is needed to make a test certificate"
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=receiver.test",
         "-addext", "subjectAltName=DNS:receiver.test"],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_uses_the_url_host_for_sni_and_verifies_the_certificate(self_signed: tuple[Path, Path]) -> None:
    cert, key = self_signed
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server_names: list[str | None] = []

    def record_sni(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        server_names.append(name)

    context.sni_callback = record_sni

    def tls_handshake(conn: socket.socket, stop: threading.Event) -> None:
        conn.settimeout(2)
        with context.wrap_socket(conn, server_side=True):  # the client aborts: cert is untrusted
            pass

    with raw_server(tls_handshake) as port:
        result = post(f"https://receiver.test:{port}/", resolver=mapping(receiver_test="127.0.0.1"))
    assert server_names == ["receiver.test"]  # SNI is the host name, although we connected to an IP
    assert result.error_class == "tls"
    assert "certificate" in (result.error or "").lower()


def test_an_address_is_checked_without_a_lookup_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis and RabbitMQ destinations resolve every new connection through the guard: an IP
    literal is its own answer, checked at once, with no thread started for a lookup."""
    started: list[str] = []
    monkeypatch.setattr(threading.Thread, "start", lambda thread: started.append(thread.name))

    async def both() -> tuple[list[str], BaseException | None]:
        allowed = [record["host"] for record in await GuardedResolver(OPEN).resolve("127.0.0.1", 6379)]
        try:
            await GuardedResolver(STRICT).resolve("127.0.0.1", 6379)
        except BlockedAddress as exc:
            return allowed, exc
        return allowed, None

    allowed, refused = run(lambda: asyncio.wait_for(both(), 5.0))  # (a lookup thread that never started: a timeout)
    assert allowed == ["127.0.0.1"]
    assert isinstance(refused, BlockedAddress), "the policy still applies to an address"
    assert started == []
