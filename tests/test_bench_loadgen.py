"""The benchmark's load generator (bench/kit/loadgen.py): 429s retried, bodies taken in turn, a paced sender stopped."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.kit.loadgen import _burst, build_request
from tests.conftest import wait_until
from tests.receivers import Receiver, always, sequence

ROOT = Path(__file__).resolve().parent.parent


def test_burst_sends_a_429_again_after_its_retry_after_and_counts_it() -> None:
    with Receiver(sequence([(429, {"Retry-After": "0.3"}, b""), 202, 202])) as receiver:
        host, port, raw = build_request(receiver.url + "/v1/events", b"{}", [])
        started = time.monotonic()
        _, _, statuses = asyncio.run(_burst(host, port, [raw], 2, 1))
        assert dict(statuses) == {202: 2, "retried_429": 1}
        assert time.monotonic() - started >= 0.3
        assert len(receiver.requests) == 3


def test_burst_takes_its_bodies_in_turn() -> None:
    with Receiver(always(202)) as receiver:
        raws = [build_request(receiver.url + "/v1/events", body, [])[2] for body in (b'{"a":1}', b'{"b":2}')]
        host, port = "127.0.0.1", receiver.port
        asyncio.run(_burst(host, port, raws, 4, 1))
        assert sorted(request.body for request in receiver.requests) == [b'{"a":1}', b'{"a":1}', b'{"b":2}', b'{"b":2}']


def test_paced_sender_stops_on_sigterm_and_reports_every_request_it_started(tmp_path: Path) -> None:
    body, out = tmp_path / "body.json", tmp_path / "out.json"
    body.write_bytes(b"{}")
    with Receiver(always(202, {"Content-Type": "application/json"}, b'{"id": "evt_1"}')) as receiver:
        sender = subprocess.Popen([sys.executable, "-m", "bench.kit.loadgen", "paced", "--url", receiver.url + "/v1/events",
                                   "--body-file", str(body), "--count", "10000", "--rate", "50", "--out", str(out)],
                                  cwd=ROOT)
        try:
            wait_until(lambda: len(receiver.requests) >= 5)
            sender.send_signal(signal.SIGTERM)
            assert sender.wait(30) == 0
        finally:
            sender.kill()
        results = json.loads(out.read_text())
        assert 5 <= len(results) < 10000
        assert len(results) == len(receiver.requests)
        assert all(row["status"] == 202 and row["id"] == "evt_1" for row in results)
