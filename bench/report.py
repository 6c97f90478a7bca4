"""The generated section of ``bench/RESULTS.md`` between the ``bench:run`` markers (``bench/README.md``); the rest
of the file (notes by hand) stays as it is. A step that failed or timed out says so instead of a number."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from bench.kit.markdown import Add, Section, n, ok, service_rate, service_settings_note, verdict, why
from bench.kit.procs import BENCH
from bench.steps import STEPS, backlog, flood, ingest, ladder, noisy, peers, receiver, service, slow
from bench.steps.backlog import memory_stayed_flat

RESULTS = BENCH / "RESULTS.md"

#: Every step of a full run, in the order it runs them (the keys of its results).
FULL_RUN = tuple(step.name for step in STEPS if step.full_run)
START = "<!-- bench:run:start -->"
END = "<!-- bench:run:end -->"

#: Target of issue 10 for the latency at 200 events/s (step ``service``).
LATENCY_P99_MS = 50.0

#: The sections of a full run's steps, in the order the report has always shown them.
SECTIONS: tuple[Section, ...] = (
    receiver.section, peers.throughput_section, service.service_section, ingest.section, service.scale_section,
    noisy.section, ladder.section, backlog.section, slow.table_section, slow.climb_section, slow.inflight_section,
    flood.section,
)


def sections(r: dict[str, Any]) -> list[Section]:
    """``SECTIONS`` if the run ran a step of a full run, then the other steps' sections, in the order of ``STEPS``."""
    others = [section for step in STEPS if step.name in r for section in step.sections if section not in SECTIONS]
    return [*(SECTIONS if any(name in r for name in FULL_RUN) else ()), *dict.fromkeys(others)]


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


def publish_plots(source: Path, target: Path = BENCH) -> None:
    """Copy the run's plots (``*.png`` in ``source``) next to RESULTS.md, which links them."""
    for plot in source.glob("*.png"):
        shutil.copy2(plot, target / plot.name)


def render(r: dict[str, Any]) -> str:
    """The generated section of ``bench/RESULTS.md`` for one run's results."""
    plan = r["plan"]
    out: list[str] = []
    add = out.append
    ran = [name for name in FULL_RUN if name in r]
    kind = "partial run" if len(ran) < len(FULL_RUN) else "quick run" if plan["quick"] else "full run"
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
    if r.get("commit"):
        add(f"- **Commit**: {r['commit']} (a `+`: with changes not committed)")
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
    add(f"- **Same for every contender**: one receiver process (`bench/kit/receiver.py`, asyncio, keep-alive, answers "
        f"200); the same ~1 KB JSON body; {plan['events']:,} messages pre-loaded before the workers start; "
        f"**{plan['processes']} worker processes (one per core)**: floor 2 × `python -m bench.peers.floor "
        "--threads 8`; async floor 2 × `python -m bench.peers.async_floor --prefetch 256`; dramatiq `--processes 2 "
        "--threads 8`; Celery 2 × `worker --pool threads --concurrency 8`; the service 2 × `python -m "
        "webhooks.worker` with its **default settings** (plus one `python -m webhooks.clock`; web: the Procfile's `gunicorn -c python:webhooks.gunicorn_conf`, 2 processes × 8 threads). "
        "Prefetch is each one's default (floor 8 per process, dramatiq 16, Celery 32). Rates are arrivals at the "
        "receiver per second after discarding the first 10%.")
    add("")
    if ran:  # steps only --only runs have no targets, and leave the full run's steps unsaid
        _engine_targets(r, add)
        _earlier_targets(r, add)
    for section in sections(r):
        section(r, add)
    if ran:
        _problems(r, add)
    return "\n".join(out) + "\n"


def _engine_targets(r: dict[str, Any], add: Add) -> None:
    add("### Targets of issue 10 (delivery engine)")
    add("")
    add(f"The service's settings are its defaults ({service_settings_note(r)}) in every step except where the "
        "sections below name an exception.")
    add("")
    add("| target | measured | verdict |")
    add("|---|---|---|")
    add(peer_ratio_row(r, "dramatiq", 2))
    add(peer_ratio_row(r, "celery", 2))
    add(peer_ratio_row(r, "async-floor", None))
    add(_rate_row(r.get("fanout"), "50 endpoints answering after 200 ms, one worker process: "
                  f"≥ {slow.FANOUT_TARGET:,.0f}/s", slow.FANOUT_TARGET))
    add(_rate_row(r.get("slow"), f"one endpoint answering after 200 ms: ≥ {slow.SLOW_TARGET:,.0f}/s", slow.SLOW_TARGET))
    add(_climb_row(r.get("climb")))
    add(_flood_row(r.get("flood")))
    add(_inflight_row(r.get("inflight")))
    add(latency_row(r, LATENCY_P99_MS))
    add(ladder_row(r))
    add("| chaos run loses nothing, duplicates < 0.5 % | not part of `bench/run.py` (`bench/run.py chaos`, a fault drill "
        "of its own) | not measured |")
    add("")


