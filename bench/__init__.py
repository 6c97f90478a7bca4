"""The benchmarks and the fault drills: ``bench/run.py`` runs them all (see ``bench/README.md``)."""
