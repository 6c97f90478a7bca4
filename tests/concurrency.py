"""Running a piece of work in many threads at once, for tests of concurrent callers."""

from __future__ import annotations

import threading
from typing import Any, Callable


def in_threads(count: int, work: Callable[[int], Any], *, cleanup: Callable[[], None] | None = None,
               timeout: float = 60.0) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads started together; each result, or the exception raised.

    ``cleanup`` runs in each thread after its work (e.g. to give back a pooled database connection).
    """
    results: list[Any] = [None] * count
    start = threading.Barrier(count)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = work(i)
        except Exception as error:  # noqa: BLE001 - returned to the test
            results[i] = error
        finally:
            if cleanup is not None:
                cleanup()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return results
