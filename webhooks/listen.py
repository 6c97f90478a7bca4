"""``flask listen``: pull the tenant's event feed and forward each event, signed as the worker
signs it, to a local URL; the cursor is committed after every 2xx, so a restart resumes in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import click
import httpx
from flask import Flask

from webhooks.errors import Refused, Stopping, WebhooksError
from webhooks.event_types import EVENT_TYPE_PATTERN, wants
from webhooks.delivery.outgoing import USER_AGENT, build_request
from webhooks.api.fields import MAX_PAGE_SIZE
from webhooks.delivery.signing import is_valid_secret

#: Events asked for per page of the feed (the API allows up to ``MAX_PAGE_SIZE``).
DEFAULT_LIMIT = 100
#: A failed forward or an unreachable API is retried after 1 s, 2 s, 4 s … at most this.
MAX_BACKOFF = 30.0
#: Seconds allowed to each phase (connect, write, read) of a call to the API or the local URL.
TIMEOUT = 15.0
#: Characters of a failing local response shown in the retry line.
SHOWN_BODY_CHARS = 120

#: One item of the feed's ``data``: ``{id, seq, event_type, payload, created_at, …}``.
FeedEvent = dict[str, Any]


class ApiKeyRejected(click.ClickException, Refused):
    """The API answered 401: no retry will help."""

    exit_code = 2


class ApiUnavailable(WebhooksError):
    """The API could not be reached or answered 429/5xx: worth retrying."""


class Stopped(Stopping):
    """Ctrl-C or SIGTERM arrived: stop before the next event."""


def backoff(failures: int) -> float:
    """Seconds to wait after the ``failures``-th failure in a row: 1, 2, 4 … ``MAX_BACKOFF``."""
    return min(MAX_BACKOFF, 2.0 ** (failures - 1))


class CursorFile:
    """The ``seq`` of the last forwarded event, in a text file replaced atomically.

    ``prepare(seq)`` writes and fsyncs a temporary file *before* the request is sent, so the
    commit after a 2xx is a single ``os.replace``: a kill between the receiver's answer and
    the commit (the only way an acknowledged event is sent twice) has one syscall to land in.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._temp = path.with_name(path.name + ".tmp")
        self._prepared: int | None = None

    def load(self) -> int | None:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        if not text.isdigit():
            raise click.ClickException(f"{self.path} holds no cursor ({text[:40]!r}): delete it or pass --after")
        return int(text)

    def prepare(self, seq: int) -> None:
        if self._prepared == seq:
            return
        with open(self._temp, "w") as handle:
            handle.write(f"{seq}\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._prepared = seq

    def commit(self) -> None:
        os.replace(self._temp, self.path)
        self._prepared = None
        directory = os.open(self.path.parent, os.O_RDONLY)  # make the rename itself durable
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def save(self, seq: int) -> None:
        self.prepare(seq)
        self.commit()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``<path>.lock``: two listeners sharing a cursor would forward everything twice."""
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise click.ClickException(f"another `flask listen` is using {self.path}") from None
            try:
                yield
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._temp)  # prepared for an event that was not forwarded


@dataclass(frozen=True)
class Page:
    events: list[FeedEvent]
    next_cursor: int
    has_more: bool


class Feed:
    """``GET /v1/events?after=&limit=&event_type=``: one page per call, API errors mapped."""

    def __init__(self, client: httpx.Client, limit: int, event_type: str | None = None,
                 include_test: bool = False) -> None:
        self.client = client
        self.params: dict[str, Any] = ({"limit": limit} | ({"event_type": event_type} if event_type else {})
                                       | ({"include_test": "true"} if include_test else {}))

    def fetch(self, after: int) -> Page:
        try:
            response = self.client.get("/v1/events", params={"after": after, **self.params})
        except httpx.TransportError as error:
            raise ApiUnavailable(f"{type(error).__name__}: {error}") from error
        if response.status_code == 401:
            raise ApiKeyRejected(f"the API refused the key ({_message(response)}): check --api-key / WEBHOOKS_API_KEY")
        if response.status_code == 429 or response.status_code >= 500:
            raise ApiUnavailable(f"HTTP {response.status_code}")
        if response.status_code != 200:
            raise click.ClickException(f"GET /v1/events answered {response.status_code}: {_message(response)}")
        body = response.json()
        return Page(body["data"], body["next_cursor"], body["has_more"])


def subscriptions(client: httpx.Client, endpoint_id: str) -> list[str]:
    """The event types endpoint ``endpoint_id`` subscribes to (``GET /v1/endpoints/<id>``; empty: all)."""
    try:
        response = client.get(f"/v1/endpoints/{endpoint_id}")
    except httpx.TransportError as error:
        raise click.ClickException(f"cannot reach the API at {client.base_url}: {error}") from None
    if response.status_code != 200:
        raise click.ClickException(f"GET /v1/endpoints/{endpoint_id} answered {response.status_code}: "
                                   f"{_message(response)}")
    return list(response.json()["event_types"])


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:SHOWN_BODY_CHARS]
    return str(body.get("message") or body) if isinstance(body, dict) else str(body)


def iter_pages(fetch: Callable[[int], Page], after: int) -> Iterator[Page]:
    """Pages after ``after``, fetched lazily (one request when the previous page is used up),
    until one says ``has_more`` is false."""
    while True:
        page = fetch(after)
        yield page
        if not page.has_more:
            return
        after = page.next_cursor


@dataclass(frozen=True)
class Forwarded:
    status: int | None  # None when no answer came
    error: str | None  # why it failed; None on a 2xx
    elapsed_ms: float


class Forwarder:
    """POSTs an event to the local URL: the worker's exact bytes and headers (``build_request``)."""

    def __init__(self, client: httpx.Client, url: str, secret: str) -> None:
        self.client, self.url, self.secret = client, url, secret

    def attempt(self, event: FeedEvent, on_success: Callable[[], None]) -> Forwarded:
        """One attempt; ``on_success`` runs as soon as a 2xx status line is read."""
        request = build_request(
            event["id"], event["event_type"], event["created_at"], event["payload"], [self.secret], int(time.time())
        )
        started = time.monotonic()
        try:
            with self.client.stream("POST", self.url, content=request.body, headers=request.headers) as response:
                elapsed_ms = (time.monotonic() - started) * 1000
                if not response.is_success:
                    shown = response.read()[:SHOWN_BODY_CHARS].decode(errors="replace")
                    return Forwarded(response.status_code, f"{response.status_code} {shown}".strip(), elapsed_ms)
                on_success()
                with contextlib.suppress(httpx.HTTPError):
                    response.read()  # drained so the connection is reused; the event is done either way
                return Forwarded(response.status_code, None, elapsed_ms)
        except httpx.HTTPError as error:
            return Forwarded(None, f"{type(error).__name__}: {error}", (time.monotonic() - started) * 1000)


def describe(event: FeedEvent) -> str:
    return f"{event['id']} {event['event_type']} seq={event['seq']}"


class Listener:
    """The loop: catch up page by page, forward each wanted event until a 2xx, then poll."""

    def __init__(
        self, feed: Feed, forwarder: Forwarder, cursor: CursorFile, after: int, *,
        event_types: frozenset[str] = frozenset(), follow: bool = True, interval: float = 2.0, tty: bool = False,
    ) -> None:  # fmt: skip
        self.feed, self.forwarder, self.cursor = feed, forwarder, cursor
        self.position = self.saved = after
        self.event_types, self.follow, self.interval, self.tty = event_types, follow, interval, tty
        self.forwarded = 0
        self.stopping = False

    def run(self) -> None:
        try:
            self._pass(catching_up=True)
            click.echo(f"caught up at seq={self.position}: {self.forwarded} forwarded")
            while self.follow:
                self._sleep(self.interval)
                self._pass(catching_up=False)
        except Stopped:
            click.echo(f"stopped at seq={self.position}: {self.forwarded} forwarded")
        finally:
            if self.position > self.saved:  # events skipped by --event-type after the last forward
                self.cursor.save(self.position)

    def _pass(self, catching_up: bool) -> None:
        pages = iter_pages(self._fetch, self.position)
        first = next(pages)
        events = (event for page in itertools.chain([first], pages) for event in page.events)
        if catching_up and first.has_more and self.tty:
            with click.progressbar(events, label="catching up", show_pos=True, item_show_func=_seq) as bar:
                for event in bar:
                    self._handle(event, quiet=True)
        else:
            for event in events:
                self._handle(event, quiet=False)

    def _handle(self, event: FeedEvent, quiet: bool) -> None:
        if self.stopping:
            raise Stopped
        # As an endpoint subscribed to ``event_types`` would get it: none listed means every type
        # but the service's own operational ones (``endpoint.offline`` …), which must be listed.
        if wants(sorted(self.event_types), event["event_type"]):
            self._forward(event, quiet)
            self.saved = event["seq"]
            self.forwarded += 1
        self.position = event["seq"]

    def _forward(self, event: FeedEvent, quiet: bool) -> None:
        """Until a 2xx (never skipped); the cursor is committed inside ``attempt``, right after it."""
        self.cursor.prepare(event["seq"])
        failures = 0
        while True:
            result = self.forwarder.attempt(event, on_success=self.cursor.commit)
            if result.error is None:
                if not quiet:
                    click.echo(f"→ {describe(event)} {result.status} {result.elapsed_ms:.0f}ms")
                return
            failures += 1
            delay = backoff(failures)
            click.echo(f"✗ {describe(event)} {result.error}: retrying in {delay:g}s", err=True)
            self._sleep(delay)

    def _fetch(self, after: int) -> Page:
        failures = 0
        while True:
            try:
                return self.feed.fetch(after)
            except ApiUnavailable as error:
                if not self.follow:
                    raise click.ClickException(f"cannot reach the API at {self.feed.client.base_url}: {error}")
                failures += 1
                delay = backoff(failures)
                click.echo(f"API unreachable ({error}): retrying in {delay:g}s", err=True)
                self._sleep(delay)

    def _sleep(self, seconds: float) -> None:
        """Wait, but raise ``Stopped`` as soon as a stop is requested."""
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))
        if self.stopping:
            raise Stopped

    @contextlib.contextmanager
    def stop_on_signals(self) -> Iterator[None]:
        """First Ctrl-C or SIGTERM: finish the event in flight (and commit it), then stop. Second: quit."""
        def request_stop(signum: int, frame: FrameType | None) -> None:
            if self.stopping:
                raise KeyboardInterrupt
            self.stopping = True

        previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _seq(event: FeedEvent | None) -> str | None:
    return None if event is None else f"seq={event['seq']}"


