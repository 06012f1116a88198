"""The search pipeline: plan → price → fetch in two phases → dedupe → frames.

A run spends in two phases, so the price is known before it is paid:

1. **Page 1 of every piece** not already cached. Its cost (one call a piece) is checked
   against the budget and the known quota *before anything is spent*. Where 30 or more
   pieces were never searched, page 1 of a sample of them comes first (the survey,
   :mod:`parcelsearch.planning.survey`): the whole price with its 95 % interval, then the
   decision point (``ask_above``, ``confirm``) before the bulk.
2. **Pages 2..n.** Page 1 told how many pages each piece has, so the exact number of calls
   left is known. It is checked again before spending; a run that cannot finish stops here
   and says the exact calls needed — or, with ``allow_partial``, spends what is allowed on
   finishing whole areas, the cheapest first.

Every stored page is read once, when the phase is priced; every page still missing goes
claim → reserve → pacer → HTTP → checks → settle | refund → keep
(:meth:`parcelsearch._run.fetching.Run.fetch`), through one
:class:`~parcelsearch.stores.spending.Spending`: this machine's ledger and cache by default, a
team's PostgreSQL store with ``team=`` (:func:`parcelsearch.stores.open_store` opens either).
One stop event ends a run, whatever the cause — a failure, an interrupt (Ctrl-C, SIGTERM,
Jupyter's "interrupt kernel"): no attempt starts after it, queued work is cancelled,
back-off sleeps wake at once, requests on the wire finish (and are kept) or are abandoned.
Everything fetched is in the cache, and the partial :class:`~parcelsearch.SearchResult` is
on the raised error's ``.result``.
"""

from __future__ import annotations

import logging
import signal
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import geopandas as gpd

from parcelsearch import notices, stores
from parcelsearch._run import priced_jobs, pricing, refreshing
from parcelsearch._run.deciding import Deciding
from parcelsearch._run.fetching import PageBaseLearned, Run
from parcelsearch._run.options import DEFAULT_WORKERS, SearchOptions, uses_learnt_match
from parcelsearch._run.page_pool import Fetcher
from parcelsearch._run.piece_state import PieceState
from parcelsearch._run.pricing import _calls
from parcelsearch._run.refusals import _areas_failed, _noun_pieces
from parcelsearch._run.search_state import _first_pages, _later_pages
from parcelsearch._run.surveying import Surveying
from parcelsearch.client import Client
from parcelsearch.errors import (
    AreasFailedError,
    BudgetExhaustedError,
    ConfigurationError,
    InputError,
    ParcelSearchError,
    QuotaExhaustedError,
    SearchInterrupted,
)
from parcelsearch.market_list import (
    check_markets,
    check_markets_at_hand,
    markets,
    require_market_column,
)
from parcelsearch.planning import plans as planning
from parcelsearch.planning import reuse as plan_reuse
from parcelsearch.planning.plans import Plan
from parcelsearch.planning.splitting import halves
from parcelsearch.result import SearchResult, skipped_frame
from parcelsearch.stores.history import History
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.quotas import Quota
from parcelsearch.stores.spending import Spending

T = TypeVar("T")
S = TypeVar("S")

__all__ = ["search", "search_with", "DEFAULT_WORKERS"]

_log = logging.getLogger(__name__)


def _skip_inactive(plan: Plan, run: Run, column: str, cache: Any) -> tuple[Plan, gpd.GeoDataFrame]:
    """Drop areas whose market is not active before anything is spent on them (one call)."""
    require_market_column(plan.areas, column)  # before the market list's call
    active = markets(run.client, cache=cache, spend=run.spend_hook())
    checked = check_markets(plan.areas, column, active)
    inactive = checked.index[~checked["market_active"]]
    skipped = skipped_frame(
        plan.areas.loc[inactive],
        reason="market not active",
        market=checked.loc[inactive, column],
        suggestion=checked.loc[inactive, "market_suggestion"],
    )
    return plan.without(inactive), skipped


# -- the function --------------------------------------------------------------------------


