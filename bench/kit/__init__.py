"""The benchmark's shared pieces: processes, the machine's services, the receiver and load programs, the
service's stack, statistics and Markdown. May import only the standard library, third-party packages,
``webhooks`` and each other (never ``bench.steps``, ``bench.report`` or an entry point)."""
