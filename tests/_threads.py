"""Many threads at once: racing for the last calls (granted and refused), or paced (when
each was let through)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def race(
    reserve: Callable[[int], object],
    refusal: type[BaseException],
    *,
    threads: int = 16,
    each: int = 10,
) -> tuple[int, int]:
    """Call ``reserve(thread_index)`` ``each`` times in each of ``threads`` threads started
    together; returns (granted, refused by ``refusal``)."""
    counts = [0, 0]
    lock = threading.Lock()

    def hammer(index: int) -> None:
        for _ in range(each):
            try:
                reserve(index)
            except refusal:
                with lock:
                    counts[1] += 1
            else:
                with lock:
                    counts[0] += 1

    workers = [threading.Thread(target=hammer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return counts[0], counts[1]


def moments(send: Callable[[int], float], *, threads: int, each: int) -> list[float]:
    """Call ``send(thread_index)`` ``each`` times in each of ``threads`` threads started
    together; returns the moments it returned (when each call was let through), sorted."""
    released: list[float] = []
    lock = threading.Lock()

    def work(index: int) -> None:
        for _ in range(each):
            moment = send(index)
            with lock:
                released.append(moment)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sorted(released)
