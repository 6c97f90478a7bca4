"""The modes of ``bench/run.py`` beside the benchmark: ``chaos``, ``failover`` and ``page-memory``."""
