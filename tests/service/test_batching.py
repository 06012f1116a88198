"""The batcher: one thread, batches of whatever queued, answers in order, loop never blocked."""

from __future__ import annotations

import asyncio
import threading

import pytest

from parcelsearch_service.batching import Batcher


class Gate:
    """handle_batch that records batch sizes and can be held shut."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.open = threading.Event()
        self.open.set()
        self.threads: set[str] = set()

    def __call__(self, items: list[int]) -> list[int]:
        self.threads.add(threading.current_thread().name)
        self.open.wait(5)
        self.sizes.append(len(items))
        return [item * 10 for item in items]


def test_each_caller_gets_its_own_answer_and_waiting_calls_share_a_batch() -> None:
    gate = Gate()
    batcher = Batcher(gate, name="test-gate")

    async def main() -> list[int]:
        gate.open.clear()
        first = asyncio.ensure_future(batcher.run(0))
        await asyncio.sleep(0.05)  # the thread now holds the first batch, shut
        rest = [asyncio.ensure_future(batcher.run(i)) for i in range(1, 40)]
        await asyncio.sleep(0.05)
        gate.open.set()
        return await asyncio.gather(first, *rest)

    assert asyncio.run(main()) == [i * 10 for i in range(40)]
    assert gate.sizes == [1, 39]
    assert gate.threads == {"test-gate"}
    batcher.close()


def test_the_loop_runs_while_a_batch_works() -> None:
    gate = Gate()
    batcher = Batcher(gate)

    async def main() -> list[str]:
        gate.open.clear()
        seen: list[str] = []
        waiting = asyncio.ensure_future(batcher.run(1))
        for _ in range(3):
            await asyncio.sleep(0.01)
            seen.append("tick")
        assert not waiting.done()
        gate.open.set()
        seen.append(str(await waiting))
        return seen

    assert asyncio.run(main()) == ["tick", "tick", "tick", "10"]
    batcher.close()


def test_a_failing_batch_fails_its_callers_only() -> None:
    calls = []

    def handle(items: list[int]) -> list[int]:
        calls.append(items)
        if len(calls) == 1:
            raise ValueError("the store failed")
        return items

    batcher = Batcher(handle)

    async def main() -> int:
        with pytest.raises(ValueError, match="the store failed"):
            await batcher.run(1)
        return await batcher.run(2)

    assert asyncio.run(main()) == 2
    batcher.close()


def test_a_wrong_number_of_answers_is_an_error_not_a_mixup() -> None:
    batcher = Batcher(lambda items: items[:-1], max_batch=8)

    async def main() -> None:
        await batcher.run(1)

    with pytest.raises(RuntimeError, match="0 answers to 1 items"):
        asyncio.run(main())
    batcher.close()


def test_batches_are_capped() -> None:
    gate = Gate()
    batcher = Batcher(gate, max_batch=4)

    async def main() -> list[int]:
        gate.open.clear()
        futures = [asyncio.ensure_future(batcher.run(i)) for i in range(10)]
        await asyncio.sleep(0.05)
        gate.open.set()
        return await asyncio.gather(*futures)

    assert asyncio.run(main()) == [i * 10 for i in range(10)]
    assert max(gate.sizes) <= 4 and sum(gate.sizes) == 10
    batcher.close()


def test_close_stops_the_thread() -> None:
    batcher = Batcher(lambda items: items, name="closing")
    assert asyncio.run(batcher.run(3)) == 3
    batcher.close()
    assert "closing" not in {t.name for t in threading.enumerate()}


def test_an_answer_that_is_an_exception_is_given_as_an_answer() -> None:
    """An answer may be an exception (the gateway's answer for a call whose admission
    failed): its caller receives it, and the batch's other callers their own answers."""
    busy = LookupError("busy")
    batcher: Batcher[int, object] = Batcher(lambda items: [busy if i else i for i in items])

    async def main() -> list[object]:
        return list(await asyncio.gather(batcher.run(0), batcher.run(1)))

    assert asyncio.run(main()) == [0, busy]
    batcher.close()
