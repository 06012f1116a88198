"""Calls and pages in memory: a :class:`~parcelsearch.stores.spending.Spending` for tests.

It is also a store added the way any store is (one module, one row of
:data:`parcelsearch.stores.TWINS`): :func:`open_spending` and :func:`open_history` are the
twin's openers, as ``tests/test_stores.py`` registers it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.spending import CachePages
from parcelsearch.stores.quotas import Quota, Usage, no_calls_left
from parcelsearch.stores.spending import Limit


class MemorySpending(CachePages):
    """Calls and pages in memory (for tests): the same rules as
    :class:`~parcelsearch.stores.local.spending.LocalSpending`."""

    def __init__(self, fingerprint: str = "0" * 16, cache: ResponseCache | None = None) -> None:
        super().__init__(cache)
        self.fingerprint = fingerprint
        self._lock = threading.Lock()
        self._next = 0
        #: Open and settled reservations → settled?
        self.reservations: dict[int, bool] = {}

    @property
    def spent(self) -> int:
        """Calls reserved and not refunded (settled or of unknown fate)."""
        return len(self.reservations)

    def reserve(self, run_id: str, quota: Quota | None) -> int:
        with self._lock:
            if quota is not None and quota.remaining(Usage(self.spent, self.spent)) <= 0:
                raise no_calls_left(self.fingerprint, quota, self.spent, "this store")
            self._next += 1
            self.reservations[self._next] = False
            return self._next

    def settle(self, reservation: int) -> None:
        with self._lock:
            if reservation in self.reservations:
                self.reservations[reservation] = True

    def refund(self, reservation: int) -> None:
        with self._lock:
            self.reservations.pop(reservation, None)

    def limits(self, quota: Quota | None) -> list[Limit]:
        if quota is None:
            return []
        return [(quota.remaining(Usage(self.spent, self.spent)), "quota")]


def open_spending(
    location: str | None,
    fingerprint: str,
    *,
    member: str = "",
    cache: ResponseCache | None = None,
    ledger: Any = None,
    workers: int = 1,
) -> MemorySpending:
    """Calls in memory for the key ``fingerprint`` names, pages in ``cache`` (``ledger``
    unused)."""
    return MemorySpending(fingerprint, cache)


def open_history(
    location: str | None, ledger_path: str | os.PathLike[str] | None, *, member: str = ""
) -> None:
    """No run history is kept in memory."""
    return None
