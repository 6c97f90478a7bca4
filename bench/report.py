"""Markdown for ``bench/RESULTS.md``: the generated section between the ``bench:run`` markers.

Only that section is rewritten; whatever else the file holds (hand-written entries)
stays as it is. Targets are reported as met or not met from the figures measured; a
step that failed or timed out says so instead of a number.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bench import cpu_split, engine_report, ingest_steps, web_steps
from bench.harness import BENCH
from bench.report_common import floor_rate as _floor_rate
from bench.report_common import heading as _heading
from bench.report_common import peer_ratio_row
from bench.report_common import mib as _mib
from bench.report_common import n as _n
from bench.report_common import overrides as _overrides
from bench.report_common import ok as _ok
from bench.report_common import service_rate as _service_rate
from bench.report_common import verdict as _verdict
from bench.report_common import why as _why

RESULTS = BENCH / "RESULTS.md"

#: Every step of a full run, in the order run.py runs them (the keys of its results).
STEPS = ("receiver", "peers", "service", "ingest", "slow_clients", "admission", "noisy", "ladder", "backlog",
         *engine_report.STEPS)
START = "<!-- bench:run:start -->"
END = "<!-- bench:run:end -->"


def write_results(markdown: str, path: Path = RESULTS) -> None:
    """Replace the generated section of ``path`` (or append one)."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"{START}\n{markdown.strip()}\n{END}"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def publish_plots(source: Path, target: Path = BENCH) -> list[Path]:
    """Copy the run's plots (``*.png`` in ``source``) next to RESULTS.md, which links them."""
    copied = []
    for plot in sorted(source.glob("*.png")):
        copied.append(Path(shutil.copy2(plot, target / plot.name)))
    return copied


# -- sections ------------------------------------------------------------------------------------


def render(r: dict[str, Any]) -> str:
    plan = r["plan"]
    out: list[str] = []
    add = out.append
    kind = "quick run" if plan["quick"] else "full run"
    add(f"## {r['date']}: `{r['command']}` ({kind}, generated)")
    add("")
    if plan["quick"]:
        add("> `--quick`: small numbers to check the harness end to end. Use the full run "
            "(`python bench/run.py`) for figures to quote.")
        add("")
    m, v = r["machine"], r["versions"]
    load = m.get("load_at_start") or (0, 0, 0)
    add(f"- **Command**: `{r['command']}` (took {r['wall_seconds'] / 60:.1f} min; every process's log and the raw "
        "figures in `bench/.logs/`)")
    add(f"- **Machine**: {m['cpu']}, {m['cores']} cores, {m['memory_gib']:.1f} GiB; Linux {m['kernel']}"
        f"{', ' + m['os'] if m.get('os') else ''}; load average at start {load[0]:.2f}")
    add(f"- **Versions**: Python {v['python']}, RabbitMQ {v['rabbitmq']}, PostgreSQL {v['postgresql']}, "
        f"dramatiq {v['dramatiq']}, celery {v['celery']} (kombu {v['kombu']}, amqp {v['amqp']}), pika {v['pika']}, "
        f"httpx {v['httpx']}, aiohttp {v.get('aiohttp', '–')}, gunicorn {v['gunicorn']}, Flask {v['Flask']}, "
        f"peewee {v['peewee']}, psycopg2-binary {v['psycopg2-binary']}, psutil {v['psutil']}, "
        f"matplotlib {v.get('matplotlib', '–')}, wrk {v['wrk']}")
    if r.get("overridden_service_pins"):
        add(f"- **Environment**: `bench/.venv` = `bench/requirements.txt` + the service's `requirements.txt`; where "
            f"they differ the bench's pin wins: {', '.join('`' + p + '`' for p in r['overridden_service_pins'])} "
            "(Celery pins `python-dateutil==2.9.0.post0` exactly; in the service only `svix`, a test dependency, "
            "uses it)")
    add(f"- **Same for every contender**: one receiver process (`bench/receiver.py`, asyncio, keep-alive, answers "
        f"200); the same ~1 KB JSON body; {plan['events']:,} messages pre-loaded before the workers start; "
        f"**{plan['processes']} worker processes (one per core)**: floor 2 × `python -m bench.peers.floor "
        "--threads 8`; async floor 2 × `python -m bench.peers.async_floor --prefetch 256`; dramatiq `--processes 2 "
        "--threads 8`; Celery 2 × `worker --pool threads --concurrency 8`; the service 2 × `python -m "
        "webhooks.worker` with its **default settings** (plus one `python -m webhooks.clock`; web: the Procfile's `gunicorn -c python:webhooks.gunicorn_conf`, 2 processes × 8 threads). "
        "Prefetch is each one's default (floor 8 per process, dramatiq 16, Celery 32). Rates are arrivals at the "
        "receiver per second after discarding the first 10%.")
    add("")
    engine_report.targets(r, add)
    _targets(r, add)
    _receiver(r, add)
    _throughput(r, add)
    _service(r, add)
    ingest_steps.render(r, add)
    web_steps.render(r, add)
    _scale(r, add)
    _noisy(r, add)
    _ladder(r, add)
    _backlog(r, add)
    engine_report.sections(r, add)
    _problems(r, add)
    return "\n".join(out) + "\n"


