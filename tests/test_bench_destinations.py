"""Step ``destinations`` leaves no vhost, user or Redis stream behind when its run is interrupted (Ctrl-C).

The run's signal handler (``bench.kit.procs.install_exit_handlers``) ends the process without running
``finally`` blocks, so ``own_vhost``'s own removal never runs there: the step registers the removal of
what its rounds make with the run's cleanup (``CLEANUP``). Checked in a process of its own without a
broker: ``rabbitmqctl`` and Redis are stand-ins that print what they are asked to do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

INTERRUPTED_RUN = """
import os, signal, time
from bench.kit.procs import Deadline, install_exit_handlers
from bench.steps import destinations
from tests.delivery import destination_helpers

def rabbitmqctl(*args, check=True):
    print("rabbitmqctl", *args, flush=True)
    return f"{destinations.PREFIX}-0123456789ab\\nbench-destinations-1-0123456789ab\\n" if args[0] == "list_vhosts" else ""

class Redis:
    @classmethod
    def from_url(cls, url):
        return cls()

    def delete(self, stream):
        print("redis delete", stream, flush=True)

def round_interrupted(context, index, kind, deadline):
    print("stream", destinations.StreamSink().stream, flush=True)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, in the middle of the round
    time.sleep(30)

destination_helpers.rabbitmqctl, destinations.redis.Redis, destinations._round = rabbitmqctl, Redis, round_interrupted
install_exit_handlers()
print("prefix", destinations.PREFIX, flush=True)
destinations.destinations(None, Deadline(60, "destinations"))
"""


def test_an_interrupted_run_removes_the_vhosts_users_and_streams_of_its_rounds() -> None:
    run = subprocess.run([sys.executable, "-c", INTERRUPTED_RUN], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})

    said = [line for line in run.stdout.splitlines() if not line.startswith("[")]  # the run's own log lines out
    prefix, stream = said[0].removeprefix("prefix "), said[1].removeprefix("stream ")
    assert run.returncode == 130, run.stderr
    assert prefix.startswith("bench-destinations-") and stream.startswith(f"{prefix}-")
    assert sorted(said[2:]) == sorted([
        f"redis delete {stream}", "rabbitmqctl list_vhosts name",
        f"rabbitmqctl delete_user {prefix}-0123456789ab", f"rabbitmqctl delete_vhost {prefix}-0123456789ab"])
