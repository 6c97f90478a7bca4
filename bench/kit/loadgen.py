"""HTTP load for the benchmark, in processes of its own (the harness's GIL must not slow it), raw HTTP/1.1 over
asyncio sockets (tens of microseconds of client CPU a request: not what limits gunicorn on 2 cores).

``python -m bench.kit.loadgen burst|paced --url URL --body-file F [--body-file G …] [--header 'K: V'] --count N
--out PATH`` writes one JSON object to ``PATH``; several body files are sent in turn.

- ``burst``: exactly ``--count`` POSTs as fast as the server answers, ``--connections`` at a time in each of
  ``--processes`` processes: the elapsed time and the statuses. A ``429`` is sent again after its
  ``Retry-After``, as a well-behaved client does (counted under ``retried_429``).
- ``paced``: ``--count`` POSTs started at a fixed ``--rate`` (open loop: a slow answer does not delay the next),
  each one's start and end (unix time), status and event id; SIGTERM stops the starting, those started are
  awaited. With ``--idempotency-prefix P`` request ``i`` carries ``Idempotency-Key: P-i`` and is sent again
  (after ``RETRY_PAUSE``, doubling) for up to ``--retry-for`` seconds until a ``202``, its refusals listed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import multiprocessing
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def build_request(url: str, body: bytes, headers: list[str]) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"POST {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1", f"Host: {host}:{port}",
             "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return host, port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body


#: Seconds a 429 without a usable ``Retry-After`` waits before the request is sent again.
DEFAULT_RETRY_AFTER = 1.0

#: First pause before a refused request is sent again with the same idempotency key (seconds);
#: it doubles on each refusal, with jitter, up to ``RETRY_PAUSE_MAX`` (a client that
#: retries at a fixed pace turns an API that is slow for a moment into one that is overloaded).
RETRY_PAUSE = 0.2
RETRY_PAUSE_MAX = 5.0

#: How long one request may take before it counts as refused (seconds).
REQUEST_TIMEOUT = 10.0


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool, bytes, float | None, dict[str, str]]:
    """(status, connection closes, body, ``Retry-After`` seconds, lowercased headers) of one response."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, close, retry_after = 0, lines[0].startswith("HTTP/1.0"), None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers[name] = value.strip()
        if name == "content-length":
            length = int(value)
        elif name == "connection":
            close = value.strip().lower() == "close"
        elif name == "retry-after":
            try:
                retry_after = float(value)
            except ValueError:
                retry_after = None  # an HTTP date: not sent by this service
    body = await reader.readexactly(length) if length else b""
    return status, close, body, retry_after, headers


async def _burst(host: str, port: int, raws: list[bytes], count: int, connections: int) -> tuple[float, float, Counter]:
    remaining = [count]
    statuses: Counter = Counter()
    bodies = itertools.cycle(raws)

    async def one_connection() -> None:
        reader = writer = None
        while remaining[0] > 0:
            remaining[0] -= 1
            raw = next(bodies)
            for attempt in range(3):
                try:
                    while True:
                        if writer is None:
                            reader, writer = await asyncio.open_connection(host, port)
                        writer.write(raw)
                        status, close, _, retry_after, _ = await read_response(reader)  # type: ignore[arg-type]
                        if close:
                            writer.close()
                            writer = None
                        if status != 429:
                            break
                        statuses["retried_429"] += 1
                        await asyncio.sleep(retry_after or DEFAULT_RETRY_AFTER)
                    statuses[status] += 1
                    break
                except (OSError, asyncio.IncompleteReadError) as error:
                    if writer is not None:
                        writer.close()
                    writer = None
                    if attempt == 2:
                        statuses[f"error: {type(error).__name__}"] += 1
        if writer is not None:
            writer.close()

    started = time.time()
    await asyncio.gather(*(one_connection() for _ in range(connections)))
    return started, time.time(), statuses