def _targets(r: dict[str, Any], add: Any) -> None:
    add("### Earlier targets")
    add("")
    add("| target | measured | verdict |")
    add("|---|---|---|")
    add(peer_ratio_row(r, "floor", 0.75))
    throughput = r.get("service", {}).get("throughput")
    if _ok(throughput):
        ingest = throughput["ingest"]["rate"]
        add(f"| ingestion ≥ 1,500 events/s | {_n(ingest)} events/s | {_verdict(ingest >= 1500)} |")
    else:
        add("| ingestion ≥ 1,500 events/s | – | not measured |")
    backlog = r.get("backlog")
    if _ok(backlog) and backlog.get("memory"):
        mem = backlog["memory"]
        met = _flat(mem)
        add(f"| worker memory flat across the {backlog['backlog']:,} backlog | RSS {mem['start_mib']:.0f} → peak "
            f"{mem['peak_mib']:.0f} → end {mem['end_mib']:.0f} MiB "
            f"({'drained' if backlog.get('finished') else 'drain not finished, see below'}) | "
            f"{_verdict(met if backlog.get('finished') else None) if backlog.get('finished') else _verdict(None) + ' (drain unfinished; flat so far: ' + ('yes' if met else 'no') + ')'} |")
    else:
        add("| worker memory flat across the backlog | – | not measured |")
    add("")
    add("Flat memory: the largest worker process's peak RSS stays within 10% (and 16 MiB) of its RSS once started "
        "and idle, sampled every second while the backlog is accepted, parked and drained.")
    add("")


def _flat(mem: dict[str, Any]) -> bool:
    base = mem["start_mib"]
    return mem["peak_mib"] - base <= max(16.0, 0.10 * base)


def _receiver(r: dict[str, Any], add: Any) -> None:
    step = r.get("receiver")
    if not _heading(add, "Receiver capacity", step):
        return
    fastest = max([p["rate"] for p in r.get("peers", {}).values() if isinstance(p, dict) and _ok(p) and "rate" in p]
                  + ([_service_rate(r)] if _service_rate(r) else []) or [float("nan")])
    add(f"`bench/receiver.py` (one process, asyncio) under {step['tool']}, {step['threads']} thread, "
        f"{step['connections']} keep-alive connections, 1 KB POSTs for {step['seconds']:.0f} s: "
        f"**{_n(step['rps'])} requests/s** (p50 {_n(step['p50_ms'], 2)} ms, p99 {_n(step['p99_ms'], 2)} ms), "
        f"{step['rps'] / fastest:.0f} × the fastest contender: not the bottleneck." if fastest == fastest else
        f"**{_n(step['rps'])} requests/s**.")
    add("")


