"""Fetching pages for one run: what each piece has, how each call is spent, and the stop.

:class:`Run` is what the worker threads share: the client, the spending (ledger, pacer and
page store behind one :class:`~parcelsearch.stores.spending.Spending`), the options, the calls
spent (the run's budget is enforced here and only here), and the stop event.
:class:`Fetcher` runs (piece, page) jobs on a thread pool while the calling thread keeps
watch, so an interrupt lands at once; :meth:`Fetcher.abort` stops everything: no attempt
starts after it, queued jobs are cancelled, back-off sleeps wake, requests on the wire are
kept (or abandoned after their timeout).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from parcelsearch import _wire
from parcelsearch._fetch.pacing import Cancelled
from parcelsearch._fetch.page import Page
from parcelsearch._fetch.retries import remaining_calls
from parcelsearch._run.options import SearchOptions
from parcelsearch.client import Client
from parcelsearch.errors import (
    AuthenticationError,
    BadPolygonError,
    BudgetExhaustedError,
    CutBodyError,
    EndpointGoneError,
    Hint,
    MalformedResponseError,
    PageGoneError,
    ParcelSearchError,
    QuotaExhaustedError,
    QuotaWouldExceedError,
    RateLimitError,
    RequestTooLargeError,
    ResultWindowError,
    ServiceError,
    ServiceFailureError,
    UnstableOrderError,
)
from parcelsearch.notices import LearntFactWarning
from parcelsearch.planning.plans import Piece
from parcelsearch.stores.local.spending import LocalSpending
from parcelsearch.stores.quotas import Quota, QuotaRefused, budget_reached
from parcelsearch.stores.spending import CallSpend, Limit, Spending

__all__ = [
    "Run",
    "PieceState",
    "Fetcher",
    "Stopped",
    "MAX_REFETCHES",
    "PageBaseLearned",
    "piece_failure",
]

log = logging.getLogger(__name__)

#: How often one piece may be fetched again because its pages came from different answers.
MAX_REFETCHES = 2
#: GroupIDs read from a vendor, none twice in a page, after which it is known to list each
#: GroupID once (a vendor listing a condominium's parcels each shows repeats long before).
LISTS_ONCE_AFTER = 200
#: Seconds the watching thread waits between looks at the stop event and finished requests.
_TICK = 0.1


#: Why a piece whose pages contradict each other fails, against a vendor listing each
#: GroupID once.
SLIPPED = (
    ", and this vendor lists each GroupID once (learnt, kept in its profile): a page "
    "slipped (offset paging over an order that shifted), so GroupIDs may be missing "
    "from this piece and it is not complete. Search again later; what is complete is "
    "kept"
)
SHARED = "pages of this piece share GroupIDs" + SLIPPED


class Stopped(Exception):  # noqa: N818 - a signal, not an error
    """Raised before an attempt once the run is stopping."""


class PageBaseLearned(Exception):  # noqa: N818 - a signal, not an error
    """The vendor numbers its pages from 0: every page read so far must be read again."""


def piece_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is about one piece (the vendor refused or garbled its answer), so it
    fails that piece and its area, not the run. Refusals of the key (quota, invalid key,
    rate), of the base URL (redirects refused, 404, an endpoint gone), a failing service and
    failures to connect stop the run."""
    if isinstance(
        exc,
        QuotaExhaustedError
        | AuthenticationError
        | RateLimitError
        | ServiceFailureError
        | CutBodyError
        | EndpointGoneError,
    ):
        return False
    if isinstance(exc, RequestTooLargeError):
        return True  # that piece's request line (an IIS 404.15 too): the others may fit
    if isinstance(exc, ServiceError) and (300 <= exc.status < 400 or exc.status == 404):
        return False  # a redirect refused, or no such path: the base URL's, not the piece's
    return isinstance(exc, MalformedResponseError | ServiceError)


