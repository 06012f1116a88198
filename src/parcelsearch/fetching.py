"""Fetching pages for one run: what each piece has, how each call is spent, and the stop.

:class:`Run` is what the worker threads share: the client, cache and ledger, the calls
spent, and the stop event. :class:`Fetcher` runs (piece, page) jobs on a thread pool while
the calling thread keeps watch, so an interrupt lands at once; :meth:`Fetcher.abort` stops
everything: no attempt starts after it, queued jobs are cancelled, back-off sleeps wake,
requests on the wire are kept (or abandoned after their timeout).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from parcelsearch import _wire
from parcelsearch._http import Cancelled
from parcelsearch.cache import ResponseCache
from parcelsearch.client import Client
from parcelsearch.errors import BudgetExhaustedError, ParcelSearchError
from parcelsearch.ledger import Ledger, Quota, budget_reached
from parcelsearch.page import Page
from parcelsearch.planning import Piece

__all__ = ["Run", "PieceState", "Fetcher", "Stopped", "MAX_REFETCHES"]

log = logging.getLogger(__name__)

#: How often one piece may be fetched again because its pages came from different answers.
MAX_REFETCHES = 2
#: Seconds the watching thread waits between looks at the stop event and finished requests.
_TICK = 0.1


class Stopped(Exception):  # noqa: N818 - a signal, not an error
    """Raised before an attempt once the run is stopping."""


@dataclass
class PieceState:
    """What one piece has produced so far."""

    piece: Piece
    rows: int | None = None
    pages: int | None = None
    data: dict[int, tuple[str, ...]] = field(default_factory=dict)
    calls: int = 0
    cached_pages: int = 0
    refetches: int = 0
    fresh: bool = False  # set when the cache must not be used for this piece any more
    reread: bool = False  # a refresh: its pages come from the network, not the cache

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
        self.fresh = True
        self.refetches += 1


class Run:
    """One search run: what the worker threads share, and how each call is spent."""

    def __init__(
        self,
        client: Client,
        cache: ResponseCache | None,
        ledger: Ledger | None,
        *,
        budget: int | None,
        quota: Quota | None,
        max_age: float | None,
        refresh: bool,
        path: str,
    ) -> None:
        self.client = client
        self.cache = cache
        self.ledger = ledger
        self.budget = budget
        self.quota = quota
        self.max_age = max_age
        self.refresh = refresh
        self.path = path
        self.run_id = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.calls = 0
        self.cached_pages = 0
        self.refetched_pieces = 0
        #: Set when the run must stop: no attempt is started after it.
        self.stop = threading.Event()

    # -- spending (the client calls these around every attempt) -----------------------

    def reserve(self) -> None:
        """Before every attempt: refuse once stopping, else reserve one call."""
        if self.stop.is_set():
            raise Stopped()
        if self.ledger is not None:
            self.ledger.reserve(self.client.fingerprint, run_id=self.run_id, budget=self.budget,
                                quota=self.quota)
        with self.lock:  # check and count in one critical section: threads race for the last call
            if self.ledger is None and self.budget is not None and self.calls >= self.budget:
                raise BudgetExhaustedError(budget_reached(self.budget), spent=self.calls,
                                           budget=self.budget)
            self.calls += 1

    def refund(self) -> None:
        """Take back a reservation the service did not count (never sent, or refused)."""
        if self.ledger is not None:
            self.ledger.release(self.client.fingerprint, run_id=self.run_id)
        with self.lock:
            self.calls -= 1

    def allowance(self) -> tuple[int | None, str]:
        """Calls this run may still spend, and what limits it (``None``: no limit known)."""
        limits: list[tuple[int, str]] = []
        if self.budget is not None:
            limits.append((max(0, self.budget - self.calls), "budget"))
        if self.quota is not None and self.ledger is not None:
            left = self.ledger.remaining(self.client.fingerprint, self.quota)
            if left is not None:
                limits.append((left, "quota"))
        if not limits:
            return None, ""
        return min(limits)

    # -- one page ----------------------------------------------------------------------

    def cached(self, piece: Piece, page: int) -> Page | None:
        if self.cache is None or self.refresh:
            return None
        key = _wire.request_key(self.client.base_url, self.path, piece.polygon_json, page)
        return self.cache.get(key, max_age=self.max_age)

    def fetch(self, state: PieceState, page: int) -> tuple[Page, int]:
        """One page of one piece: from the cache, else from the network (then cached)."""
        hit = None if state.fresh or state.reread else self.cached(state.piece, page)
        if hit is not None:
            with self.lock:
                self.cached_pages += 1
            return hit, 0
        spend = PageSpend(self)
        try:
            fresh = self.client.search_page(state.piece.polygon_json, page, path=self.path,
                                            spend=spend, cancel=self.stop)
        except (Stopped, Cancelled):
            raise
        except BaseException:
            self.stop.set()  # at once, in this thread: no other worker starts a request now
            raise
        if self.cache is not None:
            self.cache.put(fresh)
        return fresh, max(1, spend.calls)


class PageSpend:
    """The calls one page costs: each attempt reserved in the run, refunds taken back."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.calls = 0

    def reserve(self) -> None:
        self.run.reserve()
        self.calls += 1

    def refund(self) -> None:
        self.run.refund()
        self.calls -= 1


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
            return state.missing() if state.fresh else []  # a piece fetched again: finish it
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
        with self.run.lock:
            self.run.refetched_pieces += 1
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
