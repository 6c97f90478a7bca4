"""messaging (docstring to be written)."""