@dataclass(frozen=True)
class PieceState:
    """What one piece has produced so far (the run's counts are sums over these).

    Read by anyone; changed only through its transitions: :meth:`stored` (a page read from
    a store), :meth:`unanswered`, :meth:`probed` and :meth:`fetched` (calls), :meth:`keep` (a
    page's GroupIDs), :meth:`fail`, :meth:`cut` (split for the vendor's result window),
    :meth:`reset` (fetched again from page 1) and :meth:`start_over`. It guards that itself:
    assigning a field from outside raises :class:`dataclasses.FrozenInstanceError`, and
    :attr:`data` is a read-only view (assigning a page raises :class:`TypeError`).
    """

    piece: Piece
    rows: int | None = None
    pages: int | None = None
    #: The GroupIDs of each page kept, by page number (a read-only view; :meth:`keep` adds).
    data: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    calls: int = 0
    #: Of :attr:`calls`, those spent probing the vendor (its page numbering, ``page=0``;
    #: page 1 read again to check its order): counted in the budget like any call, and shown.
    probes: int = 0
    cached_pages: int = 0
    refetches: int = 0  # > 0: fetched again, so its pages never come from a store again
    #: Why this piece failed (the vendor's words), or ``None``: its area is not complete.
    failure: str | None = None
    #: When the oldest page read from a store was fetched (``None``: none was).
    oldest: datetime | None = None
    #: Split into smaller pieces (it has more pages than the vendor's result window): its
    #: GroupIDs are theirs, and its own pages are not fetched further.
    split: bool = False
    _kept: dict[int, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = dict(self.data)
        self._set(_kept=kept, data=MappingProxyType(kept))

    def _set(self, **values: Any) -> None:
        """The transitions' one way to change fields (the instance refuses assignment)."""
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def done(self) -> bool:
        if self.split:
            return self.failure is None
        return (
            self.failure is None and self.pages is not None and len(self.data) >= max(1, self.pages)
        )

    def missing(self) -> list[int]:
        """Pages still to fetch (page 1 first; none once the piece failed or was split)."""
        if self.failure is not None or self.split:
            return []
        if self.pages is None:
            return [1]
        return [k for k in range(1, max(1, self.pages) + 1) if k not in self.data]

    def stored(self, page_no: int, page: Page) -> None:
        """Page ``page_no`` read from a store when priced (page 1 sets the counts)."""
        if page_no == 1:
            self._set(rows=page.rows, pages=page.pages)
        self._kept[page_no] = page.data
        self._set(cached_pages=self.cached_pages + 1)
        if self.oldest is None or page.fetched_at < self.oldest:
            self._set(oldest=page.fetched_at)

    def unanswered(self, calls: int) -> None:
        """Calls an attempt spent on this piece without bringing a page back."""
        self._set(calls=self.calls + calls)

    def probed(self, calls: int) -> None:
        """Calls spent probing the vendor for this piece (answered or not)."""
        self._set(calls=self.calls + calls, probes=self.probes + calls)

    def fetched(self, calls: int) -> None:
        """A page came back: for ``calls`` calls, or claimed from a shared store (0)."""
        self._set(calls=self.calls + calls, cached_pages=self.cached_pages + (calls == 0))

    def counted(self, page: Page) -> None:
        """Page 1's answer: how many rows and pages this piece has."""
        self._set(rows=page.rows, pages=page.pages)

    def keep(self, page_no: int, page: Page) -> bool:
        """Keep a page's GroupIDs; ``False`` if it was kept already."""
        if page_no in self._kept:
            return False
        self._kept[page_no] = page.data
        return True

    def fail(self, why: str) -> None:
        """This piece failed (``why``: the vendor's words); its area is not complete."""
        self._set(failure=why)

    def cut(self) -> None:
        """Split into smaller pieces (more pages than the vendor's result window): its own
        later pages are not fetched; the pieces it was cut into hold its GroupIDs."""
        self._set(split=True)

    def reset(self) -> None:
        """Fetched again from page 1, never from a store: what it had is dropped."""
        self._kept.clear()
        self._set(rows=None, pages=None, oldest=None, refetches=self.refetches + 1)

    def start_over(self) -> None:
        """Read again from the start (the vendor's page numbers were learnt): as
        :meth:`reset`, its failure forgotten."""
        self.reset()
        self._set(failure=None)


def chosen_reached(chosen: int) -> str:
    """The stop at the calls the user chose at the price."""
    return (
        f"stopped at the {chosen:,} calls this run may spend by what was chosen at the "
        "price: nothing is spent past what you chose. Everything fetched is cached: "
        "running the same search again asks before spending the rest."
    )


class Run:
    """One search run: what the worker threads share, and how each call is spent."""

    def __init__(
        self,
        client: Client,
        spending: Spending,
        options: SearchOptions,
        *,
        path: str,
        run_id: str | None = None,
        rereads: Callable[[PieceState], bool] = lambda state: False,
    ) -> None:
        self.client = client
        self.spending = spending
        self.options = options
        #: The quota given, else the one the store knows for the key, else the one saved
        #: with the client's profile (:attr:`quota_source` says which).
        self.quota: Quota | None = options.quota or spending.stored_quota()
        #: Where :attr:`quota` came from: ``""`` (given, or the store's), else
        #: ``"your profile"`` (saved with ``parcelsearch login --quota``).
        self.quota_source = ""
        saved = getattr(client, "profile_quota", None)
        if self.quota is None and saved is not None:
            self.quota, self.quota_source = saved[1], "your profile"
        #: The vendor's quota refusal of the key the ledger keeps, while in force (until the
        #: quota resets): the run may then spend nothing (:meth:`allowance`, :meth:`reserve`).
        self.refused: QuotaRefused | None = (
            spending.refusal() if isinstance(spending, LocalSpending) else None
        )
        self.path = path
        self.run_id = run_id or uuid.uuid4().hex
        #: Whether a refresh re-reads a piece from the network (the refresh decides).
        self.rereads = rereads
        self.lock = threading.Lock()
        self.calls = 0
        #: The most this run may spend by what the user chose at the price (the search sets
        #: it at its decision point: nothing is spent past what was chosen, retries, pieces
        #: read again or split included); ``None``: not limited there.
        self.chosen: int | None = None
        #: Set when the run must stop: no attempt is started after it.
        self.stop = threading.Event()
        #: Whether the run's first job has been answered (the next ones go together).
        self.contacted = False
        #: The frontier: the deepest page and the longest request line the vendor answered
        #: in this run (or its stores hold). A request beyond it waits while another one
        #: beyond it is on the wire (:class:`Fetcher`), so a vendor's refusal of a depth
        #: or a length is met once, whatever the workers.
        self.deepest = 1
        self.longest = 0
        #: Whether the result window known is an upper bound only (a refusal deeper than
        #: the next page, in words that state no window): pages up to it stay gated.
        self.window_bound = False
        self._lines: dict[str, int] = {}  # a piece's request line at page 1, by its ring
        #: What the vendor's quota headers allow (:meth:`heard`): the most calls this run
        #: may have spent, the header that said so and the calls left it stated; only ever
        #: lowered. ``None``: no header read.
        self.vendor_cap: tuple[int, str, int] | None = None
        self._answers = 0  # answers read in this run that stated the calls left
        self._failing = 0  # pieces failed by 500s since the last page answered
        client.heard = self.heard

    @property
    def budget(self) -> int | None:
        return self.options.budget

    def heard(self, status: int, headers: Mapping[str, str]) -> None:
        """An answer came (any thread): its quota header, if it sends one, bounds what the
        run may spend: the fewest calls left any answer stated (the vendor's latest count),
        plus the answers with a header read so far (each counted at or before it: answers
        read late, from requests counted earlier, raise the count, never past what the
        header allows). Requests still on the wire count against what is left."""
        found = remaining_calls(headers)
        if found is None or status == 429:  # spike arrest: not counted by the vendor
            return
        left, name = found
        with self.lock:
            self._answers += 1
            least = left if self.vendor_cap is None else min(left, self.vendor_cap[2])
            self.vendor_cap = (self._answers + least, name, least)

    # -- spending (the client calls these around every attempt, through spend_hook) -------

    def reserve(self) -> int:
        """Before every attempt: refuse once stopping or at the budget, else reserve one call
        in the spending store (which refuses it when the key or person has none left)."""
        if self.stop.is_set():
            raise Stopped()
        with self.lock:  # check and count in one critical section: threads race for the last call
            if self.budget is not None and self.calls >= self.budget:
                raise BudgetExhaustedError(
                    budget_reached(self.budget), spent=self.calls, budget=self.budget
                )
            if self.chosen is not None and self.calls >= self.chosen:
                raise BudgetExhaustedError(
                    chosen_reached(self.chosen), spent=self.calls, budget=self.chosen
                )
            if self.vendor_cap is not None and self.calls >= self.vendor_cap[0]:
                raise self._header_stop()
            if self.refused is not None:
                raise QuotaWouldExceedError(
                    f"{self.refused.describe()} (kept in the ledger): no call is sent before "
                    "then. Everything fetched is cached.",
                    needed=1,
                    allowed=0,
                )
            self.calls += 1
        try:
            return self.spending.reserve(self.run_id, self.quota)
        except BaseException:
            with self.lock:
                self.calls -= 1
            raise

    def _header_stop(self) -> BudgetExhaustedError:
        """The run has spent what the vendor's quota header left it (under :attr:`lock`)."""
        assert self.vendor_cap is not None
        cap, name, left = self.vendor_cap
        return BudgetExhaustedError(
            f"stopped before the vendor's refusal: its {name} header said the key had {left} "
            f"call{'' if left == 1 else 's'} left, and this run has spent them. Everything "
            "fetched is cached: search again when the key's quota resets (the same search "
            "resumes without paying again).",
            spent=self.calls,
            budget=cap,
        )

    def refund(self, reservation: int) -> None:
        """Take back a reservation the service did not count (never sent, or refused)."""
        self.spending.refund(reservation)
        with self.lock:
            self.calls -= 1

    def spend_hook(self) -> CallSpend:
        """A request's spend hook: each attempt paced at the key's pacer, reserved in this
        run (its stop, its budget, its count) and refunded here."""
        return CallSpend(self.spending, reserve=self.reserve, refund=self.refund)

    def allowance(self) -> tuple[int | None, str]:
        """Calls this run may still spend, and what limits it (``None``: no limit known)."""
        limits: list[Limit] = list(self.spending.limits(self.quota))
        if self.budget is not None:
            limits.append((max(0, self.budget - self.calls), "budget"))
        if self.vendor_cap is not None:
            limits.append((max(0, self.vendor_cap[0] - self.calls), "vendor header"))
        if self.refused is not None:
            limits.append((0, "vendor refusal"))
        if not limits:
            return None, ""
        return min(limits)

    # -- the frontier gates --------------------------------------------------------------

    def line(self, state: PieceState, page: int) -> int:
        """The request line (bytes) page ``page`` of this piece is sent with."""
        ring = state.piece.polygon_json
        first = self._lines.get(ring)
        if first is None:
            first = self._lines[ring] = self.client.line_bytes(ring, 1, path=self.path)
        base = self.client.page_base
        return first + len(str(page - 1 + base)) - len(str(base))

    def answered(self, state: PieceState, page: int) -> None:
        """The vendor answered page ``page`` of this piece (now or when it was stored): the
        frontier moves out to it."""
        line = self.line(state, page)
        with self.lock:
            self.deepest = max(self.deepest, page)
            self.longest = max(self.longest, line)
            window = self.client.result_window
            if self.window_bound and window is not None and self.deepest >= window:
                self.window_bound = False  # answered as deep as the bound: it is the window

    def window_refused(self, page: int) -> None:
        """The vendor refused page ``page`` as beyond its result window: the window learnt
        is exact when its words stated it, or when ``page`` was the next after the deepest
        answered; else it is an upper bound, and the pages up to it are gated shallowest
        first (a second refusal, if any, is then at the next page: exact)."""
        window = self.client.result_window
        with self.lock:
            self.window_bound = window is not None and page - 1 <= window and window > self.deepest

    def beyond(self, state: PieceState, page: int) -> bool:
        """Whether this request goes beyond the frontier: deeper than any page answered
        (while the result window is not known exactly) or a longer line than any answered.
        Requests that will not be sent (beyond a window or line limit known) are not."""
        client = self.client
        window = client.result_window
        if window is not None and page > 1 and (page > window or (state.pages or 0) > window):
            return False
        line = self.line(state, page)
        if client.max_request_bytes_source == "learnt" and line > client.max_request_bytes:
            return False
        deep = page > self.deepest and (window is None or self.window_bound)
        return deep or line > self.longest

    def frontier(self) -> tuple[Any, ...]:
        """What :meth:`beyond` depends on, to tell when it may answer otherwise."""
        client = self.client
        return (
            self.deepest,
            self.longest,
            self.window_bound,
            client.result_window,
            client.max_request_bytes,
            client.max_request_bytes_source,
            client.page_base,
        )

    def first_beyond(self, held: list[tuple[PieceState, int]]) -> tuple[PieceState, int]:
        """Which of the requests beyond the frontier goes first: the deepest, then the
        longest line (answered, it opens the gate for every other; refused, it teaches what
        the vendor takes); while the window is an upper bound only, the shallowest, of the
        piece with the fewest pages (the likeliest to fit it, so its page is not wasted)."""

        def order(job: tuple[PieceState, int]) -> tuple[int, int, int]:
            state, page = job
            depth = page if page > self.deepest else 0
            if self.window_bound:
                return (-depth, -(state.pages or 0), self.line(state, page))
            return (depth, self.line(state, page), 0)

        return max(held, key=order)

    # -- one page ----------------------------------------------------------------------

    def key(self, piece: Piece, page: int) -> str:
        return _wire.request_key(self.client.base_url, self.path, piece.polygon_json, page)

    def skips_store(self, state: PieceState) -> bool:
        """Whether this piece's pages must come from the network: ``refresh="all"``, a piece
        fetched again, or one a refresh re-reads."""
        return self.options.refresh == "all" or bool(state.refetches) or self.rereads(state)

    def cached(self, state: PieceState, page: int) -> Page | None:
        """The stored page, read once when pricing (never for a piece fetched again)."""
        if self.skips_store(state):
            return None
        hit = self.spending.cached(self.key(state.piece, page), self.options.max_age)
        if (
            hit is not None
            and page > 1
            and self.client.vendor.ids_once is True
            and _contradicting(state, page, hit)
        ):
            return None  # a slipped page an earlier run kept: read again
        if hit is not None:
            self.answered(state, page)
        return hit

    def fetch(self, state: PieceState, page: int) -> tuple[Page, int]:
        """One page not found when priced: claimed (a store shared with other processes may
        have it by now), else fetched from the network and kept."""
        key = self.key(state.piece, page)
        window = self.client.result_window
        if page > 1 and window is not None and (state.pages or 0) > window:
            raise ResultWindowError(  # to be split: none of its later pages is needed
                f"not sent: page {page} of a piece of {state.pages} pages, beyond the {window} "
                "pages the vendor serves a search: the piece is split",
                window=window,
                hints=[Hint("result_window", window)],
            )
        if not self.skips_store(state):
            hit = self.spending.claim(key, self.options.max_age, self.stop)
            if hit is not None:
                return hit, 0
        spend = self.spend_hook()
        try:
            fresh = self.client.search_page(
                state.piece.polygon_json, page, path=self.path, spend=spend, cancel=self.stop
            )
        except (Stopped, Cancelled):
            self.spending.abandon(key)
            raise
        except BaseException as exc:
            alone = piece_failure(exc) or self._failing_alone(exc)
            exc.alone = alone  # type: ignore[attr-defined]  # the fetcher reads it
            if not alone:
                self.stop.set()  # at once, in this thread: no other worker starts one now
            self.spending.abandon(key)
            exc.calls = spend.calls  # type: ignore[attr-defined]  # spent on it all the same
            raise
        self.spending.keep(fresh)
        return fresh, max(1, spend.calls)

    def _failing_alone(self, exc: BaseException) -> bool:
        """Whether a request that kept failing (a 500 through its retries, which an outage's
        502/503/504 are not) fails its piece only: yes while other requests are answered
        between such failures; a second in a row with none answered between is the
        vendor's, not the piece's, and stops the run."""
        if not (isinstance(exc, ServiceFailureError) and exc.status == 500):
            return False
        with self.lock:
            self._failing += 1
            return self._failing <= 1

    def answered_ok(self) -> None:
        """A page was answered (other pieces answer: a failing one fails alone)."""
        with self.lock:
            self._failing = 0

    def page_base(self, state: PieceState) -> int:
        """The vendor's first page number, asked once per base URL (one call, ``page=0`` of
        this piece: a vendor counting from 1 refuses it) and kept in its profile."""
        client = self.client
        with self.lock:
            if client.page_base_known:
                return client.page_base
        spend = self.spend_hook()
        try:
            base = client.probe_page_base(
                state.piece.polygon_json, path=self.path, spend=spend, cancel=self.stop
            )
        finally:
            state.probed(spend.calls)
        client.learn(page_base=base)
        return base

    def read_again(self, state: PieceState, page: int) -> Page:
        """Page ``page`` of a piece from the network once more (kept in no store)."""
        spend = self.spend_hook()
        try:
            return self.client.search_page(
                state.piece.polygon_json, page, path=self.path, spend=spend, cancel=self.stop
            )
        finally:
            state.probed(spend.calls)


class Fetcher:
    """Runs pages on a thread pool; the main thread keeps watch, so interrupts land at once."""

    def __init__(self, run: Run, workers: int, bar: Any) -> None:
        self.run = run
        self.bar = bar
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parcelsearch")
        self.failure: BaseException | None = None
        self.pending: dict[Future[tuple[Page, int]], tuple[PieceState, int]] = {}
        self._gate: Future[tuple[Page, int]] | None = None  # the job crossing the frontier
        self._held = 0  # jobs at the head of the waiting list found beyond ...
        self._frontier: tuple[Any, ...] = ()  # ... this frontier (looked at again once moved)
        #: Facts the client learnt in a worker, said by the watching thread as they come.
        self._learnt: list[LearntFactWarning] = []
        self._ids_read = 0  # GroupIDs read fresh in this run, none twice in a page
        run.client.tell = self._learnt.append

    def fetch(self, jobs: Iterable[tuple[PieceState, int]]) -> None:
        """Fetch every (piece, page) job; pieces whose answer changed are fetched again.

        Frontier gates: the run's first job goes alone, so what the vendor says to it (a
        redirect to learn, a refused key, a retired endpoint, a maintenance page, its page
        size) is said once, not once per worker; after it, a job deeper than any page
        answered, or with a longer request line than any answered, waits while another
        such job is on the wire (:meth:`Run.first_beyond` goes first), so a result window or
        a request-line limit is refused once. Each new frontier is crossed alone once."""
        waiting = list(jobs)
        pending = self.pending
        self._send(waiting)
        while pending:
            done, _ = wait(pending, timeout=_TICK, return_when=FIRST_COMPLETED)
            for future in done:
                state, page = pending.pop(future)
                if future is self._gate:
                    self._gate = None
                self.run.contacted = True
                waiting.extend((state, again) for again in self._settle(future, state, page))
            self._say_learnt()
            if self.failure is not None or self.run.stop.is_set():
                self.abort()
                return
            if done:
                self._send(waiting)

    def _say_learnt(self) -> None:
        """Say the facts learnt since the last look, each on its own line, now (before the
        rest is spent), not when the run ends."""
        while self._learnt:
            self.bar.note(self._learnt.pop(0))

    def _send(self, waiting: list[tuple[PieceState, int]]) -> None:
        """Submit the waiting jobs the gates let through (the rest stay in ``waiting``)."""
        if not waiting:
            return
        run = self.run
        if not run.contacted:
            if not self.pending:  # the run's first request, alone
                self._submit(waiting.pop(0), gate=True)
            return
        frontier = run.frontier()
        looked = self._held if self._gate is not None and frontier == self._frontier else 0
        held = waiting[:looked]  # beyond at the last look, and nothing moved since
        for job in waiting[looked:]:
            if run.beyond(*job):
                held.append(job)
            else:
                self._submit(job)
        if held and self._gate is None:
            first = run.first_beyond(held)
            held.remove(first)
            self._submit(first, gate=True)
        waiting[:] = held
        self._held, self._frontier = len(held), frontier

    def _submit(self, job: tuple[PieceState, int], gate: bool = False) -> None:
        future = self.pool.submit(self.run.fetch, *job)
        self.pending[future] = job
        if gate:
            self._gate = future

    def abort(self) -> None:
        """Stop: nothing starts after this; requests on the wire are kept or abandoned.

        Waits at most the client's response deadline (plus a second) for requests already
        sent; an interrupt while waiting is not caught (a second Ctrl-C exits at once).
        """
        self.run.stop.set()
        for future in self.pending:
            future.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self._drain(self.pending)
        self.pending = {}
        self._gate = None

    def _settle(
        self, future: Future[tuple[Page, int]], state: PieceState, page_no: int
    ) -> list[int]:
        """Record one finished job; returns pages of this piece to fetch again, if any."""
        try:
            page, calls = future.result()
        except (Stopped, Cancelled):
            return []  # not started, or stopped before sending: nothing was spent
        except BaseException as exc:  # noqa: BLE001 - kept, the run stops after it
            state.unanswered(int(getattr(exc, "calls", 0)))
            return self._failed(state, page_no, exc)
        state.fetched(calls)
        if calls:
            self.run.answered_ok()
            self._read_ids(page)
        self.run.answered(state, page_no)
        if page_no == 1 and state.rows is None:
            state.counted(page)
            self._keep(state, page_no, page)
            return state.missing() if state.refetches else []  # fetched again: finish it
        if state.rows is None or state.failure is not None:
            return []  # a page of the answer this piece was fetched again to replace
        if (page.rows, page.pages) != (state.rows, state.pages):
            return [] if self.run.stop.is_set() else self._refetch(state, page)
        if self._overlaps(state, page_no, page):
            return self._check_order(state, page_no, page)
        slipped = self._slipped(state, page_no, page)
        if slipped is not None:
            return self._contradicts(state, slipped)
        self._keep(state, page_no, page)
        return []

    def _contradicts(self, state: PieceState, why: str) -> list[int]:
        """This piece's pages contradict each other (``why``): read whole again from the
        network when some came from a store (an earlier run may have kept a slipped page),
        else it fails: never complete."""
        if state.cached_pages and not state.refetches:
            return self._refetch(state, None, why.split(":")[0])
        state.fail(why)
        log.warning("area %r piece %s failed: %s", state.piece.area_id, state.piece.piece_id, why)
        return []

    def _read_ids(self, page: Page) -> None:
        """What a fresh page teaches of how the vendor lists GroupIDs: twice in one page,
        it lists a condominium's parcels each; none twice in :data:`LISTS_ONCE_AFTER` read,
        it lists each once (kept in its profile either way)."""
        client = self.run.client
        if client.vendor.ids_once is False or not page.data:
            return
        if len(set(page.data)) < len(page.data):
            client.learn(ids_once=False)
            return
        self._ids_read += len(page.data)
        if client.vendor.ids_once is None and self._ids_read >= LISTS_ONCE_AFTER:
            client.learn(ids_once=True)

    def _slipped(self, state: PieceState, page_no: int, page: Page) -> str | None:
        """Why this page contradicts a neighbour (``None``: it does not): it shares the
        GroupID at their boundary, which a vendor listing each GroupID once never does —
        its offset paging slipped over an order that shifted, and GroupIDs are missing."""
        if self.run.client.vendor.ids_once is not True or not page.data:
            return None
        before, after = state.data.get(page_no - 1), state.data.get(page_no + 1)
        if before and before[-1] == page.data[0]:
            lower, upper = page_no - 1, page_no
        elif after and after[0] == page.data[-1]:
            lower, upper = page_no, page_no + 1
        else:
            return None
        return f"page {upper} begins with the last GroupID of page {lower}{SLIPPED}"

    def _failed(self, state: PieceState, page_no: int, exc: BaseException) -> list[int]:
        """A page's final error: the run's (it stops), or this piece's (it fails alone)."""
        if not getattr(exc, "alone", None) and not piece_failure(exc):
            self.failure = self.failure or exc
            self.run.stop.set()
            return []
        stopping = self.run.stop.is_set()  # another failure, told when it settles, is the run's
        if isinstance(exc, ResultWindowError) and page_no > 1 and state.pages is not None:
            if exc.messages:  # the vendor's refusal (pages not sent are not told each)
                self.run.window_refused(page_no)
                log.warning(
                    "area %r piece %s: %s", state.piece.area_id, state.piece.piece_id, exc.message
                )
            return []  # too deep: the search splits the piece (its pages > the window learnt)
        if isinstance(exc, PageGoneError):
            if state.rows is None or stopping:
                return []  # the piece is being read again already, or the run ends
            return self._refetch(state, None, str(exc))
        if (
            not stopping
            and page_no == 1
            and isinstance(exc, BadPolygonError | MalformedResponseError)
            and self._learned_zero(state)
        ):
            return []
        state.fail(getattr(exc, "message", None) or str(exc))
        log.warning(
            "area %r piece %s failed: %s", state.piece.area_id, state.piece.piece_id, state.failure
        )
        return []

    def _learned_zero(self, state: PieceState) -> bool:
        """Whether a suspicious answer came from a vendor that counts pages from 0 (asked
        once per base URL); then the run reads everything again (``PageBaseLearned``)."""
        if self.run.client.page_base_known:
            return False
        try:
            base = self.run.page_base(state)
        except (Stopped, Cancelled):
            return False
        except ParcelSearchError as exc:
            self.failure = self.failure or exc
            self.run.stop.set()
            return True
        if base == 0:
            self.failure = self.failure or PageBaseLearned()
            self.run.stop.set()
            return True
        return False

    @staticmethod
    def _overlaps(state: PieceState, page_no: int, page: Page) -> bool:
        """Whether ``page`` shares GroupIDs with another page of its piece in a way a stable
        order does not explain. One GroupID may hold several parcels (a condominium), and a
        vendor that counts them in ``rows`` and keeps them together in its order may split
        them at a page boundary: the last GroupID of page k is then the first of page k + 1.
        Any other shared GroupID is suspect."""
        ids = set(page.data)
        for other, data in state.data.items():
            common = ids.intersection(data)
            if other == page_no or not common:
                continue
            lower, upper = (data, page.data) if other < page_no else (page.data, data)
            if abs(other - page_no) == 1 and common == {lower[-1]} and upper[0] == lower[-1]:
                continue
            return True
        return False

    def _check_order(self, state: PieceState, page_no: int, page: Page) -> list[int]:
        """Pages of one piece share GroupIDs: a vendor counting from 0 (asked once), else an
        order that is not stable (page 1 read again differs: the piece fails), else real
        duplicates (kept) — unless the vendor lists each GroupID once: then a slipped page
        (:meth:`_contradicts`)."""
        if self._learned_zero(state):
            return []
        try:
            again = self.run.read_again(state, 1)
        except (Stopped, Cancelled):
            return []
        except BaseException as exc:  # noqa: BLE001 - judged like any page's failure
            return self._failed(state, 1, exc)
        if again.data != state.data.get(1):
            state.fail(
                str(
                    UnstableOrderError(
                        "pages of this piece overlap and page 1 read again differs: the vendor's "
                        "order is not stable across pages, so its pages cannot be trusted to hold "
                        "every GroupID"
                    )
                )
            )
            log.warning(
                "area %r piece %s failed: %s",
                state.piece.area_id,
                state.piece.piece_id,
                state.failure,
            )
            return []
        if self.run.client.vendor.ids_once is True:  # no condominium explains it
            return self._contradicts(state, SHARED)
        self._keep(state, page_no, page)
        return []

    def _keep(self, state: PieceState, page_no: int, page: Page) -> None:
        if state.keep(page_no, page):
            self.bar.update(1)

    def _refetch(self, state: PieceState, page: Page | None, gone: str = "") -> list[int]:
        """Pages of one piece came from different answers (or a page promised by page 1 is
        gone): fetch that piece again from page 1, only it."""
        if state.refetches >= MAX_REFETCHES:
            if page is None:
                state.fail(
                    f"{gone}; still so through {MAX_REFETCHES} fresh reads of the "
                    "piece: the vendor's answer keeps changing"
                )
                return []
            self.failure = self.failure or _changing(state, page)
            self.run.stop.set()
            return []
        if page is None:
            log.warning(
                "area %r piece %s: %s; reading this piece again from page 1",
                state.piece.area_id,
                state.piece.piece_id,
                gone,
            )
        else:
            log.warning(
                "area %r piece %s: page %s reports rows=%s, pages=%s but page 1 "
                "reported rows=%s, pages=%s; fetching this piece again",
                state.piece.area_id,
                state.piece.piece_id,
                page.page,
                page.rows,
                page.pages,
                state.rows,
                state.pages,
            )
        self.bar.total += max(1, page.pages if page is not None else state.pages or 1)
        self.bar.refresh()
        state.reset()
        return [1]

    def _drain(self, pending: dict[Future[tuple[Page, int]], tuple[PieceState, int]]) -> None:
        """Keep what requests on the wire bring back (or abandon them after their timeout)."""
        running = {f: job for f, job in pending.items() if not f.cancelled()}
        finished, _ = wait(running, timeout=self.run.client.response_deadline + 1.0)
        for future in finished:
            state, page = running[future]
            self._settle(future, state, page)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self._say_learnt()
        if self.run.client.tell == self._learnt.append:
            self.run.client.tell = None


def _contradicting(state: PieceState, page_no: int, page: Page) -> bool:
    """Whether a stored page shares a GroupID with another page of its piece (against a
    vendor listing each GroupID once, a contradiction)."""
    ids = set(page.data)
    return any(ids.intersection(data) for other, data in state.data.items() if other != page_no)


def _changing(state: PieceState, page: Page) -> ParcelSearchError:
    piece = state.piece
    return ParcelSearchError(
        f"area {piece.area_id!r} piece {piece.piece_id}: page {page.page} reports "
        f"rows={page.rows}, pages={page.pages} but page 1 reported rows={state.rows}, "
        f"pages={state.pages}, through {MAX_REFETCHES} fresh fetches of the piece: the "
        "service's data keep changing. Everything fetched is cached; search again later."
    )
