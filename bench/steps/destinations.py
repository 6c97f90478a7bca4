"""Step ``destinations`` (issue 39, ``bench/README.md``): deliveries/s to a RabbitMQ destination and to a Redis
stream beside HTTP, in interleaved rounds (``ROUNDS``) on fresh stacks, pre-loaded and delivered as the other
steps do. Arrival times: the receiver's record (``http``), a consumer thread's clock per message (``AmqpSink``),
the ids Redis gave the stream's entries (``StreamSink``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Iterator
from urllib.parse import quote

import redis

from bench.kit.cpu_split import CpuSampler, describe, steady_split
from bench.kit.markdown import Add, n, section_of
from bench.kit.procs import CLEANUP, Deadline, log
from bench.kit.stack import running
from bench.kit.stats import WARMUP, mean_of_rounds, steady_rate
from bench.kit.step import Context, Results, Step, guarded
from tests.delivery.destination_helpers import delete_vhosts, own_vhost

#: Four of each kind: rounds of one kind differ by up to 15 % on this machine, too much for two to tell 10 %. In
#: mirrored order (each kind's mean place in the run is the same), so a machine that speeds up or slows down during
#: the run favours no kind: with the order ``(http, rabbitmq, redis) * 4``, Redis always came last of three.
ROUNDS = ("http", "rabbitmq", "redis", "redis", "rabbitmq", "http") * 2

REDIS_URL = "redis://127.0.0.1:6379/0"

#: The RabbitMQ destination's exchange and routing key (``own_vhost`` binds them to its queue ``received``).
EXCHANGE, ROUTING_KEY = "bench", "bench.events"

#: What the names of this run's vhosts (and users) and streams start with.
PREFIX = f"bench-destinations-{os.getpid()}"


@dataclass
class AmqpSink:
    """A thread consuming the queue of the step's own vhost (``own_vhost``), recording each message's arrival."""

    vhost: SimpleNamespace
    times: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _error: BaseException | None = None

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._consume, name="destinations-amqp-consumer", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return (f"amqp://{self.vhost.user}:{self.vhost.password}@127.0.0.1:5672/{quote(self.vhost.vhost, safe='')}"
                f"?exchange={EXCHANGE}&routing_key={ROUTING_KEY}")

    def _consume(self) -> None:
        try:
            connection = self.vhost.connect()
            channel = connection.channel()
            channel.basic_qos(prefetch_count=1000)
            for method, _properties, _body in channel.consume("received", auto_ack=True, inactivity_timeout=0.2):
                if method is not None:
                    self.times.append(time.time())
                if self._stop.is_set():
                    break
            channel.cancel()
            connection.close()
        except BaseException as error:  # noqa: BLE001 - reported by count()
            self._error = error

    def count(self, _prefix: str = "") -> int:
        """Messages consumed so far (``ServiceStack.deliver`` polls it as it would a receiver)."""
        if self._error is not None:
            raise RuntimeError(f"the AMQP consumer failed: {self._error!r}")
        return len(self.times)

    def arrivals(self) -> list[float]:
        return list(self.times)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclass
class StreamSink:
    """A Redis stream of the step's own: counted with XLEN, arrival times from its entries' ids."""

    stream: str = field(default_factory=lambda: f"{PREFIX}-{uuid.uuid4().hex[:10]}")
    client: redis.Redis = field(default_factory=lambda: redis.Redis.from_url(REDIS_URL))

    def __post_init__(self) -> None:
        stream = self.stream  # deleted at exit too: a signal ends the run without ``close()``
        CLEANUP.add(f"delete the stream {stream}", lambda: redis.Redis.from_url(REDIS_URL).delete(stream))

    @property
    def url(self) -> str:
        return f"{REDIS_URL}?stream={self.stream}"

    def count(self, _prefix: str = "") -> int:
        return int(self.client.xlen(self.stream))

    def arrivals(self) -> list[float]:
        """Each entry's time (its id's milliseconds)."""
        return [int(entry_id.split(b"-")[0]) / 1000 for entry_id, _ in self.client.xrange(self.stream)]

    def close(self) -> None:
        self.client.delete(self.stream)
        self.client.close()


@contextmanager
def _destination(kind: str, context: Context, path: str) -> Iterator[tuple[str, Any]]:
    """(the endpoint's URL, what counts its arrivals) for one round of ``kind``."""
    if kind == "http":
        yield context.receiver.url(path), context.receiver
        return
    with own_vhost(EXCHANGE, ROUTING_KEY, PREFIX) if kind == "rabbitmq" else nullcontext() as vhost:
        sink: AmqpSink | StreamSink = AmqpSink(vhost) if kind == "rabbitmq" else StreamSink()
        try:
            yield sink.url, sink
        finally:
            sink.close()


def _round(context: Context, index: int, kind: str, deadline: Deadline) -> dict[str, Any]:
    plan = context.plan
    path = f"/destinations/{index}"
    with _destination(kind, context, path) as (url, sink), \
            running(f"destinations-{index}-{kind}", remove=True) as stack:
        tenant = stack.tenant(f"destinations{index}")
        stack.endpoint(tenant, url)
        ingest = stack.preload(tenant, plan.events, 1, deadline)
        with CpuSampler() as cpu:
            run = stack.deliver(sink, path, ingest["events"], plan.processes, deadline.left(), deadline)
            time.sleep(0.5)  # the consumer's last messages
        arrivals = [row[0] for row in sink.dump(path)] if kind == "http" else sink.arrivals()
        rate, seconds = steady_rate(arrivals, WARMUP)
        split = steady_split(cpu.samples, arrivals, os.cpu_count() or 1)
        failed = int(stack.sql.value("SELECT count(*) FROM attempt WHERE outcome <> 'delivered'") or 0)
    log(f"   destinations {kind} (round {index + 1}): {ingest['events']:,} events, "
        f"delivery {rate:,.0f}/s sustained over {seconds:.1f} s, all arrived: {run.finished}, failed attempts: {failed}")
    if split:
        log(f"   {describe(split)}")
    return {"kind": kind, "events": ingest["events"], "arrived": run.arrivals, "delivery_rate": rate,
            "steady_seconds": seconds, "complete": run.finished, "failed_attempts": failed,
            "ingest_rate": ingest["rate"], "cpu": split,
            "worker_ms": split["ms_per_delivery"]["worker"] if split else float("nan"),
            "all_ms": split["total_ms"] if split else float("nan")}


def destinations(context: Context, deadline: Deadline) -> Results:
    # A signal ends the run without ``own_vhost``'s ``finally``: the run's cleanup removes what a round left.
    CLEANUP.add(f"delete the vhosts and users {PREFIX}-*", lambda: delete_vhosts(PREFIX))
    rounds = [guarded(f"destinations: round {index + 1}, {kind}",
                      lambda d, i=index, k=kind: _round(context, i, k, d), deadline.left() / (len(ROUNDS) - index))
              for index, kind in enumerate(ROUNDS)]
    return {"rounds": rounds}


@section_of("destinations", "Destinations: RabbitMQ and a Redis stream beside HTTP")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    rounds = step["rounds"]
    add("| round | destination | events | delivery (deliveries/s, sustained) | all arrived | failed attempts "
        "| worker CPU per delivery (ms) | all processes' CPU per delivery (ms) |")
    add("|---|---|---|---|---|---|---|---|")
    for index, one in enumerate(rounds):
        if one.get("status") == "ok":
            add(f"| {index + 1} | {one['kind']} | {n(one['events'])} | {n(one['delivery_rate'])} | "
                f"{'yes' if one['complete'] else 'no'} | {n(one['failed_attempts'])} | "
                f"{n(one.get('worker_ms'), 3)} | {n(one.get('all_ms'), 3)} |")
        else:
            add(f"| {index + 1} | {ROUNDS[index]} | – | {one.get('status')}: {one.get('error', '')[:80]} | – | – | – | – |")
    kinds = ("http", "rabbitmq", "redis")
    http, amqp, stream = (mean_of_rounds(rounds, kind, "delivery_rate", "kind") for kind in kinds)
    add("")
    add(f"Means: HTTP {n(http)}/s, RabbitMQ {n(amqp)}/s, Redis stream {n(stream)}/s. "
        f"RabbitMQ vs HTTP: {100 * (amqp - http) / http:+.1f} %, Redis vs HTTP: {100 * (stream - http) / http:+.1f} %.")
    if all("worker_ms" in one for one in rounds if one.get("status") == "ok"):
        worker = [n(mean_of_rounds(rounds, kind, "worker_ms", "kind"), 3) for kind in kinds]
        every = [n(mean_of_rounds(rounds, kind, "all_ms", "kind"), 3) for kind in kinds]
        add(f"CPU per delivery in the steady part (ms; the machine's processes sampled every 0.25 s, "
            f"`bench/kit/cpu_split.py`): the workers' {worker[0]} for HTTP, {worker[1]} for RabbitMQ, {worker[2]} "
            f"for Redis; every process's (the service, the broker, the receiver, Redis, the harness's AMQP "
            f"consumer) {every[0]}, {every[1]} and {every[2]}.")
    met = amqp >= http and stream >= http
    add(f"Target (neither slower than HTTP): {'met' if met else 'not met'}.")
    add("")


STEP = Step("destinations", "deliveries/s to RabbitMQ and a Redis stream beside HTTP, interleaved", destinations,
            lambda context: len(ROUNDS) * (180 + context.plan.events / 100), (section,), full_run=False)
