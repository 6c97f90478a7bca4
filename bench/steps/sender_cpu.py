"""Step ``sender_cpu`` (only with ``--only sender_cpu``): CPU per request of the guarded ``Sender`` against a
plain ``aiohttp.ClientSession``.

Against the run's receiver (a process of its own, so its CPU is not counted), this process posts
``--requests`` webhook-shaped requests, ``--concurrency`` at a time, with (a) a plain aiohttp
session (``TCPConnector(limit=0)``, body read whole) and (b) ``webhooks.delivery.sender.Sender``
(SSRF guard, total deadline, 20 KB read cap, ``HttpResult``). The two alternate for ``--rounds``
rounds after a warm-up; the figures are this process's CPU ms per request (``time.process_time()``)
and requests/s of each round, and their medians. On a shared machine the figures are indicative.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from bench.kit.markdown import Add, heading
from bench.kit.procs import Deadline, log
from bench.kit.step import Context, Results, Step
from webhooks.delivery.netguard import TargetPolicy
from webhooks.delivery.sender import Sender

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
            log(f"   round {round_no + 1} {name:15} {cpu * 1000 / requests:.3f} ms CPU/request "
                f"{requests / wall:8.0f} requests/s")
    return results


def sender_cpu(context: Context, deadline: Deadline) -> Results:
    """Both contenders, alternating, against the run's receiver; the medians of their rounds."""
    args = context.args
    results = asyncio.run(measure(context.receiver.url("/hook"), args.requests, args.concurrency, args.rounds))
    medians = {}
    for name, runs in results.items():
        medians[name] = {"cpu_ms_per_request": statistics.median(cpu for cpu, _ in runs) * 1000 / args.requests,
                         "requests_per_s": statistics.median(args.requests / wall for _, wall in runs)}
    return {"requests": args.requests, "concurrency": args.concurrency, "rounds": args.rounds, "medians": medians}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("step sender_cpu")
    group.add_argument("--requests", type=int, default=20_000)
    group.add_argument("--concurrency", type=int, default=200)
    group.add_argument("--rounds", type=int, default=3)


def section(r: dict[str, Any], add: Add) -> None:
    step = r.get("sender_cpu")
    if not heading(add, "The guarded sender's CPU per request (`--only sender_cpu`)", step):
        return
    add(f"median of {step['rounds']} rounds, {step['requests']} requests, {step['concurrency']} at a time:")
    add("")
    medians = step["medians"]
    for name, figures in medians.items():
        add(f"- {name}: {figures['cpu_ms_per_request']:.3f} ms CPU/request, {figures['requests_per_s']:.0f} requests/s")
    plain, guarded = medians["plain aiohttp"]["cpu_ms_per_request"], medians["guarded Sender"]["cpu_ms_per_request"]
    add(f"- guard overhead: {guarded - plain:+.3f} ms CPU/request ({(guarded / plain - 1) * 100:+.0f} %)")
    add("")


STEP = Step("sender_cpu", "the guarded sender's CPU per request", sender_cpu, lambda context: 600, (section,),
            full_run=False, add_arguments=add_arguments)