def _throughput(r: dict[str, Any], add: Any) -> None:
    plan = r["plan"]
    add(f"### Throughput ({plan['events']:,} messages each, {plan['processes']} processes)")
    add("")
    add("| contender | queue | sustained deliveries/s | × floor | worker start → last arrival | peak RSS, largest process |")
    add("|---|---|---|---|---|---|")
    floor = _floor_rate(r)
    rows = [
        ("floor", "floor: pika consumer, 8 threads, httpx POST, ack (no DB, no signing)", "quorum, the service's primary-queue arguments"),
        ("floor-classic", "floor, same code", "classic"),
        ("async-floor", "async floor: pika `AsyncioConnection` + one aiohttp `ClientSession`, 256 in flight, POST, ack (no DB)", "quorum, the service's primary-queue arguments"),
        ("dramatiq", f"dramatiq {r['versions']['dramatiq']}: actor, `Retries` exponential backoff", "classic (dramatiq's own declaration)"),
        ("celery", f"Celery {r['versions']['celery']}: task, `autoretry_for` + `retry_backoff`, `acks_late`, no result backend", "classic (Celery's default)"),
    ]
    peers = r.get("peers", {})
    for key, label, queue in rows:
        step = peers.get(key)
        if _ok(step):
            ratio = f"{step['rate'] / floor:.2f}" if floor else "–"
            add(f"| {label} | {queue} | {_n(step['rate'])} | {ratio} | {step['from_start_seconds']:.1f} s | "
                f"{_mib(step['memory'])} |")
        else:
            add(f"| {label} | {queue} | {_why(step)} | | | |")
    step = r.get("service", {}).get("throughput")
    if _ok(r.get("service")) and _ok(step):
        ratio = f"**{step['rate'] / floor:.2f}**" if floor else "–"
        add(f"| **this service**, end to end: signed, claimed and logged in PostgreSQL | quorum | **{_n(step['rate'])}** | "
            f"{ratio} | {step['from_start_seconds']:.1f} s | {_mib(step['memory'])} |")
    else:
        add(f"| **this service** | quorum | {_why(step if step else r.get('service'))} | | | |")
    add("")
    add(f"The service runs with its default settings ({engine_report.service_settings_note(r)}), to one endpoint; "
        "its log level is its default (INFO: one line per attempt).")
    add("")
    _cpu_split(r, rows, add)


def _cpu_split(r: dict[str, Any], rows: list[tuple[str, str, str]], add: Any) -> None:
    """Where each delivery's CPU went in the throughput steps (``bench/cpu_split.py``)."""
    peers = r.get("peers", {})
    labels = {"floor": "floor", "floor-classic": "floor, classic queue", "async-floor": "async floor",
              "dramatiq": "dramatiq", "celery": "Celery"}
    measured = [(labels.get(key, key), peers[key]["cpu"]) for key, _, _ in rows
                if _ok(peers.get(key)) and peers[key].get("cpu")]
    step = r.get("service", {}).get("throughput")
    if _ok(r.get("service")) and _ok(step) and step.get("cpu"):
        measured.append(("**this service**", step["cpu"]))
    if not measured:
        return
    names = {"worker": "workers", "postgresql": "PostgreSQL", "rabbitmq": "RabbitMQ", "receiver": "receiver"}
    add("CPU per delivery, in milliseconds, by process over the same measured window (every process on the "
        "machine sampled every 0.25 s, `bench/cpu_split.py`). On a saturated machine a contender's rate is the "
        "cores divided by the sum:")
    add("")
    add("| contender | " + " | ".join(names[role] for role in cpu_split.MAIN_ROLES) + " | the rest | all | cores busy |")
    add("|---|" + "---|" * (len(cpu_split.MAIN_ROLES) + 3))
    for label, cpu in measured:
        per = cpu["ms_per_delivery"]
        rest = sum(ms for role, ms in per.items() if role not in cpu_split.MAIN_ROLES)
        add(f"| {label} | " + " | ".join(f"{per.get(role, 0.0):.3f}" for role in cpu_split.MAIN_ROLES)
            + f" | {rest:.3f} | {cpu['total_ms']:.3f} | {cpu['busy_cores']:.2f} of {cpu['cores']} |")
    add("")


