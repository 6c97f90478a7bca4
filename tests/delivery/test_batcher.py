"""The group-commit batcher: one batch at a time, everything queued goes next, and with a
``share`` key a tenant with one item is not queued behind another tenant's thousand."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from webhooks.delivery.batcher import Batcher


class Recorder:
    """A batch function that records each batch and holds the first one until released."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, int]]] = []
        self.release = threading.Event()

    def __call__(self, items: Sequence[tuple[str, int]]) -> list[str]:
        if not self.batches:
            self.release.wait(10)
        self.batches.append(list(items))
        return [f"{tenant}-{n}" for tenant, n in items]


async def _run(share: bool, queued: list[tuple[str, int]], max_batch: int = 4) -> tuple[Recorder, list[str]]:
    recorder = Recorder()
    with ThreadPoolExecutor(1) as executor:
        batcher = Batcher(recorder, executor, max_batch=max_batch, share=(lambda item: item[0]) if share else None)
        first = asyncio.ensure_future(batcher(("first", 0)))
        await asyncio.sleep(0)  # the first batch is running (held) while the rest queue behind it
        rest = [asyncio.ensure_future(batcher(item)) for item in queued]
        await asyncio.sleep(0)
        recorder.release.set()
        results = await asyncio.gather(first, *rest)
    return recorder, results


def test_a_lone_tenant_item_goes_in_the_next_batch_and_first_in_it() -> None:
    flood = [("a", n) for n in range(10)]
    recorder, results = asyncio.run(_run(True, [*flood, ("b", 0)]))
    assert recorder.batches[1] == [("a", 0), ("b", 0), ("a", 1), ("a", 2)]
    # What stayed queued keeps its order, and every caller gets its own result.
    assert recorder.batches[2] == [("a", 3), ("a", 4), ("a", 5), ("a", 6)]
    assert results == ["first-0", *[f"a-{n}" for n in range(10)], "b-0"]


def test_turns_are_taken_in_the_order_tenants_first_queued() -> None:
    queued = [("a", 0), ("a", 1), ("b", 0), ("c", 0), ("b", 1), ("a", 2)]
    recorder, _ = asyncio.run(_run(True, queued, max_batch=5))
    assert recorder.batches[1] == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1)]
    assert recorder.batches[2] == [("a", 2)]


def test_without_a_share_key_batches_are_first_come_first_served() -> None:
    flood = [("a", n) for n in range(10)]
    recorder, _ = asyncio.run(_run(False, [*flood, ("b", 0)]))
    assert recorder.batches[1] == flood[:4]
    assert recorder.batches[-1] == [flood[8], flood[9], ("b", 0)]


class HoldsTenantA(Recorder):
    """Holds every batch with an item of tenant "a" until released; others go through."""

    def __call__(self, items: Sequence[tuple[str, int]]) -> list[str]:
        if any(tenant == "a" for tenant, _ in items):
            self.release.wait(10)
        self.batches.append(list(items))
        return [f"{tenant}-{n}" for tenant, n in items]


async def _run_express(queued: list[tuple[str, int]]) -> tuple[Recorder, dict[tuple[str, int], str], list[tuple[str, int]]]:
    """Tenant "a"'s first batch is held; the items queue meanwhile. Returns the batches, each item's result
    and the items that finished while the first batch was still held."""
    recorder = HoldsTenantA()
    with ThreadPoolExecutor(2) as executor:
        batcher = Batcher(recorder, executor, max_batch=4, share=lambda item: item[0], express=True)
        first = asyncio.ensure_future(batcher(("a", 0)))
        await asyncio.sleep(0)
        rest = {item: asyncio.ensure_future(batcher(item)) for item in queued}
        done, _ = await asyncio.wait(rest.values(), timeout=0.5)
        early = [item for item, future in rest.items() if future in done]
        recorder.release.set()
        await first
        results = {item: await future for item, future in rest.items()}
    return recorder, results, early


def test_with_express_a_lone_tenant_item_does_not_wait_for_the_batch_running() -> None:
    recorder, results, early = asyncio.run(_run_express([("a", 1), ("a", 2), ("b", 0), ("c", 0)]))
    # b's item went at once in a batch of its own beside a's held batch; c came while that one ran
    # (one express batch at a time) and a already had a batch running: both wait for the next batch.
    assert early == [("b", 0)]
    assert [("b", 0)] in recorder.batches
    assert recorder.batches[-1] == [("a", 1), ("c", 0), ("a", 2)]
    assert results == {("a", 1): "a-1", ("a", 2): "a-2", ("b", 0): "b-0", ("c", 0): "c-0"}


def test_express_needs_a_share_key() -> None:
    import pytest

    with pytest.raises(ValueError, match="share key"):
        Batcher(Recorder(), ThreadPoolExecutor(1), express=True)
