#!/usr/bin/env python3
"""CPU per request of the guarded ``Sender`` against a plain ``aiohttp.ClientSession``.

``python bench/sender_cpu.py [--requests N] [--concurrency C] [--rounds R]`` starts
``bench/receiver.py`` in a process of its own (so its CPU is not counted), then in this
process posts N webhook-shaped requests, C at a time, with (a) a plain aiohttp session
(``TCPConnector(limit=0)``, body read whole) and (b) ``webhooks.delivery.sender.Sender``
(SSRF guard, total deadline, 20 KB read cap, ``HttpResult``). The two alternate for R rounds
after a warm-up; it prints the client process's CPU ms per request (``time.process_time()``)
and requests/s of each round, and the median. On a shared machine the figures are indicative.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhooks.delivery.sender import Sender  # noqa: E402
from webhooks.delivery.netguard import TargetPolicy  # noqa: E402

#: A webhook-shaped request: Standard Webhooks headers and a small JSON body.
HEADERS = {
    "content-type": "application/json",
    "webhook-id": "evt_2mFq8W1xZr0bN7cKd3LhYp",
    "webhook-timestamp": "1795000000",
    "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
}
BODY = b'{"type": "order.paid", "timestamp": "2026-11-23T10:00:00Z", "data": {"id": "ord_1", "amount": 4200}}'
#: The guard is exercised for real: loopback is opened through an allowed network, not switched off.
POLICY = TargetPolicy.from_strings(False, "127.0.0.0/8")

Post = Callable[[], Awaitable[int]]


async def drive(post: Post, requests: int, concurrency: int) -> tuple[float, float]:
    """``requests`` calls of ``post``, ``concurrency`` at a time; (CPU seconds, wall seconds)."""
    remaining = requests

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            status = await post()
            if status != 200:
                raise RuntimeError(f"receiver answered {status}")

    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.process_time() - cpu, time.monotonic() - wall


async def plain_contender(url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def post() -> int:
        async with session.post(url, headers=HEADERS, data=BODY) as response:
            await response.read()
            return response.status

    return post, session.close


async def sender_contender(url: str) -> tuple[Post, Callable[[], Awaitable[None]]]:
    sender = Sender(timeout=15.0, policy=POLICY)

    async def post() -> int:
        result = await sender.post(url, HEADERS, BODY)
        if result.error is not None:
            raise RuntimeError(result.error)
        return result.status_code or 0

    return post, sender.close


CONTENDERS = {"plain aiohttp": plain_contender, "guarded Sender": sender_contender}


async def measure(url: str, requests: int, concurrency: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CONTENDERS}
    for round_no in range(rounds):
        for name, make in CONTENDERS.items():
            post, close = await make(url)
            try:
                await drive(post, min(2000, requests), concurrency)  # warm-up: connections, caches
                cpu, wall = await drive(post, requests, concurrency)
            finally:
                await close()
            results[name].append((cpu, wall))
            print(
                f"round {round_no + 1} {name:15} {cpu * 1000 / requests:.3f} ms CPU/request "
                f"{requests / wall:8.0f} requests/s",
                flush=True,
            )
    return results


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_receiver(port: int) -> subprocess.Popen[bytes]:
    receiver = subprocess.Popen([sys.executable, str(ROOT / "bench" / "receiver.py"), str(port), "--quiet"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return receiver
        except OSError:
            time.sleep(0.05)
    receiver.kill()
    raise SystemExit("bench/receiver.py did not start within 10 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    receiver = start_receiver(port)
    try:
        results = asyncio.run(measure(f"http://127.0.0.1:{port}/hook", args.requests, args.concurrency, args.rounds))
    finally:
        receiver.terminate()
        receiver.wait(5)
    print(f"\nmedian of {args.rounds} rounds, {args.requests} requests, {args.concurrency} at a time:")
    medians = {}
    for name, runs in results.items():
        medians[name] = statistics.median(cpu for cpu, _ in runs) * 1000 / args.requests
        rate = statistics.median(args.requests / wall for _, wall in runs)
        print(f"  {name:15} {medians[name]:.3f} ms CPU/request  {rate:8.0f} requests/s")
    plain, guarded = medians["plain aiohttp"], medians["guarded Sender"]
    print(f"  guard overhead  {guarded - plain:+.3f} ms CPU/request ({(guarded / plain - 1) * 100:+.0f} %)")


if __name__ == "__main__":
    main()
