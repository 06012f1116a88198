"""Spending: where a key's calls are reserved, paced and counted, and its pages kept.

One interface, :class:`Spending`, is all a search needs from the outside world besides the
client: a call waits for its turn at the key's **pacer**, is **reserved** just before it is
sent (refused there when the key's quota or the person's budget has no call left), and is
**settled** once sent (its fate may be unknown: it counts as spent) or **refunded** when the
service certainly did not count it. Pages are read from and **kept** in its page store; the
fetch path **claims** a page first, so that where several processes share a store only one
of them pays for a page (single flight).

Implementations:

- :class:`LocalSpending`: this machine's SQLite :class:`~parcelsearch.stores.local.ledger.Ledger`,
  parquet :class:`~parcelsearch.stores.local.cache.ResponseCache` (its pages claimed across the
  processes sharing the folder, :class:`~parcelsearch.stores.local.claims.PageClaims`) and the
  client's in-process pacer (the default);
- :class:`MemorySpending`: the same in memory, for tests;
- :class:`parcelsearch.stores.team.TeamSpending`: a team's PostgreSQL store (ledger, pacer, pages,
  budgets per person), with the local cache kept as this machine's copy.

The run's own ``budget`` is not here: :class:`parcelsearch._run.fetching.Run` enforces it, in one
place, before a reservation is asked for.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from parcelsearch._fetch.http import Cancelled, RateLimiter
from parcelsearch._fetch.page import Page
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.claims import PageClaims
from parcelsearch.stores.local.ledger import Ledger, Quota, Usage, no_calls_left

__all__ = ["Spending", "Limit", "LocalSpending", "MemorySpending", "RESERVE_LEAD"]

#: What may still be spent, and what limits it (``"quota"``, ``"user budget"``): calls left.
Limit = tuple[int, str]
#: Seconds before its turn at the pacer that a call is reserved (the reservation's write,
#: so that the call leaves at its turn and the spacing the service sees stays even); a
#: process killed in them leaves that one call charged besides those on the wire.
RESERVE_LEAD = 0.05
#: Seconds between looks for a page another process sharing the cache folder is fetching.
CLAIM_POLL = 0.05
#: Seconds a page claimed by another process is waited for at most; a claim held longer is
#: taken as stuck (a frozen process) and the page fetched here after all.
CLAIM_PATIENCE = 300.0


class Spending(Protocol):
    """The calls of one key and the pages it fetched: pace → reserve → settle | refund, pages.

    Every method may be called from several threads at once.
    """

    #: The key's fingerprint (never the key).
    fingerprint: str

    def stored_quota(self) -> Quota | None:
        """The key's quota as the store knows it (``None``: the store knows none)."""

    def reserve(self, run_id: str, quota: Quota | None) -> int:
        """Reserve one call before it is sent; returns the reservation.

        Raises
        ------
        QuotaWouldExceedError
            No call is left under ``quota`` (or the person's budget); nothing is reserved.
        """

    def settle(self, reservation: int) -> None:
        """The call was sent: it is spent (also when its answer never came)."""

    def refund(self, reservation: int) -> None:
        """The service certainly did not count the call (never sent, or refused at its gate)."""

    def limits(self, quota: Quota | None) -> list[Limit]:
        """Calls the store still allows, and what limits each (empty: nothing known)."""

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> float | None:
        """Wait for the next call's turn at the key's pacer: ``None`` once it has come, or
        the turn (``time.monotonic()``) when it returns a moment before, so that the call's
        reservation is made in that moment (the caller then waits until the turn)."""

    def pause(self, seconds: float) -> None:
        """The service asked the key to wait ``seconds`` (a 429 with ``Retry-After``)."""

    def cached(self, key: str, max_age: float | None) -> Page | None:
        """A stored page (read once, to price what is left), or ``None``."""

    def claim(self, key: str, max_age: float | None, cancel: threading.Event) -> Page | None:
        """Before fetching a page: the page if someone else stored it meanwhile, else
        ``None`` and the caller fetches it, then calls :meth:`keep` or :meth:`abandon`."""

    def keep(self, page: Page) -> None:
        """Store a page fetched (and release its claim)."""

    def abandon(self, key: str) -> None:
        """Give up a claim: the page was not fetched (another process may take it over)."""

    def close(self) -> None:
        """Release what the store holds open."""


