"""health (docstring to be written)."""