def _check_secret(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not is_valid_secret(value):
        raise click.BadParameter("must be the endpoint secret: 'whsec_' + base64 of 24 to 64 bytes")
    return value


def _check_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise click.BadParameter("must be an http:// or https:// URL")
    return value


def _check_event_types(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    value = tuple(part.strip() for item in value for part in item.split(",") if part.strip())
    for event_type in value:
        if not re.match(EVENT_TYPE_PATTERN, event_type):
            raise click.BadParameter(f"{event_type!r}: must be 1 to 128 letters, digits, '_', '.' or '-'")
    return value


@click.command("listen")
@click.option("--forward-to", required=True, metavar="URL", callback=_check_url, help="Local URL to POST events to.")
@click.option("--api-url", envvar="WEBHOOKS_API_URL", default="http://127.0.0.1:8000", show_default=True,
              show_envvar=True)  # fmt: skip
@click.option("--api-key", envvar="WEBHOOKS_API_KEY", required=True, show_envvar=True, help="The tenant's API key.")
@click.option("--secret", envvar="WEBHOOKS_SECRET", required=True, show_envvar=True, callback=_check_secret,
              metavar="WHSEC", help="The endpoint secret (whsec_…) to sign with.")  # fmt: skip
@click.option("--cursor-file", type=click.Path(dir_okay=False, path_type=Path), default=".webhooks-cursor",
              show_default=True, help="Where the last forwarded seq is kept.")  # fmt: skip
@click.option("--after", type=click.IntRange(0), help="Start after this seq instead of the cursor file's.")
@click.option("--event-types", "--event-type", "event_types", multiple=True, callback=_check_event_types,
              metavar="TYPES", help="Forward only these types (comma-separated, repeatable). Default: every type "
              "but the service's operational ones (endpoint.offline …), as an endpoint with no list gets.")  # fmt: skip
@click.option("--endpoint", "endpoint_id", metavar="EP_ID",
              help="Forward what this endpoint subscribes to (its event_types, read at start).")
@click.option("--follow/--no-follow", default=True, show_default=True, help="Keep polling once caught up.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True, help="Seconds.")
@click.option("--limit", type=click.IntRange(1, MAX_PAGE_SIZE), default=DEFAULT_LIMIT, show_default=True)
@click.option("--include-test", is_flag=True, help="Forward the test events of send-example too (left out by default).")
def listen_command(
    forward_to: str, api_url: str, api_key: str, secret: str, cursor_file: Path, after: int | None,
    event_types: tuple[str, ...], endpoint_id: str | None, follow: bool, interval: float, limit: int,
    include_test: bool,
) -> None:  # fmt: skip
    """Forward your events, signed, to a local URL; resumes from the cursor file after a stop."""
    cursor = CursorFile(cursor_file)
    api = httpx.Client(
        base_url=api_url, headers={"Authorization": f"Bearer {api_key}", "user-agent": USER_AGENT}, timeout=TIMEOUT
    )
    local = httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=False)
    with cursor.locked(), api, local:
        start = after if after is not None else cursor.load() or 0
        if endpoint_id is not None:
            if event_types:
                raise click.UsageError("give --endpoint or --event-types, not both")
            event_types = tuple(subscriptions(api, endpoint_id))
        # One type: the API filters. Several: the feed sends all and the listener skips the others.
        feed = Feed(api, limit, event_types[0] if len(event_types) == 1 else None, include_test)
        listener = Listener(
            feed, Forwarder(local, forward_to, secret), cursor, start, event_types=frozenset(event_types),
            follow=follow, interval=interval, tty=sys.stdout.isatty(),
        )  # fmt: skip
        click.echo(f"forwarding events after seq={start} from {api_url} to {forward_to}")
        click.echo("event types: " + (", ".join(event_types) if event_types else "all but operational ones")
                   + (f" (those of {endpoint_id})" if endpoint_id else ""))
        with listener.stop_on_signals():
            listener.run()


def init_app(app: Flask) -> None:
    """Register ``flask listen``."""
    app.cli.add_command(listen_command)
