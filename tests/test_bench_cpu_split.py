"""Where the machine's CPU goes during a benchmark step (bench/kit/cpu_split.py): roles and per-delivery figures."""

from __future__ import annotations

import pytest

from bench.kit.cpu_split import describe, role_of, split, steady_split


@pytest.mark.parametrize(("name", "cmdline", "role"), [
    ("postgres", ["postgres: 15/main: postgres bench_x 127.0.0.1(5000) idle"], "postgresql"),
    ("postgres", ["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main"], "postgresql"),
    ("beam.smp", ["/usr/lib/erlang/erts-13/bin/beam.smp", "--", "-root", "/usr/lib/erlang"], "rabbitmq"),
    ("python", ["/w/bench/.venv/bin/python", "-m", "webhooks.worker"], "worker"),
    ("python", ["/w/bench/.venv/bin/python", "-m", "bench.peers.async_floor", "--queue", "q"], "worker"),
    ("dramatiq", ["/w/bench/.venv/bin/python", "/w/bench/.venv/bin/dramatiq", "bench.peers.dramatiq_app"], "worker"),
    ("python", ["/w/bench/.venv/bin/python", "-m", "webhooks.clock"], "clock"),
    ("python", ["/w/bench/.venv/bin/python", "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf"], "web"),
    ("python", ["/w/bench/.venv/bin/python", "-m", "bench.kit.receiver", "41000", "--quiet"], "receiver"),
    ("python", ["/w/bench/.venv/bin/python", "-m", "bench.kit.loadgen", "paced"], "bench"),
    ("sshd", ["sshd: /usr/sbin/sshd -D"], "other"),
])
def test_every_process_on_the_machine_has_a_role(name: str, cmdline: list[str], role: str) -> None:
    assert role_of(name, cmdline) == role


def test_cpu_per_delivery_counts_the_part_of_each_sample_inside_the_window() -> None:
    samples = [(10.0, {}), (11.0, {"worker": 0.5, "postgresql": 0.2}), (12.0, {"worker": 0.5, "postgresql": 0.4})]

    cpu = split(samples, start=10.5, end=12.0, deliveries=1_000, cores=2)

    assert cpu["ms_per_delivery"]["worker"] == pytest.approx(0.75)  # half of the first second, all of the second
    assert cpu["ms_per_delivery"]["postgresql"] == pytest.approx(0.5)
    assert cpu["total_ms"] == pytest.approx(1.25)
    assert cpu["busy_cores"] == pytest.approx(1.25 / 1.5)
    assert "worker 0.750, postgresql 0.500; 1.250 in all; 0.83 of 2 cores busy" in describe(cpu)


def test_the_window_is_the_one_the_steady_rate_measures_after_the_warmup() -> None:
    samples = [(float(t), {"worker": 1.0}) for t in range(0, 21)]
    arrivals = [i * 0.01 for i in range(2_001)]  # 2,001 arrivals over 20 s

    cpu = steady_split(samples, arrivals, cores=2)

    assert cpu["seconds"] == pytest.approx(18.0, abs=0.01) and cpu["deliveries"] == 1_800
    assert cpu["ms_per_delivery"]["worker"] == pytest.approx(1000.0 * 18.0 / 1_800, rel=0.01)
    assert steady_split(samples, [1.0], cores=2) == {}, "too few arrivals to measure"
