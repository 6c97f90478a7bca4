"""The worker process tunes Python's cyclic garbage collector for thousands of long calls in flight."""

from __future__ import annotations

import subprocess
import sys

from webhooks.worker import GC_THRESHOLDS


def test_the_worker_collects_rarely_and_never_rescans_what_it_imported() -> None:
    # In a process of its own: thresholds and the frozen generation are process-wide.
    code = ("import gc; from webhooks.worker import tune_garbage_collector; tune_garbage_collector(); "
            "print(gc.get_threshold(), gc.get_freeze_count() > 10_000)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert out.strip() == f"{GC_THRESHOLDS} True"
    young, _, full = GC_THRESHOLDS
    assert young >= 10_000 and full >= 100, "a full collection at most every 100 middle ones"
