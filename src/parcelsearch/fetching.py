"""Fetching pages for one run: what each piece has, how each call is spent, and the stop.

:class:`Run` is what the worker threads share: the client, the spending (ledger, pacer and
page store behind one :class:`~parcelsearch.spending.Spending`), the options, the calls
spent (the run's budget is enforced here and only here), and the stop event.
:class:`Fetcher` runs (piece, page) jobs on a thread pool while the calling thread keeps
watch, so an interrupt lands at once; :meth:`Fetcher.abort` stops everything: no attempt
starts after it, queued jobs are cancelled, back-off sleeps wake, requests on the wire are
kept (or abandoned after their timeout).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from parcelsearch import _wire
from parcelsearch._http import Cancelled, RateLimiter
from parcelsearch.client import Client
from parcelsearch.errors import BudgetExhaustedError, ParcelSearchError
from parcelsearch.ledger import Quota, budget_reached
from parcelsearch.page import Page
from parcelsearch.planning import Piece
from parcelsearch.search_options import SearchOptions
from parcelsearch.spending import Limit, Spending

__all__ = ["Run", "PieceState", "PageSpend", "Fetcher", "Stopped", "MAX_REFETCHES"]

log = logging.getLogger(__name__)

#: How often one piece may be fetched again because its pages came from different answers.
MAX_REFETCHES = 2
#: Seconds the watching thread waits between looks at the stop event and finished requests.
_TICK = 0.1


class Stopped(Exception):  # noqa: N818 - a signal, not an error
    """Raised before an attempt once the run is stopping."""


@dataclass
class PieceState:
    """What one piece has produced so far (the run's counts are sums over these)."""

    piece: Piece
    rows: int | None = None
    pages: int | None = None
    data: dict[int, tuple[str, ...]] = field(default_factory=dict)
    calls: int = 0
    cached_pages: int = 0
    refetches: int = 0  # > 0: fetched again, so its pages never come from a store again
    reread: bool = False  # a refresh: its pages come from the network, not a store

    @property
    def done(self) -> bool:
        return self.pages is not None and len(self.data) >= max(1, self.pages)

    def missing(self) -> list[int]:
        """Pages still to fetch (page 1 first)."""
        if self.pages is None:
            return [1]
        return [k for k in range(1, max(1, self.pages) + 1) if k not in self.data]

    def reset(self) -> None:
        self.rows = self.pages = None
        self.data.clear()
        self.refetches += 1


class Run:
    """One search run: what the worker threads share, and how each call is spent."""

    def __init__(self, client: Client, spending: Spending, options: SearchOptions,
                 *, path: str) -> None:
        self.client = client
        self.spending = spending
        self.options = options
        #: The quota given, else the one the store knows for the key.
        self.quota: Quota | None = options.quota or spending.stored_quota()
        self.path = path
        self.run_id = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.calls = 0
        #: Set when the run must stop: no attempt is started after it.
        self.stop = threading.Event()

    @property
    def budget(self) -> int | None:
        return self.options.budget

    # -- spending (the client calls these around every attempt, through PageSpend) ---------

    def reserve(self) -> int:
        """Before every attempt: refuse once stopping or at the budget, else reserve one call
        in the spending store (which refuses it when the key or person has none left)."""
        if self.stop.is_set():
            raise Stopped()
        with self.lock:  # check and count in one critical section: threads race for the last call
            if self.budget is not None and self.calls >= self.budget:
                raise BudgetExhaustedError(budget_reached(self.budget), spent=self.calls,
                                           budget=self.budget)
            self.calls += 1
        try:
            return self.spending.reserve(self.run_id, self.quota)
        except BaseException:
            with self.lock:
                self.calls -= 1
            raise

    def refund(self, reservation: int) -> None:
        """Take back a reservation the service did not count (never sent, or refused)."""
        self.spending.refund(reservation)
        with self.lock:
            self.calls -= 1

    def allowance(self) -> tuple[int | None, str]:
        """Calls this run may still spend, and what limits it (``None``: no limit known)."""
        limits: list[Limit] = list(self.spending.limits(self.quota))
        if self.budget is not None:
            limits.append((max(0, self.budget - self.calls), "budget"))
        if not limits:
            return None, ""
        return min(limits)

    # -- one page ----------------------------------------------------------------------

    def key(self, piece: Piece, page: int) -> str:
        return _wire.request_key(self.client.base_url, self.path, piece.polygon_json, page)

    def skips_store(self, state: PieceState) -> bool:
        """Whether this piece's pages must come from the network: ``refresh="all"``, a piece
        fetched again, or one a refresh re-reads."""
        return self.options.refresh == "all" or bool(state.refetches) or state.reread

    def cached(self, state: PieceState, page: int) -> Page | None:
        """The stored page, read once when pricing (never for a piece fetched again)."""
        if self.skips_store(state):
            return None
        return self.spending.cached(self.key(state.piece, page), self.options.max_age)

    def fetch(self, state: PieceState, page: int) -> tuple[Page, int]:
        """One page not found when priced: claimed (a store shared with other processes may
        have it by now), else fetched from the network and kept."""
        key = self.key(state.piece, page)
        if not self.skips_store(state):
            hit = self.spending.claim(key, self.options.max_age, self.stop)
            if hit is not None:
                return hit, 0
        spend = PageSpend(self)
        try:
            fresh = self.client.search_page(state.piece.polygon_json, page, path=self.path,
                                            spend=spend, cancel=self.stop)
        except (Stopped, Cancelled):
            self.spending.abandon(key)
            raise
        except BaseException:
            self.stop.set()  # at once, in this thread: no other worker starts a request now
            self.spending.abandon(key)
            raise
        self.spending.keep(fresh)
        return fresh, max(1, spend.calls)


class PageSpend:
    """The one spend hook of a request: each attempt paced at the key's pacer, then reserved
    in the run just before it is sent, settled once sent, refunded when the service did not
    count it."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.calls = 0
        self._open: int | None = None  # the attempt's reservation, until refunded
        self._turn: float | None = None  # the attempt's turn at the pacer, if told

    def reserve(self) -> None:
        self._open = self.run.reserve()
        self.calls += 1
        if self._turn is not None:  # reserved a moment before the turn: sent at the turn
            time.sleep(max(0.0, self._turn - time.monotonic()))

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> None:
        self._turn = self.run.spending.pace(limiter, cancel)

    def settle(self) -> None:
        if self._open is not None:
            self.run.spending.settle(self._open)

    def refund(self) -> None:
        if self._open is not None:
            self.run.refund(self._open)
            self._open = None
            self.calls -= 1

    def pause(self, seconds: float) -> None:
        self.run.spending.pause(seconds)


class Fetcher:
    """Runs pages on a thread pool; the main thread keeps watch, so interrupts land at once."""

    def __init__(self, run: Run, workers: int, bar: Any) -> None:
        self.run = run
        self.bar = bar
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parcelsearch")
        self.failure: BaseException | None = None
        self.pending: dict[Future[tuple[Page, int]], tuple[PieceState, int]] = {}

    def fetch(self, jobs: Iterable[tuple[PieceState, int]]) -> None:
        """Fetch every (piece, page) job; pieces whose answer changed are fetched again."""
        pending = self.pending
        for state, page in jobs:
            pending[self.pool.submit(self.run.fetch, state, page)] = (state, page)
        while pending:
            done, _ = wait(pending, timeout=_TICK, return_when=FIRST_COMPLETED)
            for future in done:
                state, page = pending.pop(future)
                for again in self._settle(future, state, page):
                    pending[self.pool.submit(self.run.fetch, state, again)] = (state, again)
            if self.failure is not None or self.run.stop.is_set():
                self.abort()
                return

    def abort(self) -> None:
        """Stop: nothing starts after this; requests on the wire are kept or abandoned.

        Waits at most the client's timeout (plus a second) for requests already sent; an
        interrupt while waiting is not caught (a second Ctrl-C exits at once).
        """
        self.run.stop.set()
        for future in self.pending:
            future.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self._drain(self.pending)
        self.pending = {}

    def _settle(self, future: Future[tuple[Page, int]], state: PieceState,
                page_no: int) -> list[int]:
        """Record one finished job; returns pages of this piece to fetch again, if any."""
        try:
            page, calls = future.result()
        except (Stopped, Cancelled):
            return []  # not started, or stopped before sending: nothing was spent
        except BaseException as exc:  # noqa: BLE001 - kept, the run stops after it
            self.failure = self.failure or exc
            self.run.stop.set()
            return []
        state.calls += calls
        state.cached_pages += calls == 0
        if page_no == 1 and state.rows is None:
            state.rows, state.pages = page.rows, page.pages
            self._keep(state, page_no, page)
            return state.missing() if state.refetches else []  # fetched again: finish it
        if state.rows is None:
            return []  # a page of the answer this piece was fetched again to replace
        if (page.rows, page.pages) != (state.rows, state.pages):
            return [] if self.run.stop.is_set() else self._refetch(state, page)
        self._keep(state, page_no, page)
        return []

    def _keep(self, state: PieceState, page_no: int, page: Page) -> None:
        if page_no not in state.data:
            state.data[page_no] = page.data
            self.bar.update(1)

    def _refetch(self, state: PieceState, page: Page) -> list[int]:
        """Pages of one piece came from different answers: fetch that piece again, only it."""
        if state.refetches >= MAX_REFETCHES:
            self.failure = self.failure or _changing(state, page)
            self.run.stop.set()
            return []
        log.warning("area %r piece %s: page %s reports rows=%s, pages=%s but page 1 reported "
                    "rows=%s, pages=%s; fetching this piece again", state.piece.area_id,
                    state.piece.piece_id, page.page, page.rows, page.pages, state.rows,
                    state.pages)
        self.bar.total += max(1, page.pages)
        self.bar.refresh()
        state.reset()
        return [1]

    def _drain(self, pending: dict[Future[tuple[Page, int]], tuple[PieceState, int]]) -> None:
        """Keep what requests on the wire bring back (or abandon them after their timeout)."""
        running = {f: job for f, job in pending.items() if not f.cancelled()}
        finished, _ = wait(running, timeout=self.run.client.timeout + 1.0)
        for future in finished:
            state, page = running[future]
            self._settle(future, state, page)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _changing(state: PieceState, page: Page) -> ParcelSearchError:
    piece = state.piece
    return ParcelSearchError(
        f"area {piece.area_id!r} piece {piece.piece_id}: page {page.page} reports "
        f"rows={page.rows}, pages={page.pages} but page 1 reported rows={state.rows}, "
        f"pages={state.pages}, through {MAX_REFETCHES} fresh fetches of the piece: the "
        "service's data keep changing. Everything fetched is cached; search again later.")