def search(
    areas: Any,
    *,
    client: Client | None = None,
    tolerance: float | None = None,
    connectors: bool | None = None,
    match: str | None = None,
    id_column: str | None = None,
    trust_crs: bool = False,
    trust_tolerance: bool = False,
    trust_markets: bool = False,
    budget: int | None = None,
    quota: Quota | str | None = None,
    allow_partial: bool = False,
    ask_above: int | None = None,
    survey_share: float | None = None,
    confirm: bool | Callable[[pricing.Price], bool] = False,
    cache: ResponseCache | bool | None = None,
    ledger: Ledger | bool | None = None,
    max_age: float | str | None = None,
    refresh: bool | str = False,
    verify_sample: float | None = None,
    active_markets_only: bool = False,
    market_column: str = "market",
    progress: bool = True,
    workers: int = DEFAULT_WORKERS,
    plan: Plan | None = None,
    team: str | None = None,
    user: str | None = None,
) -> SearchResult:
    """Every parcel GroupID inside each study area, for the fewest calls.

    Parameters
    ----------
    areas
        GeoDataFrame, GeoSeries or shapely geometry of study areas, in any CRS.
    client
        The :class:`~parcelsearch.Client` to use; default ``Client()`` from the environment.
    tolerance
        0 (default) searches exactly the areas; ``t`` metres lets pieces reach up to ``t``
        outside them in exchange for fewer calls (no parcel inside is ever missed).
    connectors
        True (default): parts of an area (islands) may share a piece through a connector,
        as ``match`` allows (see :func:`parcelsearch.plan`). False: never.
    match
        How the vendor matches parcels: ``"unknown"`` (default: ``$PARCELSEARCH_MATCH``
        when set), ``"intersects"`` or ``"representative-point"``. Under the first two no
        piece reaches beyond ``tolerance`` anywhere; under the point rule a connector's
        sliver (a link up to 3 km long, which may cross land outside the area) may match
        parcels whose point lies in it (see :func:`parcelsearch.plan`). Neither given, the
        rule :func:`parcelsearch.rule_probe.learn_match_rule` learnt for the client's
        service, if any. Recorded in ``result.metadata["match"]``.
    id_column
        Column identifying areas (default: an ``area_id`` column, else the index; see
        :func:`parcelsearch.planning.areas.validate_areas`).
    trust_crs
        False (default): areas implausible for their declared CRS (coordinates that look
        like degrees in a projected CRS, areas outside the region the CRS is meant for,
        areas in a declared CRS more than 50 km from any land) are refused
        before anything is planned or spent. True: taken as declared.
    trust_tolerance
        False (default): a tolerance over half the widest area's width, or over
        5,000 m, is refused before anything is planned or spent. True: taken.
    trust_markets
        False (default): when the market list is in the cache (never fetched for this),
        areas more than 50 km from every US state with an active market are refused before
        any call. True: searched all the same.
    budget
        At most this many calls in this run, retries included.
    quota
        The key's quota if known (``"demo"``, ``"production"``, ``"500/month"``,
        ``"50/lifetime"``; default ``PARCELSEARCH_QUOTA``). The ledger beside the cache counts
        what this machine has spent with the key.
    allow_partial
        When the run cannot finish within the budget or quota, spend what is allowed on
        finishing whole areas, the cheapest first, and return that partial result
        (``result.complete`` is ``False``) with a
        ``parcelsearch.notices.PartialResultWarning`` naming what is missing and how
        to resume, instead of raising.
    ask_above
        The decision point: when the price (after the survey, before the bulk) leaves more
        than this many calls to spend at its interval's top, the search stops there with
        :class:`~parcelsearch.PriceNotConfirmedError` naming the price and its
        interval, unless ``confirm=True`` or a ``budget`` covers the interval's top.
        Default ``PARCELSEARCH_ASK_ABOVE``, else 100 (a fifth of a 500-call month).
        Nothing is spent past what was chosen there — the interval's top confirmed, or,
        when nothing was asked, this many calls past what was spent —: when the exact
        price after page 1 of every piece is above it, the search stops before spending
        past it and asks again (``confirm``, else the same error with the new figures).
    survey_share
        The survey before the decision point (page 1 of a sample of the pieces never
        searched, the search's own pages) spends at most this share of the least the search
        can cost for sure: default 0.1, a tenth; at most 1. When it stops there with the
        interval wider than ±20 %, the price says which share would narrow it to about that.
    confirm
        ``True``: go past the decision point without asking (nothing is ever asked on
        stdin). A callable is given the :class:`~parcelsearch.Price` and says
        yes or no (the command line asks on a terminal this way).
    cache, ledger
        Response cache and quota ledger: ``None`` for the defaults (in the client's cache
        folder), ``False`` to go without, or an instance.
    max_age
        Ignore cached pages older than this: seconds, or a text with a unit (``"30d"``,
        ``"12h"``, ``"90m"``); default ``PARCELSEARCH_MAX_AGE``, else any age. How old the
        oldest page served is, is in ``result.metadata["oldest_page_fetched_at"]``; pages
        over a day old give an :class:`~parcelsearch.notices.OldPagesWarning`.
    refresh
        ``False`` (default): reuse cached pages. ``True`` or ``"all"``: ignore them, fetch
        every page again. ``"changed"``: re-read page 1 of every piece (one call each, priced
        before spending); a piece whose ``rows`` or page 1 differ from its last complete run
        (the run history, else the cache) is *changed* and fetches its other pages again;
        the others keep their cached pages, *unchanged by inference* (``tiles.status``).
    verify_sample
        With ``refresh="changed"``: the fraction (default 0: none, so a refresh with no
        change spends exactly one call per piece; opt in with e.g. 0.05, priced before
        spending) of the pieces inferred unchanged whose other pages are re-read anyway;
        how many had changed gives ``result.verification``: an estimate, with a 95 %
        interval, of the changed pieces the inference missed. Dropped first when phase 2
        does not fit the budget or quota.
    active_markets_only, market_column
        Skip, before spending on them, areas whose ``market_column`` is not an active market
        (the market list costs one call, then is cached for a day).
    progress
        Show a tqdm progress bar (its total becomes exact after phase 1 and never shrinks),
        and above it the price before spending (:mod:`parcelsearch._run.pricing`): page 1
        exactly, the later pages estimated from the run history, then exact after phase 1.
    workers
        Threads sending requests (all paced by the client's one pacer).
    plan
        A plan made earlier with :func:`parcelsearch.plan` (then ``areas`` may be ``None``).
        ``tolerance``, ``connectors``, ``match`` and ``id_column`` are then the plan's:
        given as well and different, they raise an error naming both.
        Without one, the areas are planned, and each area an earlier search with the same
        cache folder searched (the same id, in any CRS: matched once reprojected to
        EPSG:4326, vertex by vertex within 1.5 request-grid steps) with the same settings
        gets its pieces again, so its cached pages serve this search
        (:mod:`parcelsearch.planning.reuse`).
    team
        A team store (``postgresql://…``, made with ``parcelsearch team init``; default
        ``PARCELSEARCH_TEAM``): the key's calls are reserved, paced and counted there for
        every member on every machine, pages fetched by any member are reused by all, and
        the key's quota and each member's budget stored there are enforced before spending.
    user
        Who is running the search in the team (default ``PARCELSEARCH_USER``, else the
        login name).

    Returns
    -------
    SearchResult
        ``ids``, ``tiles``, ``summary()``, ``zoning_cost()``, ``metadata``.

    Raises
    ------
    QuotaWouldExceedError
        The run cannot finish within the budget or the known quota. Raised before anything
        is spent when page 1 of every piece does not fit, or when the whole price,
        estimated from the run history (every piece searched before), does not; raised
        after phase 1 (with the exact calls needed to finish) when the later pages do not
        fit. ``.result`` holds
        what was fetched; with ``allow_partial=True`` the whole areas that fit are finished
        and returned instead (``result.complete`` is ``False``).
        Also raised after the survey when its estimate does not fit.
    PriceNotConfirmedError
        The decision point: the price leaves more than ``ask_above`` calls to spend and
        neither ``confirm`` nor a budget covering it said to go on; or the exact price
        after page 1 of every piece passed what was chosen; ``.result`` holds the pages
        fetched (cached), ``.price`` the price asked about.
    BudgetExhaustedError
        Retries used up the budget mid-run; ``.result`` holds what was fetched (with
        ``allow_partial=True`` the result is returned instead, with a warning).
    SearchInterrupted
        Ctrl-C, SIGTERM or a kernel interrupt: no request started after it; ``.result``
        holds what was fetched (all of it cached). A second interrupt is not caught.

    Notes
    -----
    *Guaranteed:* no call is sent beyond ``budget`` or the known ``quota`` (the ledger
    refuses it before sending); every page fetched is cached before it is counted as done,
    so rerunning the same search resumes without spending those calls again.

    Examples
    --------
    >>> import parcelsearch
    >>> result = parcelsearch.search(areas)  # doctest: +SKIP
    >>> result.ids.head()  # doctest: +SKIP
    """
    # The keywords above that are options, each by name (a test holds them to SearchOptions'
    # fields and checks that each reaches them):
    given: dict[str, Any] = {
        "tolerance": tolerance,
        "connectors": connectors,
        "match": match,
        "id_column": id_column,
        "trust_crs": trust_crs,
        "trust_tolerance": trust_tolerance,
        "trust_markets": trust_markets,
        "budget": budget,
        "quota": quota,
        "allow_partial": allow_partial,
        "ask_above": ask_above,
        "survey_share": survey_share,
        "confirm": confirm,
        "max_age": max_age,
        "refresh": refresh,
        "verify_sample": verify_sample,
        "active_markets_only": active_markets_only,
        "market_column": market_column,
        "progress": progress,
        "workers": workers,
        "team": team,
        "user": user,
    }
    if plan is None and uses_learnt_match(match):
        from parcelsearch.rule_probe import rule_for  # learnt for this service

        client = client if client is not None else Client()
        given["match"] = rule_for(vendor=client.vendor)[0]  # as the client resolved it
    options = SearchOptions.resolve(plan, **given)
    client = client if client is not None else Client()
    cache_obj = _store(cache, ResponseCache, lambda: ResponseCache(client.cache_dir))

    def planned() -> Plan:  # to the request-line limit set, learnt or 7,168
        return plan_reuse.reuse(
            planning.plan(
                areas,
                options.tolerance,
                id_column=options.id_column,
                connectors=options.connectors,
                match=options.match,
                trust_crs=options.trust_crs,
                trust_tolerance=options.trust_tolerance,
                max_request_bytes=client.max_request_bytes,
            ),
            cache_obj.directory if cache_obj is not None else None,
        )

    chosen = plan if plan is not None else planned()
    if not options.trust_markets and cache_obj is not None:
        check_markets_at_hand(chosen.areas, client.base_url, cache_obj.directory)
    markets_cache = cache_obj.directory if cache_obj is not None else False
    opened = stores.open_store(
        options.team,
        client.fingerprint,
        member=options.user or "",
        cache=cache_obj,
        ledger=_store(ledger, Ledger, lambda: Ledger.in_folder(client.cache_dir)),
        workers=options.workers,
    )
    try:
        try:
            return search_with(
                chosen,
                client,
                opened.spending,
                options,
                markets_cache=markets_cache,
                history=opened.history,
            )
        except AreasFailedError:
            if plan is not None or client.max_request_bytes >= chosen.max_request_bytes:
                raise
        # the gateway refused a line and taught a shorter limit: plan again to it, once
        _log.warning(
            "the gateway at %s takes request lines of at most %s bytes: the areas "
            "planned again to it",
            client.base_url,
            f"{client.max_request_bytes:,}",
        )
        return search_with(
            planned(),
            client,
            opened.spending,
            options,
            markets_cache=markets_cache,
            history=opened.history,
        )
    finally:
        opened.spending.close()


