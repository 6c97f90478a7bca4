"""The modes of ``bench/run.py`` beside the benchmark: the fault drills ``chaos`` and ``failover`` (each a
pass or a fail, in its exit status) and ``page_memory`` (one page of large attempts)."""
