"""HTTP load for the benchmark, in processes of its own (the harness's GIL must not slow it).

Two modes, both speaking raw HTTP/1.1 over asyncio sockets (a few tens of microseconds of
client CPU per request, so the load generator is not what limits gunicorn on 2 cores):

- ``burst``: exactly ``--count`` POSTs as fast as the server answers, ``--connections``
  at a time in each of ``--processes`` processes; prints the elapsed time and the
  statuses (ingestion requests per second).
- ``paced``: ``--count`` POSTs started at a fixed ``--rate`` (open loop: a slow answer
  does not delay the next request); prints, per request, when it started (unix time),
  its status and the ``id`` of the JSON answer (the event id).

``python -m bench.loadgen burst --url URL --body-file F [--header 'K: V'] --count N``
prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit


def build_request(url: str, body: bytes, headers: list[str]) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"POST {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1", f"Host: {host}:{port}",
             "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return host, port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
    """(status, connection closes, body) of one response."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, close = 0, lines[0].startswith("HTTP/1.0")
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "connection":
            close = value.strip().lower() == "close"
    body = await reader.readexactly(length) if length else b""
    return status, close, body


async def _burst(host: str, port: int, raw: bytes, count: int, connections: int) -> tuple[float, float, Counter]:
    remaining = [count]
    statuses: Counter = Counter()

    async def one_connection() -> None:
        reader = writer = None
        while remaining[0] > 0:
            remaining[0] -= 1
            for attempt in range(3):
                try:
                    if writer is None:
                        reader, writer = await asyncio.open_connection(host, port)
                    writer.write(raw)
                    status, close, _ = await read_response(reader)  # type: ignore[arg-type]
                    statuses[status] += 1
                    if close:
                        writer.close()
                        writer = None
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


def _burst_process(args: tuple[str, int, bytes, int, int, Any, Any]) -> tuple[float, float, dict[str, int]]:
    host, port, raw, count, connections, ready, go = args
    ready.wait()
    go.wait()
    started, ended, statuses = asyncio.run(_burst(host, port, raw, count, connections))
    return started, ended, {str(k): v for k, v in statuses.items()}


def burst(url: str, body: bytes, headers: list[str], count: int, connections: int, processes: int) -> dict[str, Any]:
    """Exactly ``count`` POSTs; returns elapsed seconds, requests per second and statuses."""
    host, port, raw = build_request(url, body, headers)
    shares = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
    with multiprocessing.Manager() as manager:
        ready = manager.Barrier(processes + 1)
        go = manager.Event()
        with multiprocessing.Pool(processes) as pool:
            pending = pool.map_async(_burst_process, [(host, port, raw, n, connections, ready, go) for n in shares])
            ready.wait()
            go.set()
            results = pending.get()
    started = min(r[0] for r in results)
    ended = max(r[1] for r in results)
    statuses: Counter = Counter()
    for _, _, s in results:
        statuses.update(s)
    elapsed = ended - started
    return {"count": count, "seconds": elapsed, "rps": count / elapsed if elapsed > 0 else 0.0,
            "statuses": dict(statuses), "processes": processes, "connections_per_process": connections}


async def _paced(host: str, port: int, raw: bytes, count: int, rate: float) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [{} for _ in range(count)]

    async def one(i: int) -> None:
        started = time.time()
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(raw)
            status, _, body = await read_response(reader)
            writer.close()
            event_id = json.loads(body).get("id") if status == 202 else None
            results[i] = {"start": started, "status": status, "id": event_id, "end": time.time()}
        except (OSError, asyncio.IncompleteReadError, ValueError) as error:
            results[i] = {"start": started, "status": f"error: {type(error).__name__}", "id": None, "end": time.time()}

    tasks = []
    t0 = time.monotonic() + 0.05
    for i in range(count):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return results


def paced(url: str, body: bytes, headers: list[str], count: int, rate: float) -> list[dict[str, Any]]:
    host, port, raw = build_request(url, body, headers)
    return asyncio.run(_paced(host, port, raw, count, rate))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["burst", "paced"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--out", help="write the result here instead of stdout")
    args = parser.parse_args()
    with open(args.body_file, "rb") as handle:
        body = handle.read()
    if args.mode == "burst":
        result: Any = burst(args.url, body, args.header, args.count, args.connections, args.processes)
    else:
        result = paced(args.url, body, args.header, args.count, args.rate)
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
