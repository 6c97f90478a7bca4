"""Values generated once and kept in a file under ``instance/`` (``SECRET_KEY``, ``SECRETS_KEY``
when unset), so every process started from the same directory, and every restart, reads the same."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


def generated_once(path: Path, generate: Callable[[], str]) -> str:
    """The content of ``path`` (stripped), written first from ``generate()`` if there is none yet,
    readable by its owner only."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside, then linked into place: link fails if another process won the race,
        # and nobody ever reads a half-written file.
        temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(generate())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    return path.read_text().strip()