def _service(r: dict[str, Any], add: Any) -> None:
    svc = r.get("service")
    if not _heading(add, "This service", svc):
        return
    add("| figure | value |")
    add("|---|---|")
    step = svc.get("throughput")
    if _ok(step):
        ing = step["ingest"]
        add(f"| ingestion through gunicorn (`-w 2`), workers stopped, `POST /v1/events` with ~1 KB payloads | "
            f"**{_n(ing['rate'])} events/s** (server side, from `event.created_at`; {ing['events']:,} events; wrk "
            f"{ing['client_threads']} threads × {ing['client_connections']} connections, client p50 "
            f"{_n(ing['client_p50_ms'], 1)} ms, p99 {_n(ing['client_p99_ms'], 1)} ms, non-2xx {ing['client_non_2xx']}) |")
        add(f"| events → attempts logged (`SELECT count(*) FROM attempt`) → delivered | {step['events']:,} → "
            f"{step['attempts_logged']:,} → {step['delivered']:,} |")
        add(f"| worker RSS during delivery, largest process, sampled every 0.5 s | peak {_mib(step['memory'])}, at the "
            f"end {_mib(step['memory'], 'end_mib')} |")
    else:
        add(f"| ingestion and delivery | {_why(step)} |")
    lat = svc.get("latency")
    if _ok(lat):
        add(f"| latency `POST /v1/events` start → arrival at the receiver, {lat['rate']:.0f} events/s for "
            f"{lat['sent'] / lat['rate']:.0f} s (achieved {_n(lat['achieved_rate'], 1)}/s), first 10% dropped | "
            f"p50 **{_n(lat['p50_ms'], 1)} ms**, p90 {_n(lat['p90_ms'], 1)} ms, p99 **{_n(lat['p99_ms'], 1)} ms**, max "
            f"{_n(lat['max_ms'], 1)} ms ({lat['delivered']:,} of {lat['measured']:,} delivered; of which the POST until its "
            f"202: p50 {_n(lat['post_p50_ms'], 1)} ms, p99 {_n(lat['post_p99_ms'], 1)} ms; from the 202 to the arrival: "
            f"p50 {_n(lat.get('after_answer_p50_ms'), 1)} ms, p99 {_n(lat.get('after_answer_p99_ms'), 1)} ms) |")
        for name, stage in lat.get("stages", {}).items():
            add(f"| latency at {lat['rate']:.0f} events/s, stage {name} (from the service's own timestamps) | "
                f"p50 {_n(stage['p50_ms'], 1)} ms, p99 {_n(stage['p99_ms'], 1)} ms |")
        add(f"| worker peak RSS during the latency run | {_mib(lat['memory'])} |")
    else:
        add(f"| latency | {_why(lat)} |")
    add("")


def _scale(r: dict[str, Any], add: Any) -> None:
    add("### Scale: worker processes on 2 cores (8 threads each)")
    add("")
    add("| worker processes | this service, deliveries/s | floor, deliveries/s |")
    add("|---|---|---|")
    svc = r.get("service") or {}
    peers = r.get("peers") or {}
    for processes in (1, 2, 4):
        if processes == 2:
            s, f = svc.get("throughput"), peers.get("floor")
        else:
            s = (svc.get("scale") or {}).get(str(processes))
            f = (peers.get("floor-scale") or {}).get(str(processes))
        s_text = _n(s["rate"]) if _ok(s) and _ok(svc) else _why(s)
        f_text = _n(f["rate"]) if _ok(f) else _why(f)
        add(f"| {processes} | {s_text} | {f_text} |")
    add("")
    add("2 processes is the throughput run above. With 4 processes the service's in-flight cap is 32.")
    add("")


def _noisy(r: dict[str, Any], add: Any) -> None:
    step = r.get("noisy")
    parts = (step.get("alone"), step.get("with_dead")) if isinstance(step, dict) else ()
    if not _heading(add, "Noisy neighbour", step, *parts):
        return
    alone, dead = step["alone"], step["with_dead"]
    add(f"{alone['events']:,} events to a tenant with 9 healthy endpoints, then {dead['events']:,} to one with the "
        f"same 9 plus one that accepts the connection and never answers (`DELIVERY_TIMEOUT={step['delivery_timeout']:g}`); "
        f"the service's defaults otherwise ({engine_report.service_settings_note(r, step)}; offline after 5 consecutive "
        f"failures); {r['plan']['processes']} worker processes; events pre-loaded, workers started, healthy arrivals "
        "timed.")
    add("")
    add("| | healthy deliveries | worker start → last healthy arrival | healthy deliveries/s (from start) | sustained (after 10%) |")
    add("|---|---|---|---|---|")
    add(f"| 9 healthy | {alone['healthy_deliveries']:,} | {alone['seconds']:.1f} s | {_n(alone['rate_from_start'])} | {_n(alone['rate_steady'])} |")
    add(f"| 9 healthy + 1 timing out | {dead['healthy_deliveries']:,} | {dead['seconds']:.1f} s | {_n(dead['rate_from_start'])} | {_n(dead['rate_steady'])} |")
    add(f"| with / without | | | **{step['ratio_from_start']:.0%}** | {step['ratio_steady']:.0%} |")
    info = dead.get("dead_endpoint", {})
    add("")
    add(f"The endpoint that times out: {info.get('attempts')} attempts, then `{info.get('health')}`; its deliveries: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(info.get('statuses', {}).items()))}.")
    add("")


