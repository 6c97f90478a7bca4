"""An OTLP/HTTP trace sink for the ``tracing`` step, ``python -m bench.kit.otlp_sink PORT``: answers every
``POST /v1/traces`` with 200 and nothing, counts (``GET /count``: ``{"requests": n, "bytes": n}``) and decodes
nothing, so that it costs the machine as little as a collector on another host would."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_counts = {"requests": 0, "bytes": 0}
_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        size = len(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with _lock:
            _counts["requests"] += 1
            _counts["bytes"] += size
        self._answer(b"", "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802
        with _lock:
            body = json.dumps(_counts).encode()
        self._answer(body, "application/json")

    def _answer(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
