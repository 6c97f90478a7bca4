"""ingest (docstring to be written)."""
