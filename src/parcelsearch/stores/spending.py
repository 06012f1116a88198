"""Spending: where a key's calls are reserved, paced and counted, and its pages kept.

One interface, :class:`Spending`, is all a search needs from the outside world besides the
client: a call waits for its turn at the key's **pacer**, is **reserved** just before it is
sent (refused there when the key's quota or the person's budget has no call left), and is
**settled** once sent (its fate may be unknown: it counts as spent) or **refunded** when the
service certainly did not count it. Pages are read from and **kept** in its page store; the
fetch path **claims** a page first, so that where several processes share a store only one
of them pays for a page (single flight).

:class:`Spending` is three roles, each a protocol of its own so that a caller is typed by
the one it uses: :class:`Calls` (reserve → settle | refund, what is left), :class:`Pacer`
(the key's turns and pauses) and :class:`PageStore` (pages: cached, claim, keep, abandon).
:class:`CallSpend` is the one spend hook of a request (what the client calls around each
attempt) over a store's calls and pacer.

Implementations (opened by :func:`parcelsearch.stores.open_store`):

- :class:`parcelsearch.stores.local.spending.LocalSpending`: this machine's SQLite ledger,
  parquet response cache (its pages claimed across the processes sharing the folder) and the
  client's in-process pacer (the default);
- :class:`parcelsearch.stores.team.spending.TeamSpending`: a team's PostgreSQL store (ledger,
  pacer, pages, budgets per person), with the local cache kept as this machine's copy.

The run's own ``budget`` is not here: :class:`parcelsearch._run.fetching.Run` enforces it, in one
place, before a reservation is asked for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from parcelsearch._fetch.pacing import RateLimiter
from parcelsearch._fetch.page import Page
from parcelsearch.errors import BudgetExhaustedError
from parcelsearch.stores.quotas import Quota

__all__ = [
    "Spending",
    "Calls",
    "Pacer",
    "PageStore",
    "KeySpending",
    "CallSpend",
    "Limit",
    "RESERVE_LEAD",
]

#: What may still be spent, and what limits it (``"quota"``, ``"user budget"``): calls left.
Limit = tuple[int, str]
#: Seconds before its turn at the pacer that a call is reserved (the reservation's write,
#: so that the call leaves at its turn and the spacing the service sees stays even); a
#: process killed in them leaves that one call charged besides those on the wire.
RESERVE_LEAD = 0.05


class Calls(Protocol):
    """A key's calls: reserve → settle | refund, and what is left (any thread)."""

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


class Pacer(Protocol):
    """The key's turns: every call waits for one; a 429's ``Retry-After`` holds them all."""

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> float | None:
        """Wait for the next call's turn at the key's pacer: ``None`` once it has come, or
        the turn (``time.monotonic()``) when it returns a moment before, so that the call's
        reservation is made in that moment (the caller then waits until the turn)."""

    def pause(self, seconds: float) -> None:
        """The service asked the key to wait ``seconds`` (a 429 with ``Retry-After``)."""


class PageStore(Protocol):
    """The pages a key fetched, claimed before fetching so that one store pays once."""

    def cached(self, key: str, max_age: float | None) -> Page | None:
        """A stored page (read once, to price what is left), or ``None``."""

    def claim(self, key: str, max_age: float | None, cancel: threading.Event) -> Page | None:
        """Before fetching a page: the page if someone else stored it meanwhile, else
        ``None`` and the caller fetches it, then calls :meth:`keep` or :meth:`abandon`."""

    def keep(self, page: Page) -> None:
        """Store a page fetched (and release its claim)."""

    def abandon(self, key: str) -> None:
        """Give up a claim: the page was not fetched (another process may take it over)."""


class Spending(Calls, Pacer, PageStore, Protocol):
    """The calls of one key and the pages it fetched: pace → reserve → settle | refund, pages.

    Every method may be called from several threads at once.
    """

    #: The key's fingerprint (never the key).
    fingerprint: str

    def close(self) -> None:
        """Release what the store holds open."""


class KeySpending(Calls, Pacer, Protocol):
    """What a call outside a page store spends through: the key's calls and its pacer."""


class CallSpend:
    """The one spend hook of a request (:class:`parcelsearch._fetch.http.Spend`): each attempt
    paced at the key's pacer, reserved just before it is sent, settled once sent, refunded
    when the service did not count it. ``calls`` counts the attempts not refunded.

    Parameters
    ----------
    spending
        The store's calls and pacer.
    reserve, refund
        Where a call is reserved and refunded: a run's (its budget and count), else
        ``spending``'s own, as ``run_id`` with no quota of the caller's.
    run_id
        What the store records the calls under when ``reserve`` is not given.
    cap, capped
        The attempts allowed at most (``None``: no cap), and what is said when they are spent
        (``{cap}``: the cap); redirects and retries would otherwise take a call past its price.
    """

    def __init__(
        self,
        spending: KeySpending,
        *,
        reserve: Callable[[], int] | None = None,
        refund: Callable[[int], None] | None = None,
        run_id: str = "",
        cap: int | None = None,
        capped: str = "{cap} calls are spent",
    ) -> None:
        self.spending = spending
        self._reserve = reserve or (lambda: spending.reserve(run_id, None))
        self._refund = refund or spending.refund
        self.cap = cap
        self.capped = capped
        self.calls = 0
        self._open: int | None = None  # the attempt's reservation, until refunded
        self._turn: float | None = None  # the attempt's turn at the pacer, if told

    def reserve(self) -> None:
        if self.cap is not None and self.calls >= self.cap:
            raise BudgetExhaustedError(
                self.capped.format(cap=self.cap), spent=self.calls, budget=self.cap
            )
        self._open = self._reserve()
        self.calls += 1
        if self._turn is not None:  # reserved a moment before the turn: sent at the turn
            time.sleep(max(0.0, self._turn - time.monotonic()))
            self._turn = None

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> None:
        self._turn = self.spending.pace(limiter, cancel)

    def settle(self) -> None:
        if self._open is not None:
            self.spending.settle(self._open)

    def refund(self) -> None:
        if self._open is not None:
            self._refund(self._open)
            self._open = None
            self.calls -= 1

    def pause(self, seconds: float) -> None:
        self.spending.pause(seconds)
