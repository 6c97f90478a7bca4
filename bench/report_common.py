"""What the sections of ``bench/RESULTS.md`` share: number formatting, verdicts, a step's
status, the headline figures, and the target rows that more than one targets table shows."""

from __future__ import annotations

import math
from typing import Any, Callable

#: Writes one line of Markdown.
Add = Callable[[str], None]


def ok(step: Any) -> bool:
    return isinstance(step, dict) and step.get("status", "ok") == "ok"


def why(step: Any) -> str:
    if not isinstance(step, dict):
        return "not run"
    return f"{step.get('status')}: {str(step.get('error', '')).splitlines()[0][:160]}"


def heading(add: Add, title: str, *steps: Any) -> bool:
    """Write a section's heading; False (after saying why) when any of its ``steps`` was not measured."""
    add(f"### {title}")
    add("")
    for step in steps:
        if not ok(step):
            add(f"Not measured ({why(step)}).")
            add("")
            return False
    return True


def n(x: Any, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:,.{digits}f}"


def mib(memory: dict[str, Any] | None, key: str = "peak_mib") -> str:
    if not memory or key not in memory or memory[key] is None:
        return "–"
    return f"{memory[key]:.0f} MiB"


def verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("**met**" if met else "**not met**")


def floor_rate(r: dict[str, Any], kind: str = "floor") -> float | None:
    floor = r.get("peers", {}).get(kind)
    return floor["rate"] if ok(floor) else None


def service_rate(r: dict[str, Any]) -> float | None:
    step = r.get("service", {}).get("throughput")
    return step["rate"] if ok(r.get("service")) and ok(step) else None


def overrides(step: dict[str, Any]) -> str:
    """The service's settings a step changed from their defaults, as Markdown (``defaults`` if none)."""
    changed = step.get("service_overrides") or {}
    return ", ".join(f"`{k}={v}`" for k, v in sorted(changed.items())) if changed else "defaults"


# -- rows of both targets tables ------------------------------------------------------------------


def peer_ratio_row(r: dict[str, Any], name: str, factor: float) -> str:
    """``| service ≥ factor × name | ratio | verdict |``"""
    service, peer = service_rate(r), r.get("peers", {}).get(name)
    target = f"service ≥ {factor:g} × {name}"
    if service and ok(peer):
        return (f"| {target} | {service / peer['rate']:.2f} × ({n(service)} vs {n(peer['rate'])} deliveries/s"
                f"{_cpu_ratio(r, peer)}) | {verdict(service >= factor * peer['rate'])} |")
    return f"| {target} | – | not measured |"


def _cpu_ratio(r: dict[str, Any], peer: dict[str, Any]) -> str:
    """``; CPU per delivery 0.585 vs 1.156 ms``: the machine's CPU, every process, per delivery of each
    (``bench/cpu_split.py``), when both steps measured it."""
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
