"""What the tests of each kind of destination share: a signed parcel, a free port, one destination's deliveries,
a RabbitMQ vhost of one's own (``bench/steps/destinations.py`` uses it too) and the messages in its queue, a test CA
and a TLS-terminating proxy in front of the machine's Redis or broker."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace, TracebackType
from typing import Any

import pika
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhooks.delivery.destinations import Destination, Parcel
from webhooks.delivery.netguard import TargetPolicy
from webhooks.delivery.outgoing import build_request

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"


def parcel(event_id: str = "evt_1") -> Parcel:
    """An ``order.paid`` event signed with ``SECRET`` now (verifiable within the library's tolerance)."""
    request = build_request(event_id, "order.paid", "2026-11-26T00:00:00Z", {"n": 1}, [SECRET], int(time.time()))
    return Parcel(event_id, "order.paid", request)


def deliver(kind: type[Any], url: str, *parcels: Parcel,
            policy: TargetPolicy = TargetPolicy(allow_private=True)) -> list[Any]:
    """The results of delivering ``parcels`` one after the other through one new destination of ``kind``."""
    async def run() -> list[Any]:
        destination: Destination = kind(timeout=5, policy=policy)
        try:
            return [await destination.deliver(url, one) for one in parcels]
        finally:
            await destination.close()

    return asyncio.run(run())


def free_port() -> int:
    """A loopback port nothing listens on (a server that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rabbitmqctl(*args: str, check: bool = True) -> str:
    return subprocess.run(["rabbitmqctl", "-q", *args], check=check, capture_output=True, text=True, timeout=60).stdout


def delete_vhosts(prefix: str) -> None:
    """Delete every vhost whose name starts with ``prefix`` and the user of its name (``own_vhost``'s): what a
    process that ended inside ``own_vhost`` without running its ``finally`` (a signal's handler) left behind."""
    for name in rabbitmqctl("list_vhosts", "name", check=False).split():
        if name.startswith(prefix):
            rabbitmqctl("delete_user", name, check=False)
            rabbitmqctl("delete_vhost", name, check=False)


@contextmanager
def own_vhost(exchange: str, routing_key: str, prefix: str = "webhooks-test") -> Iterator[SimpleNamespace]:
    """A vhost and a user of its name, ``<prefix>-<12 hex digits>``, on the machine's broker (``rabbitmqctl``;
    both deleted afterwards), with ``exchange`` bound to the queue ``received`` by ``routing_key``: ``vhost``,
    ``user``, ``password``, ``connect()``."""
    name, password = f"{prefix}-{uuid.uuid4().hex[:12]}", uuid.uuid4().hex

    def connect() -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672, name,
                                                                 pika.PlainCredentials(name, password)))

    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("add_user", name, password)
        rabbitmqctl("set_permissions", "-p", name, name, ".*", ".*", ".*")
        connection = connect()
        channel = connection.channel()
        channel.exchange_declare(exchange, "direct", durable=True)
        channel.queue_declare("received", durable=True)
        channel.queue_bind("received", exchange, routing_key)
        connection.close()
        yield SimpleNamespace(vhost=name, user=name, password=password, connect=connect)
    finally:
        rabbitmqctl("delete_user", name, check=False)
        rabbitmqctl("delete_vhost", name, check=False)


def received(broker: SimpleNamespace) -> list[tuple[Any, bytes]]:
    """Every message waiting in ``own_vhost``'s queue ``received``, taken: ``(properties, body)`` each."""
    connection = broker.connect()
    channel, messages = connection.channel(), []
    while True:
        method, properties, body = channel.basic_get("received", auto_ack=True)
        if method is None:
            break
        messages.append((properties, body))
    connection.close()
    return messages


# -- TLS -------------------------------------------------------------------------------------------


class CertificateAuthority:
    """A CA of the test's own (made with ``cryptography``, valid for a day), its certificate in ``pem``; it
    signs server certificates for any host name."""

    def __init__(self, folder: Path, name: str = "webhooks test CA") -> None:
        self._folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        public_key = self._key.public_key()
        certificate = (
            _certificate(self._name, self._name, public_key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = folder / f"{uuid.uuid4().hex[:8]}-ca.pem"
        self.pem.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    def bundle(self, *others: Path) -> Path:
        """A CA bundle of the files ``others`` and this CA, in a file of its own."""
        path = self._folder / f"{uuid.uuid4().hex[:8]}-bundle.pem"
        path.write_bytes(b"".join(other.read_bytes().rstrip(b"\n") + b"\n" for other in (*others, self.pem)))
        return path

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context with a certificate for ``host`` (its only subject alternative name) that this CA signed."""
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (
            _certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]), self._name, key.public_key())
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        chain = self._folder / f"{uuid.uuid4().hex[:8]}-{host}.pem"
        chain.write_bytes(certificate.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain)
        return context


def _certificate(subject: x509.Name, issuer: x509.Name, public_key: Any) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1)))


class TlsProxy:
    """Accepts TLS with ``context`` on a free loopback port and forwards the plain bytes to ``127.0.0.1:target_port``
    (an event loop in a thread of its own). ``server_names``: the name each client asked for (SNI).

    A client that gives up on the handshake (an untrusted certificate) never reaches the target."""

    def __init__(self, target_port: int, context: ssl.SSLContext) -> None:
        self.target_port = target_port
        self.server_names: list[str | None] = []
        context.sni_callback = lambda _socket, name, _context: self.server_names.append(name)  # type: ignore[assignment]
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(lambda _loop, _context: None)  # failed handshakes are what some tests want
        self._thread = threading.Thread(target=self._loop.run_forever, name="tls-proxy", daemon=True)
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._forward, "127.0.0.1", 0, ssl=context))
        self.port: int = self._server.sockets[0].getsockname()[1]

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, writer), _pipe(reader, client_writer))

    async def _close(self) -> None:
        self._server.close()
        forwarding = asyncio.all_tasks() - {asyncio.current_task()}
        for task in forwarding:
            task.cancel()
        await asyncio.gather(*forwarding, return_exceptions=True)

    def __enter__(self) -> "TlsProxy":
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._run(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:  # ssl.SSLError among them
        pass
    finally:
        with suppress(Exception):
            sink.close()
