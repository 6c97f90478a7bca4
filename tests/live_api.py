"""The app served on a real port for clients that need one (``flask listen``): the ``serve_api`` fixture.

Registered as a plugin in ``tests/conftest.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest
from flask import Flask
from werkzeug.serving import BaseWSGIServer, make_server

from tests.receivers import HOST


@dataclass
class LiveApi:
    """The app served on a real port; remembers the query of every ``GET /v1/events``."""

    url: str = ""
    feed_queries: list[dict[str, list[str]]] = field(default_factory=list)
    #: Called with ``after`` before a feed request is served (tests kill the client from here).
    on_feed: Callable[[int], None] = lambda after: None

    @property
    def afters(self) -> list[int]:
        return [int(query.get("after", ["0"])[0]) for query in self.feed_queries]


@pytest.fixture
def serve_api(app: Flask) -> Iterator[Callable[[int], LiveApi]]:
    """``serve_api(port=0)``: this test's app on a werkzeug server in a thread."""
    running: list[tuple[BaseWSGIServer, threading.Thread]] = []

    def serve(port: int = 0) -> LiveApi:
        live = LiveApi()

        def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
            if environ["PATH_INFO"] == "/v1/events" and environ["REQUEST_METHOD"] == "GET":
                query = parse_qs(environ["QUERY_STRING"])
                live.feed_queries.append(query)
                live.on_feed(int(query.get("after", ["0"])[0]))
            return app(environ, start_response)

        server = make_server(HOST, port, wsgi, threaded=True)
        live.url = f"http://{HOST}:{server.server_port}"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        running.append((server, thread))
        return live

    yield serve
    for server, thread in running:
        server.shutdown()
        thread.join(timeout=5)
