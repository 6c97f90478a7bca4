"""What a step of ``bench/run.py`` is, what it is given, and how it runs: under a time limit, with an
error or a timeout recorded in its results instead of ending the run."""

from __future__ import annotations

import argparse
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from bench.kit.markdown import Section
from bench.kit.plan import Plan
from bench.kit.procs import Deadline, ScenarioTimeout, log
from bench.kit.receiver_process import Receiver

#: A step's figures, as ``results.json`` keeps them under the step's name.
Results = dict[str, Any]


@dataclass(frozen=True)
class Context:
    """What every step is given: the run's receiver, its plan and every option of the command line."""

    receiver: Receiver
    plan: Plan
    args: argparse.Namespace

    @property
    def budget(self) -> float:
        """Scales the time limits: 1 for ``--quick``, 4 for a full run."""
        return 1.0 if self.plan.quick else 4.0


@dataclass(frozen=True)
class Step:
    """One step: its name (its key in ``results.json`` and its ``--only`` name) and what it measures."""

    name: str
    title: str
    run: Callable[[Context, Deadline], Results]
    #: Its time limit in seconds, from the run's plan.
    seconds: Callable[[Context], float]
    sections: tuple[Section, ...] = ()
    #: Part of a plain ``python bench/run.py`` (and of its report); otherwise it runs only when ``--only`` names it.
    full_run: bool = True
    #: Options of its own on ``bench/run.py``'s command line.
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


def guarded(name: str, step: Callable[[Deadline], Results], seconds: float) -> Results:
    """Run one step under a time limit; an error or timeout is recorded, the run goes on."""
    log(f"== {name} (time limit {seconds:.0f} s)")
    started = time.monotonic()
    try:
        result = step(Deadline(seconds, name))
        result.setdefault("status", "ok")
    except ScenarioTimeout as error:
        log(f"   {name}: timed out: {error}")
        result = {"status": "timeout", "error": str(error)}
    except Exception as error:  # noqa: BLE001 - one broken step must not lose the others
        log(f"   {name}: failed: {error!r}")
        result = {"status": "error", "error": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()[-3000:]}
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    return result
