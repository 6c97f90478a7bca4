"""The benchmark's shared pieces (``bench/README.md``): they never import ``bench.steps``, the report or an entry point."""