def _row(target: str, step: Any, figures: Callable[[dict[str, Any]], tuple[str, str]]) -> str:
    """``| target | measured | verdict |`` from ``figures(step)``, or why the step was not measured."""
    if not ok(step):
        return f"| {target} | {why(step)} | not measured |"
    measured, met = figures(step)
    return f"| {target} | {measured} | {met} |"


def _rate_row(step: Any, target: str, minimum: float) -> str:
    def figures(step: dict[str, Any]) -> tuple[str, str]:
        cut = "" if step["finished"] else \
            f"; stopped after {step['seconds']:.0f} s with {step['arrivals']:,} of {step['expected']:,} delivered"
        return (f"{n(step['rate'], 1)}/s ({n(step['mean_in_flight'], 1)} in flight on average{cut})",
                verdict(step["rate"] >= minimum))

    return _row(target, step, figures)


def _climb_row(step: Any) -> str:
    def figures(step: dict[str, Any]) -> tuple[str, str]:
        window = (f"window reported, max {step['window_max']}, last {step['window_last']}" if step["window_reported"]
                  else "no window reported by `GET /v1/endpoints/<id>`")
        met = step["window_reported"] and step["share_over_threshold"] < slow.CLIMB_OVER_SHARE
        return (f"{step['share_over_threshold']:.1%} of calls above {step['threshold']}; {n(step['rate'], 1)}/s; "
                f"{window}; [plot]({step['plot']})", verdict(met))

    return _row("endpoint slowing from 20 ms to 2 s above 50 in flight is backed off "
                f"(< {slow.CLIMB_OVER_SHARE:.0%} of calls above 50, window reported)", step, figures)


def _flood_row(step: Any) -> str:
    def figures(step: dict[str, Any]) -> tuple[str, str]:
        during = step["b_during"]
        met = (during["delivered"] > 0 and during["missing"] == 0 and during["p99_ms"] < flood.FLOOD_P99_MS
               and step["a_drained"])
        drained = f"A drained {step['a_accepted']:,} events in {n(step['a_drain_seconds'], 1)} s" \
            if step["a_drained"] else \
            f"A **not drained** ({step['a_arrivals']:,} of {step['a_accepted']:,} in {n(step['a_drain_seconds'], 0)} s)"
        missing = f", {during['missing']} not delivered" if during["missing"] else ""
        return (f"p99 {n(during['p99_ms'], 0)} ms, p50 {n(during['p50_ms'], 0)} ms ({during['sent']} events{missing}); "
                f"{drained}", verdict(met))

    return _row(f"tenant flood: B's p99 POST→arrival < {flood.FLOOD_P99_MS:g} ms while A drains", step, figures)


def _inflight_row(step: Any) -> str:
    def figures(step: dict[str, Any]) -> tuple[str, str]:
        peak_mb = step["peak_mib"] * 2**20 / 1e6
        reached = step["peak_in_flight"] >= slow.INFLIGHT_REACHED * step["target"]
        flat = {True: "flat", False: "**not flat**", None: "flatness not judged (no plateau)"}[step["flat"]]
        met = reached and peak_mb < slow.RSS_TARGET_MB and step["flat"] is True
        return (f"{step['peak_in_flight']:,} in flight at the receiver at the peak (target {step['target']:,}); RSS "
                f"peak {peak_mb:.0f} MB, {flat}; [plot]({step['plot']})",
                f"{verdict(met)}{'' if reached else ' (the in-flight premise was not reached)'}")

    return _row(f"10,000 in flight to endpoints taking 5 s: worker RSS < {slow.RSS_TARGET_MB:g} MB and flat", step,
                figures)


def _earlier_targets(r: dict[str, Any], add: Add) -> None:
    add("### Earlier targets")
    add("")
    add("| target | measured | verdict |")
    add("|---|---|---|")
    add(peer_ratio_row(r, "floor", 0.75))
    throughput = r.get("service", {}).get("throughput")
    if ok(throughput):
        ingest = throughput["ingest"]["rate"]
        add(f"| ingestion ≥ 1,500 events/s | {n(ingest)} events/s | {verdict(ingest >= 1500)} |")
    else:
        add("| ingestion ≥ 1,500 events/s | – | not measured |")
    backlog = r.get("backlog")
    if ok(backlog) and backlog.get("memory"):
        mem, drained, met = backlog["memory"], backlog.get("finished"), memory_stayed_flat(backlog["memory"])
        met_text = verdict(met) if drained else f"{verdict(None)} (drain unfinished; flat so far: {'yes' if met else 'no'})"
        add(f"| worker memory flat across the {backlog['backlog']:,} backlog | RSS {mem['start_mib']:.0f} → peak "
            f"{mem['peak_mib']:.0f} → end {mem['end_mib']:.0f} MiB "
            f"({'drained' if drained else 'drain not finished, see below'}) | {met_text} |")
    else:
        add("| worker memory flat across the backlog | – | not measured |")
    add("")
    add("Flat memory: the largest worker process's peak RSS stays within 10% (and 16 MiB) of its RSS once started "
        "and idle, sampled every second while the backlog is accepted, parked and drained.")
    add("")


