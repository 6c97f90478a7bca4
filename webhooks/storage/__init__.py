"""storage (docstring to be written)."""