def _store(given: S | bool | None, kind: type[S], default: Callable[[], S]) -> S | None:
    """A store argument (``cache``, ``ledger``) as the store: ``None`` or ``True`` the default
    one (beside the client's cache folder), ``False`` none, else the instance given.
    (An empty ResponseCache is falsy, so test identity and type, never truth.)"""
    if isinstance(given, kind):
        return given
    return None if given is False else default()


def search_with(
    plan: Plan,
    client: Client,
    spending: Spending,
    options: SearchOptions,
    *,
    markets_cache: Any = None,
    history: History | None = None,
) -> SearchResult:
    """Run a plan through any :class:`~parcelsearch.stores.spending.Spending` (what :func:`search`
    does once it has chosen one; tests pass one in memory).

    ``markets_cache`` is where the market list is kept (see :func:`parcelsearch.markets`);
    ``history`` is where the run is recorded (and where ``refresh="changed"`` learns what
    each piece looked like last time).
    """
    refresh = refreshing.RunRefresh(
        options.refresh,
        options.verify_sample,
        history,
        base_url=client.base_url,
        path=plan.path,
        run_id=uuid.uuid4().hex,
    )
    run = Run(
        client, spending, options, path=plan.path, run_id=refresh.run_id, rereads=refresh.rereads
    )
    return _Search(run, plan, markets_cache, refresh).execute()


