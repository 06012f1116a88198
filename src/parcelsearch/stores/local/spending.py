"""This machine's :class:`~parcelsearch.stores.spending.Spending`: the SQLite ledger, the
parquet response cache (its pages claimed across the processes sharing the folder) and the
client's in-process pacer."""

from __future__ import annotations

import threading
import time
from datetime import datetime

from parcelsearch._fetch.pacing import Cancelled, RateLimiter
from parcelsearch._fetch.page import Page
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.claims import PageClaims
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.quotas import Quota, QuotaRefused
from parcelsearch.stores.spending import RESERVE_LEAD, Limit

__all__ = ["LocalSpending", "CachePages", "CLAIM_POLL", "CLAIM_PATIENCE"]

#: Seconds between looks for a page another process sharing the cache folder is fetching.
CLAIM_POLL = 0.05
#: Seconds a page claimed by another process is waited for at most; a claim held longer is
#: taken as stuck (a frozen process) and the page fetched here after all.
CLAIM_PATIENCE = 300.0


class CachePages:
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


class LocalSpending(CachePages):
    """This machine: the SQLite ledger, the parquet cache, the client's pacer.

    Parameters
    ----------
    fingerprint
        The key's fingerprint.
    ledger, cache
        Either may be ``None`` (go without: no quota is then known to be spent).
    """

    def __init__(
        self, fingerprint: str, ledger: Ledger | None, cache: ResponseCache | None
    ) -> None:
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

    def refusal(self) -> QuotaRefused | None:
        """The vendor's quota refusal of the key the ledger keeps, while in force."""
        return None if self.ledger is None else self.ledger.refusal(self.fingerprint)

    def refused(self, until: datetime | None) -> QuotaRefused | None:
        """Remember in the ledger that the vendor refused the key for its quota until
        ``until`` (``None``: never); ``None`` when there is no ledger."""
        return None if self.ledger is None else self.ledger.refused(self.fingerprint, until)

    def limits(self, quota: Quota | None) -> list[Limit]:
        if quota is None or self.ledger is None:
            return []
        return [(quota.remaining(self.ledger.usage(self.fingerprint)), "quota")]
