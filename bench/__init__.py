"""The benchmarks: ``bench/run.py`` runs them (see ``bench/README.md``); ``bench/chaos.py`` and
``bench/failover.py`` are the fault drills."""
