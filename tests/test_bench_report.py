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
    run["tracing"] = {"rounds": [
        {"status": "ok", "mode": "off", "events": 2000, "ingest_rate": 1000.0, "delivery_rate": 500.0},
        {"status": "ok", "mode": "on", "events": 2000, "ingest_rate": 900.0, "delivery_rate": 450.0}]}

    markdown = report.render(run)

    assert [line for line in markdown.splitlines() if line.startswith("### ")] == [
        "### Tracing: off against every trace sampled"]
    assert "delivery: off 500/s, on 450/s: -10.0 % with every trace sampled" in markdown


def test_a_step_outside_the_full_run_reads_after_the_others() -> None:
    run = {**quick_run(), "portal": {"seeded": {"events": 2000, "attempts": 20000, "days": 10.0, "database": "9 MB"},
                                     "requests_per_page": 40, "target_met": True,
                                     "pages": {"event log": {"p50_ms": 3.1, "p95_ms": 4.2, "max_ms": 5.0}}}}

    markdown = report.render(run)

    assert markdown.index("### Tenant flood") < markdown.index("### Portal pages with a long history") \
        < markdown.index("### Not measured, and why")
    assert "| event log | 3.1 ms | 4.2 ms | 5.0 ms |" in markdown
    assert "portal" not in markdown.split("### Not measured, and why")[1]


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