def _ladder(r: dict[str, Any], add: Any) -> None:
    step = r.get("ladder")
    if not _heading(add, "Ladder fidelity", step):
        return
    depths = ", ".join(f"{tier} {depth}" for tier, depth in step["max_tier_depths"].items())
    add(f"`RETRY_LADDER={step['ladder']}`, an endpoint that always answers 500 (`OFFLINE_AFTER_FAILURES` set out of "
        "reach, so it keeps its ladder instead of parking; `ENDPOINT_MAX_IN_FLIGHT` raised to 16 only where the "
        f"service's default is lower; settings: {_overrides(step)}). "
        f"{step['first_batch']} events first (100/s) walked down into the longest tier "
        f"({step['long_tier_depth_before_second']} messages waiting there), then {step['second_batch']} more over "
        f"{r['plan']['ladder_second_seconds']:.0f} s failed into the short tiers while it was full; every delivery "
        f"made all {len(step['tiers']) + 1} attempts. Deepest each tier got: {depths}. Lateness = arrival of attempt "
        "n+1 at the receiver − `next_attempt_at` recorded on attempt n (the DB column: `started_at` of attempt n+1 "
        "instead).")
    add("")
    add("| tier (wait before the retry) | retries | min | p50 | p99 | max | within 1 s | DB p99 | DB max |")
    add("|---|---|---|---|---|---|---|---|---|")
    for tier, t in step["tiers"].items():
        add(f"| {tier} | {t['retries']} | {_n(t['min_s'], 3)} s | {_n(t['p50_s'], 3)} s | {_n(t['p99_s'], 3)} s | "
            f"{_n(t['max_s'], 3)} s | {t['within_1s']}/{t['retries']} | {_n(t['db_p99_s'], 3)} s | {_n(t['db_max_s'], 3)} s |")
    add("")


def _backlog(r: dict[str, Any], add: Any) -> None:
    step = r.get("backlog")
    if not _heading(add, "Backlog", step):
        return
    mem = step["memory"]
    before = ", ".join(f"{k} {v}" for k, v in sorted(step.get("before_return", {}).items()))
    add(f"{step['ingest']['events']:,} events accepted (at {_n(step['ingest']['rate'])}/s, workers running) for an "
        f"endpoint whose receiver is down; the service takes it offline and parks them ({before}; "
        f"{step['parking_seconds']:.0f} s). Then the receiver comes back. `RELEASE_RATE={step['release_rate']:g}`"
        f"{' (the service default)' if step['release_rate'] == 20 else ''}; ladder {step['ladder']} so that the "
        "probe notices the return within 2 s and nothing runs out of attempts during the outage.")
    add("")
    add("| figure | value |")
    add("|---|---|")
    add(f"| first delivery after the receiver is back | {_n(step['first_arrival_after_return_s'], 1)} s |")
    status = "all delivered" if step.get("finished") else f"**not finished within {step['timeout']:.0f} s**"
    add(f"| delivered | {step['delivered']:,} of {step['ingest']['events']:,} ({status}; receiver saw "
        f"{step['received']:,} requests, {step['received_unique']:,} distinct `webhook-id`s) |")
    add(f"| drain time, receiver back → last arrival | {_n(step['drain_seconds'], 0)} s |")
    add(f"| drain rate | **{_n(step['drain_rate'], 1)} deliveries/s** (after the first 10%: "
        f"{_n(step['drain_rate_steady'], 1)}/s)"
        f"{'' if step.get('finished') else '; all of them would take about ' + _n((step['projected_seconds'] or 0) / 60, 0) + ' min'} |")
    add(f"| worker RSS, largest process, every second ({mem['samples']} samples) | start {mem['start_mib']:.0f} MiB → "
        f"peak while parking {_n(mem['peak_while_parking_mib'])} → at return {_n(mem['at_return_mib'])} → peak while "
        f"draining {_n(mem['peak_while_draining_mib'])} → end {mem['end_mib']:.0f} MiB (peak {mem['peak_mib']:.0f}) |")
    add("")


def _problems(r: dict[str, Any], add: Any) -> None:
    problems = []

    def walk(name: str, step: Any) -> None:
        if isinstance(step, dict):
            if step.get("status") in ("error", "timeout"):
                problems.append(f"- {name}: {_why(step)}")
            for key, value in step.items():
                if isinstance(value, dict):
                    walk(f"{name} / {key}", value)

    for key in STEPS:
        walk(key, r.get(key))
    add("### Not measured, and why")
    add("")
    missing = [key for key in STEPS if key not in r]
    problems += [f"- {key}: not run" for key in missing]
    add("\n".join(problems) if problems else "Everything above was measured in this run.")
