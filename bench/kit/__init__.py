"""The benchmark's shared pieces (``bench/README.md``); they never import the steps, the report or an entry point."""