def peer_ratio_row(r: dict[str, Any], name: str, factor: float | None) -> str:
    """``| service ≥ factor × name | ratio | verdict |``; without a factor the ratio alone (no target)."""
    service, peer = service_rate(r), r.get("peers", {}).get(name)
    target = f"service ≥ {factor:g} × {name}" if factor else f"service ÷ {name.replace('-', ' ')} (reported, no target)"
    if not (service and ok(peer)):
        return f"| {target} | – | not measured |"
    met = verdict(service >= factor * peer["rate"]) if factor else "–"
    return (f"| {target} | {service / peer['rate']:.2f} × ({n(service)} vs {n(peer['rate'])} deliveries/s"
            f"{_cpu_ratio(r, peer) if factor else ''}) | {met} |")


def _cpu_ratio(r: dict[str, Any], peer: dict[str, Any]) -> str:
    """``; CPU per delivery 0.585 vs 1.156 ms``: the machine's CPU, every process, per delivery of each
    (``bench/kit/cpu_split.py``), when both steps measured it."""
    ours, theirs = r.get("service", {}).get("throughput", {}).get("cpu"), peer.get("cpu")
    if not (ours and theirs):
        return ""
    return f"; CPU per delivery, every process: {ours['total_ms']:.3f} vs {theirs['total_ms']:.3f} ms"


def latency_row(r: dict[str, Any], limit_ms: float) -> str:
    """``| p99 POST→delivered < limit at 200 events/s | p99, p50 | verdict |``"""
    latency = r.get("service", {}).get("latency")
    if not (ok(r.get("service")) and ok(latency) and latency.get("delivered")):
        return f"| p99 POST→delivered < {limit_ms:g} ms at 200 events/s | – | not measured |"
    # A refused POST (429) is an event that did not arrive from that POST: the latency leaves it
    # out, so more than 1 % refused is a p99 past any limit.
    refused = latency["sent"] - latency["accepted"]
    met = latency["p99_ms"] < limit_ms and latency["missing"] == 0 and refused <= latency["sent"] / 100
    missing = f", {latency['missing']} not delivered" if latency["missing"] else ""
    refusals = f"; {refused:,} of {latency['sent']:,} POSTs refused, left out" if refused else ""
    return (f"| p99 POST→delivered < {limit_ms:g} ms at {latency['rate']:.0f} events/s | p99 "
            f"{n(latency['p99_ms'], 1)} ms (p50 {n(latency['p50_ms'], 1)} ms{missing}{refusals}) | {verdict(met)} |")


def ladder_row(r: dict[str, Any]) -> str:
    """``| every ladder retry within 1 s of schedule | how many, latest, earliest | verdict |``"""
    ladder = r.get("ladder")
    if not ok(ladder):
        return "| every ladder retry within 1 s of schedule | – | not measured |"
    tiers = ladder["tiers"].values()
    worst = max(abs(t["max_s"]) for t in tiers)
    early = min(t["min_s"] for t in tiers)
    total = sum(t["retries"] for t in tiers)
    within = sum(t["within_1s"] for t in tiers)
    return (f"| every ladder retry within 1 s of schedule | {within}/{total} within 1 s; latest {n(worst, 3)} s "
            f"late, earliest {n(early, 3)} s | {verdict(total > 0 and within == total)} |")


def _problems(r: dict[str, Any], add: Add) -> None:
    problems = []

    def walk(name: str, step: Any) -> None:
        if isinstance(step, dict):
            if step.get("status") in ("error", "timeout"):
                problems.append(f"- {name}: {why(step)}")
            for key, value in step.items():
                if isinstance(value, dict):
                    walk(f"{name} / {key}", value)

    for key in FULL_RUN:
        walk(key, r.get(key))
    add("### Not measured, and why")
    add("")
    missing = [key for key in FULL_RUN if key not in r]
    problems += [f"- {key}: not run" for key in missing]
    add("\n".join(problems) if problems else "Everything above was measured in this run.")