class _Search(Surveying, Deciding):
    """One call of :func:`search`: the phases, the stop, and what is left when it ends."""

    def execute(self) -> SearchResult:
        options = self.options
        # One bar per phase, each made with its total known (see _run.progress).
        bar = self.progress
        fetcher = Fetcher(self.run_state, options.workers, bar)
        try:
            if options.active_markets_only:
                self.plan, self.skipped = _skip_inactive(
                    self.plan, self.run_state, options.market_column, self.markets_cache
                )
                kept = set(self.plan.areas.index)
                self.states = [s for s in self.states if s.piece.area_id in kept]
            self._phases(fetcher, bar)
            while isinstance(fetcher.failure, PageBaseLearned):
                fetcher = self._read_again_from_zero(fetcher, bar)
        except (InputError, ConfigurationError):
            raise  # what the user gave is wrong: no run to report
        except ParcelSearchError as error:  # every stop carries what the run has (maybe nothing)
            if error.result is None:
                error.result = self._result(stopping=True)
            raise
        except KeyboardInterrupt as interrupt:
            fetcher.abort()
            signum = int(getattr(interrupt, "signum", signal.SIGINT))
            raise SearchInterrupted(
                f"{signal.Signals(signum).name} received: no request was started after it; "
                f"{_calls(self.run_state.calls)} spent, everything fetched is cached and "
                "running the same search again resumes from it.",
                signum=signum,
                result=self._result(stopping=True),
            ) from None
        finally:
            fetcher.close()
            bar.close()
        failure = fetcher.failure
        if failure is not None:
            if isinstance(failure, BudgetExhaustedError):
                failure.spent = self.run_state.calls  # the run's, not the one refused attempt's
            if isinstance(failure, ParcelSearchError):
                failure.result = self._result(stopping=True)
            if isinstance(failure, QuotaExhaustedError):
                failure.message += self._still_needed(failure.result)
                self._remember_refusal()
            if isinstance(failure, BudgetExhaustedError) and options.allow_partial:
                return self._partial(failure)
            raise failure
        result = self._result()
        failed = {s.piece.area_id: s.failure for s in self.states if s.failure is not None}
        if failed:
            raise _areas_failed(failed, result, len(self.plan.areas))
        if self.limited is not None and not result.complete:
            return self._partial(self._partial_stop(result))
        for notice in (result.nothing_matched_warning(), result.old_pages_warning()):
            if notice is not None:
                notices.warn(notice)
        return result

    def _read_again_from_zero(self, fetcher: Fetcher, bar: Any) -> Fetcher:
        """The vendor counts pages from 0 (learned once, kept in its profile): every page
        read so far was read under the wrong number, so every piece is read again."""
        fetcher.close()
        _log.warning(
            "the vendor at %s numbers its pages from 0: reading every piece again",
            self.run_state.client.base_url,
        )
        self.run_state.stop.clear()
        for state in self.states:
            state.start_over()  # fetched again: never from a store
        fresh = Fetcher(self.run_state, self.options.workers, bar)
        self._phases(fresh, bar)
        return fresh

    def _phases(self, fetcher: Fetcher, bar: Any) -> None:
        run = self.run_state
        # Phase 1: page 1 of every piece not cached — priced before anything is spent.
        # (What may be spent is read before what is stored: pages others pay for meanwhile
        # then lower the price, never only the allowance.)
        allowance = run.allowance()
        self.refresh.start(self.states, run.cached)
        todo = _first_pages(self.states, run)
        previous = {id(s): self.refresh.check(s).previous for s in todo}
        surveys = self.refresh.mode != "changed"
        known_later = (
            len(_later_pages([s for s in self.states if s.pages is not None], run))
            if surveys
            else 0
        )
        self.price = pricing.estimate(
            [(None, previous[id(s)]) for s in todo],
            mode=self.refresh.mode,
            fraction=self.refresh.fraction,
            known_later=known_later,
            cached_later=0 if surveys else sum(1 for s in self.states if (s.pages or 0) > 1),
        )
        self._say_price()
        if run.refused is not None:  # the vendor's refusal kept: 0 left until the reset
            self._say(self._quota_line())
        todo = self._affordable(todo, lambda s: s.piece.area_id, allowance, spent_first=False)
        unknown = [s for s in todo if previous[id(s)] is None] if surveys else []
        job = self._job_key()
        priced = priced_jobs.recall(job, self.options.survey_share) if surveys else None
        if priced is not None:  # price() priced this job: its figures, asked at once
            self.price, self.before = priced, priced.spent
            self._say("priced before (no call now):")
            self._say_price()
            quota = self._quota_line()
            if quota:
                self._say(quota)
        elif unknown:
            self._survey(fetcher, unknown, todo, previous)
            if fetcher.failure is not None or run.stop.is_set():
                return
        self._decide()
        priced_jobs.forget(job)  # decided: the job's price is spent from now on
        rest = [s for s in todo if s.pages is None and s.failure is None]
        if rest:
            self.progress.start("page 1", len(rest))
            fetcher.fetch((state, 1) for state in rest)
        if fetcher.failure is not None or run.stop.is_set():
            return
        self._split_deep(fetcher)  # pieces with more pages than the vendor's result window
        if fetcher.failure is not None or run.stop.is_set():
            return
        # Phase 2: the exact price of the rest is known now.
        self.refresh.decide(self.states)
        states = self._wanted(self.states)
        allowance = run.allowance()
        jobs = _later_pages(states, run)
        allowed, what = allowance
        if (
            allowed is not None
            and len(jobs) > allowed
            and self.refresh.shrink_sample(states, f"phase 2 did not fit the {what} with it")
        ):
            jobs = _later_pages(states, run)  # the sampled pieces' pages from the cache
        said = self.price.line() if self.price is not None else ""
        self.price = pricing.exact_rest(len(jobs), self.before + run.calls)
        if self.price.line() != said:  # after a census it was said already
            self._say_price()
        jobs = self._affordable(jobs, lambda job: job[0].piece.area_id, allowance, spent_first=True)
        self._ask_again(pricing.exact_rest(len(jobs), self.before + run.calls))
        self.progress.start(
            "search",
            sum(max(1, s.pages or 1) for s in self._wanted(states)),
            sum(len(s.data) for s in self._wanted(states)),
        )
        fetcher.fetch(jobs)
        # Pieces fetched again because their answer changed, and pieces split because the
        # vendor refused a page beyond its result window: finish them too.
        while fetcher.failure is None and not run.stop.is_set():
            split = {id(s) for s in self._split_deep(fetcher)}
            again = [
                (s, k)
                for s in self._wanted(self.states)
                if (s.refetches or id(s) in split) and not s.done
                for k in s.missing()
            ]
            if not again:
                break
            fetcher.fetch(again)

    def _split_deep(self, fetcher: Fetcher) -> list[PieceState]:
        """Cut each wanted piece whose page 1 says more pages than the vendor's result window
        (:func:`parcelsearch.planning.splitting.halves`), and read the new pieces' page 1s
        (from the cache when there), again until every piece fits; returns the new pieces.
        A piece too narrow to cut fails, in the vendor's terms."""
        run = self.run_state
        made: list[PieceState] = []
        while fetcher.failure is None and not run.stop.is_set():
            window = run.client.result_window
            deep = [
                s
                for s in self._wanted(self.states)
                if window is not None
                and not s.split
                and s.failure is None
                and (s.pages or 0) > window
            ]
            if not deep or window is None:
                return made
            fresh: list[PieceState] = []
            for state in deep:
                fresh.extend(self._halved(state, window))
            _log.warning(
                "the vendor at %s serves a search %s pages deep at most: %s split into %s",
                run.client.base_url,
                window,
                _noun_pieces(len(deep)),
                _noun_pieces(len(fresh)),
            )
            self.states.extend(fresh)
            made.extend(fresh)
            self.progress.total += len(fresh)  # their page 1s
            todo = _first_pages(fresh, run)
            if todo:
                fetcher.fetch((state, 1) for state in todo)
        return made

    def _halved(self, state: PieceState, window: int) -> list[PieceState]:
        """The new pieces of ``state`` cut in two (it is marked split), or none when it is
        too narrow to cut (it fails)."""
        piece = state.piece
        first = 1 + max(s.piece.piece_id for s in self.states if s.piece.area_id == piece.area_id)
        pieces = halves(
            piece,
            max_request_bytes=self.plan.max_request_bytes,
            path=self.plan.path,
            first_id=first,
        )
        if not pieces:
            state.fail(
                f"{state.pages} pages, beyond the {window} pages the vendor serves a "
                "search, and the piece is too narrow to split"
            )
            return []
        state.cut()
        return [PieceState(p) for p in pieces]