class _Pages:
    """Pages in an optional response cache; with ``claims``, a page one process (or thread)
    is fetching is waited for by the others sharing the folder, not bought twice."""

    def __init__(self, cache: ResponseCache | None, claims: PageClaims | None = None) -> None:
        self.cache = cache
        self.claims = claims
        self.claim_patience = CLAIM_PATIENCE

    def stored_quota(self) -> Quota | None:
        return None

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> float | None:
        return limiter.wait(cancel, lead=RESERVE_LEAD)

    def pause(self, seconds: float) -> None:
        return None  # the transport's pacer holds every thread of this process (Retry-After)

    def cached(self, key: str, max_age: float | None) -> Page | None:
        """The stored page; one another process is fetching now is waited for (so that a
        price never counts a page someone else is paying for)."""
        if self.cache is None:
            return None
        hit = self.cache.get(key, max_age=max_age)
        if hit is None and self.claims is not None and self.claims.busy(key):
            give_up = time.monotonic() + self.claim_patience
            while self.claims.busy(key) and time.monotonic() < give_up:
                time.sleep(CLAIM_POLL)
            self.cache.reload()
            hit = self.cache.get(key, max_age=max_age)
        return hit

    def claim(self, key: str, max_age: float | None, cancel: threading.Event) -> Page | None:
        if self.cache is None or self.claims is None:
            return None  # nobody else fills this store meanwhile
        give_up = time.monotonic() + self.claim_patience
        while True:
            hit = self.cache.get(key, max_age=max_age)
            if hit is not None:
                return hit
            if self.claims.take(key):
                self.cache.reload()  # kept by its last holder, maybe within one clock tick
                hit = self.cache.get(key, max_age=max_age)
                if hit is None:
                    return None
                self.claims.release(key)
                return hit
            if time.monotonic() > give_up:
                return None  # its holder is stuck: fetched here after all, unclaimed
            if cancel.wait(CLAIM_POLL):
                raise Cancelled("stopped while waiting for a page another process fetches")

    def keep(self, page: Page) -> None:
        try:
            if self.cache is not None:
                self.cache.put(page)
        finally:
            self.abandon(page.request_key)

    def abandon(self, key: str) -> None:
        if self.claims is not None:
            self.claims.release(key)

    def close(self) -> None:
        if self.claims is not None:
            self.claims.release_all()


class LocalSpending(_Pages):
    """This machine: the SQLite ledger, the parquet cache, the client's pacer.

    Parameters
    ----------
    fingerprint
        The key's fingerprint.
    ledger, cache
        Either may be ``None`` (go without: no quota is then known to be spent).
    """

    def __init__(self, fingerprint: str, ledger: Ledger | None,
                 cache: ResponseCache | None) -> None:
        super().__init__(cache, None if cache is None else cache.claims())
        self.fingerprint = fingerprint
        self.ledger = ledger

    def __repr__(self) -> str:
        return f"LocalSpending(ledger={self.ledger!r}, cache={self.cache!r})"

    def reserve(self, run_id: str, quota: Quota | None) -> int:
        if self.ledger is None:
            return 0
        return self.ledger.reserve(self.fingerprint, run_id=run_id, quota=quota)

    def settle(self, reservation: int) -> None:
        return None  # a reservation in the SQLite ledger counts as spent until refunded

    def refund(self, reservation: int) -> None:
        if self.ledger is not None:
            self.ledger.refund(self.fingerprint, reservation)

    def limits(self, quota: Quota | None) -> list[Limit]:
        if quota is None or self.ledger is None:
            return []
        return [(quota.remaining(self.ledger.usage(self.fingerprint)), "quota")]


class MemorySpending(_Pages):
    """Calls and pages in memory (for tests): the same rules as :class:`LocalSpending`."""

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
