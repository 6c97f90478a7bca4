"""What the sections of ``bench/RESULTS.md`` share: number formatting, verdicts, a step's status,
and the service settings a step ran with."""

from __future__ import annotations

import math
from typing import Any, Callable

#: Writes one line of Markdown.
Add = Callable[[str], None]

#: A section of the report: ``(the run's results, add)``.
Section = Callable[[dict[str, Any], Add], None]


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


def section_of(key: str, title: str,
               *parts: str) -> Callable[[Callable[[dict[str, Any], dict[str, Any], Add], None]], Section]:
    """A section on step ``key``: its heading, then why the step (or one of its ``parts``) was not measured or
    ``write(its figures, the run's results, add)``."""
    def section(write: Callable[[dict[str, Any], dict[str, Any], Add], None]) -> Section:
        def written(r: dict[str, Any], add: Add) -> None:
            step = r.get(key)
            if heading(add, title, step, *(step.get(part) for part in parts if isinstance(step, dict))):
                write(step, r, add)
        return written
    return section


def n(x: Any, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:,.{digits}f}"


def mib(memory: dict[str, Any] | None, key: str = "peak_mib") -> str:
    value = (memory or {}).get(key)
    return "–" if value is None else f"{value:.0f} MiB"


def verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("**met**" if met else "**not met**")


def service_rate(r: dict[str, Any]) -> float | None:
    step = r.get("service", {}).get("throughput")
    return step["rate"] if ok(r.get("service")) and ok(step) else None


def overrides(step: dict[str, Any]) -> str:
    """The service's settings a step changed from their defaults, as Markdown (``defaults`` if none)."""
    changed = step.get("service_overrides") or {}
    return ", ".join(f"`{k}={v}`" for k, v in sorted(changed.items())) if changed else "defaults"


def service_settings_note(r: dict[str, Any], step: dict[str, Any] | None = None) -> str:
    """The defaults of the knobs that bound concurrency in the checkout measured, as Markdown
    (those ``step`` changed left out: its text names them)."""
    changed = (step or {}).get("service_overrides") or {}
    defaults = {k: v for k, v in (r.get("service_defaults") or {}).items() if k not in changed}
    return ", ".join(f"`{k}={v:g}`" if isinstance(v, float) else f"`{k}={v}`" for k, v in defaults.items()) or "–"
