"""Specification of the webhook Sender against real servers on 127.0.0.1 (never any other address)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.concurrency import in_threads
from tests.receivers import Receiver, always, drip, sequence, sleep_then, unused_port
from webhooks.http_client import HttpResult, Sender
from webhooks.netguard import Resolver, TargetPolicy, check_url

OPEN = TargetPolicy(allow_private=True)
STRICT = TargetPolicy()


def mapping(**names: str) -> Resolver:
    """A fake DNS: ``mapping(receiver_test="127.0.0.1")`` answers for receiver.test ("_" -> ".")."""
    table = {name.replace("_", "."): address for name, address in names.items()}

    def resolver(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [table[host]]

    return resolver


def post(url: str, *, timeout: float = 2.0, policy: TargetPolicy = OPEN, **kwargs: object) -> HttpResult:
    with Sender(timeout=timeout, policy=policy, **kwargs) as sender:  # type: ignore[arg-type]
        return sender.post(url, {"Content-Type": "application/json"}, b'{"event": "ping"}')


@contextlib.contextmanager
def raw_server(behaviour: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A bare TCP server on 127.0.0.1 running ``behaviour(conn, stop)`` for each connection; yields the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                with contextlib.suppress(OSError):
                    behaviour(conn, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


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


def test_request_is_a_post_with_headers_and_body_verbatim() -> None:
    with Receiver() as receiver:
        with Sender(timeout=2, policy=OPEN, user_agent="webhooks-test/9") as sender:
            sender.post(receiver.url + "/in?x=1", {"Webhook-Id": "msg_1", "Content-Type": "application/json"}, b"{}")
        (request,) = receiver.wait_for(1)
    assert (request.method, request.path, request.body) == ("POST", "/in?x=1", b"{}")
    assert request.headers["Webhook-Id"] == "msg_1"
    assert request.headers["user-agent"] == "webhooks-test/9"
    assert request.headers["accept-encoding"] == "identity"
    assert request.headers["content-length"] == "2"


def test_500_is_recorded_not_raised() -> None:
    with Receiver(always(500, None, b"boom")) as receiver:
        result = post(receiver.url)
    assert not result.ok
    assert (result.status_code, result.body, result.error_class) == (500, b"boom", None)


def test_redirect_is_returned_not_followed() -> None:
    with Receiver() as target, Receiver(always(302, {"Location": "/elsewhere"})) as receiver:
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


def test_cookies_are_never_stored_between_deliveries() -> None:
    with Receiver(always(200, {"Set-Cookie": "session=abc; Path=/"})) as receiver:
        with Sender(timeout=2, policy=OPEN) as sender:
            sender.post(receiver.url, {}, b"1")
            sender.post(receiver.url, {}, b"2")
        requests = receiver.wait_for(2)
    assert all("cookie" not in r.headers for r in requests)


def test_keep_alive_reuses_one_connection_and_resolves_once() -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    with Receiver() as receiver:
        with Sender(timeout=2, policy=OPEN, resolver=resolver) as sender:
            results = [sender.post(f"http://receiver.test:{receiver.port}/", {}, b"x") for _ in range(3)]
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


# -- time limits --------------------------------------------------------------------------------


def test_server_slower_than_the_timeout_gives_timeout() -> None:
    with Receiver(sleep_then(5)) as receiver:
        started = time.monotonic()
        result = post(receiver.url, timeout=0.5)
        elapsed = time.monotonic() - started
    assert result.error_class == "timeout" and result.status_code is None
    assert elapsed < 0.5 + 0.5
    assert 400 < result.duration_ms < 1000


def test_slow_drip_body_cannot_outlast_the_total_deadline() -> None:
    with Receiver(drip(0.2)) as receiver:  # one byte every 0.2 s, forever: no single read ever times out
        started = time.monotonic()
        result = post(receiver.url, timeout=1.0)
        elapsed = time.monotonic() - started
    assert result.error_class == "timeout"
    assert "total deadline" in (result.error or "")
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


def test_pool_timeout_is_reported_separately_from_endpoint_timeouts() -> None:
    # One connection, an endpoint that hangs, three concurrent deliveries: the first two each hold
    # the connection for the full timeout, so the third cannot get it within its pool wait.
    with Receiver(sleep_then(5)) as receiver:
        with Sender(timeout=0.5, policy=OPEN, max_connections=1) as sender:
            results: dict[str, HttpResult] = {}

            def deliver(name: str) -> None:
                results[name] = sender.post(receiver.url, {}, name.encode())

            threads = {name: threading.Thread(target=deliver, args=(name,)) for name in ("first", "second", "third")}
            threads["first"].start()
            receiver.wait_for(1)
            threads["second"].start()
            time.sleep(0.05)
            threads["third"].start()
            for thread in threads.values():
                thread.join(timeout=5)
        bodies = [r.body for r in receiver.requests]
    assert results["first"].error_class == "timeout"
    # The second waits for the pool exactly as long as the first holds the connection, so
    # which of the two ends first is a race; the third waits behind both and cannot win it.
    assert results["second"].error_class in ("timeout", "pool_timeout")
    assert results["third"].error_class == "pool_timeout"
    assert b"third" not in bodies and bodies[0] == b"first"  # a pool-starved call never reaches the endpoint
    assert (results["second"].error_class == "timeout") == (b"second" in bodies)


# -- connection failures ------------------------------------------------------------------------


def test_connection_refused_is_a_connection_error() -> None:
    result = post(f"http://127.0.0.1:{unused_port()}/hook")
    assert result.error_class == "connection" and result.status_code is None
    assert "refused" in (result.error or "").lower()
    assert result.duration_ms > 0


def test_unresolvable_name_is_a_dns_error() -> None:
    result = post("http://nowhere.test/hook", resolver=mapping())
    assert result.error_class == "dns"
    assert "nowhere.test" in (result.error or "")


def test_error_messages_never_contain_request_headers() -> None:
    secret = "Bearer s3cr3t-t0ken"
    with Sender(timeout=0.5, policy=OPEN) as sender, Receiver(sleep_then(5)) as receiver:
        refused = sender.post(f"http://127.0.0.1:{unused_port()}/", {"Authorization": secret}, b"")
        slow = sender.post(receiver.url, {"Authorization": secret}, b"")
        # h11 refuses the header and would quote its value in the exception message.
        injected = sender.post(receiver.url, {"X-Sig": secret + "\r\nEvil: 1"}, b"")
    assert (refused.error_class, slow.error_class, injected.error_class) == ("connection", "timeout", "protocol")
    for result in (refused, slow, injected):
        assert "s3cr3t" not in (result.error or "")


def test_hanging_dns_lookup_is_bounded_by_the_deadline() -> None:
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(5)
        return ["127.0.0.1"]

    try:
        started = time.monotonic()
        result = post("http://slow-dns.test/", timeout=0.5, resolver=hanging)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert result.error_class == "timeout"
    assert elapsed < 1.0


def test_one_sender_serves_many_threads_at_once() -> None:
    with Receiver(sleep_then(0.05)) as receiver, Sender(timeout=5, policy=OPEN, max_connections=4) as sender:
        results = in_threads(20, lambda n: sender.post(receiver.url, {}, str(n).encode()), timeout=10)
        requests = receiver.wait_for(20)
    assert len(results) == 20 and all(r.ok for r in results)
    assert sorted(int(r.body) for r in requests) == list(range(20))
    assert len({r.client_address for r in requests}) <= 4  # pooled: at most max_connections sockets


def test_server_dropping_the_connection_mid_answer_is_a_protocol_error() -> None:
    receiver = Receiver(sleep_then(10))
    with Sender(timeout=3, policy=OPEN) as sender:
        results: list[HttpResult] = []
        thread = threading.Thread(target=lambda: results.append(sender.post(receiver.url, {}, b"")))
        thread.start()
        receiver.wait_for(1)
        receiver.stop()  # the endpoint goes down while "processing"
        thread.join(timeout=5)
    assert results[0].error_class == "protocol" and results[0].status_code is None


def test_responses_follow_the_receiver_sequence() -> None:
    with Receiver(sequence([sleep_then(0.01, 201), (503, {"Retry-After": "7"}, b"busy"), 200])) as receiver:
        with Sender(timeout=2, policy=OPEN) as sender:
            results = [sender.post(receiver.url, {}, b"") for _ in range(4)]
    assert [r.status_code for r in results] == [201, 503, 200, 200]
    assert results[1].headers["retry-after"] == "7" and results[1].body == b"busy"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http://[::1/x"])
def test_unusable_url_is_reported_not_raised(url: str) -> None:
    result = post(url)
    assert result.error_class == "protocol" and result.status_code is None


# -- SSRF guard ---------------------------------------------------------------------------------


def test_loopback_is_blocked_before_any_connection_is_made() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        result = post(f"http://127.0.0.1:{port}/hook", policy=STRICT)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing in the accept queue: no SYN was ever sent
            listener.accept()
    finally:
        listener.close()
    assert result.error_class == "blocked_address" and result.status_code is None
    assert "127.0.0.1" in (result.error or "") and "loopback" in (result.error or "")


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
    assert f"internal.test resolves to {answer}" in (result.error or "")


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
    assert "rebind.test resolves to 127.0.0.1" in (result.error or "")
    assert len(lookups) == 2


def test_allowed_networks_open_a_range_at_connect() -> None:
    with Receiver() as receiver:
        result = post(receiver.url, policy=TargetPolicy.from_strings(False, "127.0.0.0/8"))
    assert result.ok


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