def _burst_process(args: tuple[str, int, list[bytes], int, int, Any]) -> tuple[float, float, dict[str, int]]:
    host, port, raws, count, connections, ready = args
    ready.wait()  # every process starts at once
    started, ended, statuses = asyncio.run(_burst(host, port, raws, count, connections))
    return started, ended, {str(k): v for k, v in statuses.items()}


def burst(url: str, bodies: list[bytes], headers: list[str], count: int, connections: int,
          processes: int) -> dict[str, Any]:
    """Exactly ``count`` POSTs (taking ``bodies`` in turn); returns elapsed seconds, requests per second and statuses."""
    raws = [build_request(url, body, headers)[2] for body in bodies]
    host, port, _ = build_request(url, bodies[0], headers)
    shares = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
    with multiprocessing.Manager() as manager:
        ready = manager.Barrier(processes)
        with multiprocessing.Pool(processes) as pool:
            results = pool.map(_burst_process, [(host, port, raws, n, connections, ready) for n in shares])
    started = min(r[0] for r in results)
    ended = max(r[1] for r in results)
    statuses = sum((Counter(s) for _, _, s in results), Counter())
    elapsed = ended - started
    return {"count": count, "seconds": elapsed, "rps": count / elapsed if elapsed > 0 else 0.0,
            "statuses": dict(statuses), "processes": processes, "connections_per_process": connections,
            "started": started, "ended": ended}


async def _post_once(host: str, port: int, raw: bytes) -> tuple[int | str, bytes, dict[str, str]]:
    """One request on a fresh connection: (status or ``error: …``, body, headers)."""
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), REQUEST_TIMEOUT)
        writer.write(raw)
        status, _, body, _, headers = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)
        return status, body, headers
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as error:
        return f"error: {type(error).__name__}", b"", {}
    finally:
        if writer is not None:
            writer.close()


async def _paced(url: str, bodies: list[bytes], headers: list[str], count: int, rate: float,
                 idempotency_prefix: str | None, retry_for: float) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [{} for _ in range(count)]

    async def one(i: int) -> None:
        started = time.time()
        extra = [f"Idempotency-Key: {idempotency_prefix}-{i}"] if idempotency_prefix else []
        host, port, raw = build_request(url, bodies[i % len(bodies)], headers + extra)
        refusals: list[tuple[float, int | str]] = []
        while True:
            status, body, answer_headers = await _post_once(host, port, raw)
            if status == 202 or not idempotency_prefix or time.time() - started > retry_for:
                break
            refusals.append((time.time(), status))
            pause = min(RETRY_PAUSE * 2 ** (len(refusals) - 1), RETRY_PAUSE_MAX)
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))
        try:
            event_id = json.loads(body).get("id") if status == 202 else None
        except ValueError:
            event_id = None
        results[i] = {"start": started, "status": status, "id": event_id, "end": time.time()}
        if idempotency_prefix:
            results[i].update(key=f"{idempotency_prefix}-{i}", refusals=refusals,
                              replayed=answer_headers.get("idempotent-replayed") == "true")

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tasks = []
    t0 = time.monotonic() + 0.05
    for i in range(count):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except asyncio.TimeoutError:
                pass
        if stop.is_set():
            break
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return results[: len(tasks)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["burst", "paced"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", action="append", required=True,
                        help="the request body; repeat it to send several bodies in turn")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--out", required=True, help="where the result goes")
    parser.add_argument("--idempotency-prefix", help="paced: send request i with Idempotency-Key PREFIX-i, again until 202")
    parser.add_argument("--retry-for", type=float, default=600.0, help="paced: give up on a request after this long")
    args = parser.parse_args()
    bodies = [Path(name).read_bytes() for name in args.body_file]
    if args.mode == "burst":
        result: Any = burst(args.url, bodies, args.header, args.count, args.connections, args.processes)
    else:
        result = asyncio.run(_paced(args.url, bodies, args.header, args.count, args.rate, args.idempotency_prefix,
                                    args.retry_for))
    Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
