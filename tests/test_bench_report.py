"""The report of a benchmark run (``bench/report.py``), rendered from the run's ``results.json``.

``bench_results/quick.json`` is the ``results.json`` of a ``python bench/run.py --quick`` run made
before the steps moved to ``bench/steps/`` and before the steps ``slow_clients``, ``admission`` and
``flood_fanout`` existed, so it reads as a partial run that names those three; ``quick.md`` is its report. A change to what a section
says shows here: render the JSON again (``python bench/run.py --from-json …`` writes it into
RESULTS.md) and update ``quick.md`` with it on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import report

RESULTS = Path(__file__).resolve().parent / "bench_results"


def quick_run() -> dict:
    return json.loads((RESULTS / "quick.json").read_text())


def test_a_runs_figures_render_to_the_same_report() -> None:
    assert report.render(quick_run()) == (RESULTS / "quick.md").read_text()


def test_a_partial_run_says_so_and_names_each_step_it_left_out() -> None:
    run = {key: quick_run()[key] for key in ("command", "plan", "machine", "versions", "date", "wall_seconds",
                                             "receiver")}

    markdown = report.render(run)

    assert markdown.startswith(f"## {run['date']}: `{run['command']}` (partial run, generated)")
    assert [line for line in markdown.splitlines() if line.endswith(": not run")] == [
        f"- {name}: not run" for name in report.FULL_RUN if name != "receiver"]
    assert "| service ≥ 2 × dramatiq | – | not measured |" in markdown


def test_a_run_of_steps_outside_the_full_run_shows_only_their_sections() -> None:
    run = {key: quick_run()[key] for key in ("command", "plan", "machine", "versions", "date", "wall_seconds")}
    run["sender_cpu"] = {"requests": 2000, "concurrency": 50, "rounds": 1, "medians": {
        "plain aiohttp": {"cpu_ms_per_request": 0.2, "requests_per_s": 4000.0},
        "guarded Sender": {"cpu_ms_per_request": 0.25, "requests_per_s": 3500.0}}}

    markdown = report.render(run)

    assert [line for line in markdown.splitlines() if line.startswith("### ")] == [
        "### The guarded sender's CPU per request (`--only sender_cpu`)"]
    assert "- guard overhead: +0.050 ms CPU/request (+25 %)" in markdown


def test_a_step_outside_the_full_run_reads_after_the_others() -> None:
    run = {**quick_run(), "hot_path_sql": {"schema": "latest schema", "attempts": 2000, "batch": 128,
                                           "backend_cpu_ms_per_attempt": 0.1234, "attempts_per_s": 5000.0}}

    markdown = report.render(run)

    assert markdown.index("### Tenant flood") < markdown.index("### PostgreSQL's CPU per attempt on the hot path") \
        < markdown.index("### Not measured, and why")
    assert ("latest schema: 2000 attempts in batches of 128: PostgreSQL backend 0.123 ms CPU per attempt; "
            "5,000 attempts/s in one thread") in markdown
    assert "hot_path_sql" not in markdown.split("### Not measured, and why")[1]


def test_a_step_that_failed_says_why_instead_of_its_figures() -> None:
    run = {**quick_run(), "ladder": {"status": "timeout", "error": "ladder fidelity: not done within 500 s"}}

    markdown = report.render(run)

    assert "### Ladder fidelity\n\nNot measured (timeout: ladder fidelity: not done within 500 s)." in markdown
    assert "- ladder: timeout: ladder fidelity: not done within 500 s" in markdown


def test_only_the_generated_section_of_the_results_is_rewritten(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text(f"# Results\n\nwritten by hand\n\n{report.START}\nold\n{report.END}\n\n## notes by hand\n")

    report.write_results("## new run\n", results)

    assert results.read_text() == (f"# Results\n\nwritten by hand\n\n{report.START}\n## new run\n{report.END}\n\n"
                                   "## notes by hand\n")


def test_an_ingestion_of_batches_alone_shows_their_row_only() -> None:
    run = quick_run()
    run["ingest"] = {"batch": run["ingest"]["batch"], "status": "ok"}

    section = report.render(run).split("### Ingestion")[1].split("\n### ")[0]

    assert "| `POST /v1/events/batch`, 100 events each | **" in section
    assert "| `POST /v1/events` |" not in section
