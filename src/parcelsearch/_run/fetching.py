"""Fetching pages for one run: what each piece has, how each call is spent, and the stop.

:class:`Run` is what the worker threads share: the client, the spending (ledger, pacer and
page store behind one :class:`~parcelsearch.stores.spending.Spending`), the options, the calls
spent (the run's budget is enforced here and only here), and the stop event.
:class:`~parcelsearch._run.page_pool.Fetcher` runs (piece, page) jobs on a thread pool
(:mod:`parcelsearch._run.page_pool`); a piece's state is
:class:`~parcelsearch._run.piece_state.PieceState`, the frontier gates
:class:`~parcelsearch._run.frontier.FrontierGates`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping

from parcelsearch import _wire
from parcelsearch._fetch.pacing import Cancelled
from parcelsearch._fetch.page import Page
from parcelsearch._fetch.retries import remaining_calls
from parcelsearch._run.frontier import FrontierGates
from parcelsearch._run.options import SearchOptions
from parcelsearch._run.piece_state import PieceState
from parcelsearch.client import Client
from parcelsearch.errors import (
    AuthenticationError,
    BudgetExhaustedError,
    CutBodyError,
    EndpointGoneError,
    Hint,
    MalformedResponseError,
    QuotaExhaustedError,
    QuotaWouldExceedError,
    RateLimitError,
    RequestTooLargeError,
    ResultWindowError,
    ServiceError,
    ServiceFailureError,
)
from parcelsearch.planning.plans import Piece
from parcelsearch.stores.local.spending import LocalSpending
from parcelsearch.stores.quotas import Quota, QuotaRefused, budget_reached
from parcelsearch.stores.spending import CallSpend, Limit, Spending

__all__ = [
    "Run",
    "Stopped",
    "MAX_REFETCHES",
    "PageBaseLearned",
    "piece_failure",
]

log = logging.getLogger(__name__)

#: How often one piece may be fetched again because its pages came from different answers.
MAX_REFETCHES = 2


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


def chosen_reached(chosen: int) -> str:
    """The stop at the calls the user chose at the price."""
    return (
        f"stopped at the {chosen:,} calls this run may spend by what was chosen at the "
        "price: nothing is spent past what you chose. Everything fetched is cached: "
        "running the same search again asks before spending the rest."
    )


class Run(FrontierGates):
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
        #: beyond it is on the wire (:class:`~parcelsearch._run.page_pool.Fetcher`), so a
        #: vendor's refusal of a depth or a length is met once, whatever the workers.
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


def _contradicting(state: PieceState, page_no: int, page: Page) -> bool:
    """Whether a stored page shares a GroupID with another page of its piece (against a
    vendor listing each GroupID once, a contradiction)."""
    ids = set(page.data)
    return any(ids.intersection(data) for other, data in state.data.items() if other != page_no)
