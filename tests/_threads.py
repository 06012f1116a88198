"""Many threads racing for the last calls: how many were granted and how many refused."""

from __future__ import annotations

import threading
from collections.abc import Callable


def race(reserve: Callable[[int], object], refusal: type[BaseException], *, threads: int = 16,
         each: int = 10) -> tuple[int, int]:
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
