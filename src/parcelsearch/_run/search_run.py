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

import dataclasses
import hashlib
import json
import logging
import math
import signal
import sqlite3
import uuid
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import geopandas as gpd
import pandas as pd
import shapely
import shapely.prepared

from parcelsearch import notices, stores
from parcelsearch._run import density, priced_jobs, pricing, refreshing
from parcelsearch._run.fetching import Fetcher, PageBaseLearned, PieceState, Run
from parcelsearch._run.options import DEFAULT_WORKERS, SearchOptions, uses_learnt_match
from parcelsearch._run.progress import Progress
from parcelsearch._shared import next_month_start
from parcelsearch.client import Client
from parcelsearch.errors import (
    AreasFailedError,
    BudgetError,
    BudgetExhaustedError,
    ConfigurationError,
    Hint,
    InputError,
    ParcelSearchError,
    PriceNotConfirmedError,
    QuotaExhaustedError,
    QuotaWouldExceedError,
    SearchInterrupted,
    TeamStoreError,
)
from parcelsearch.market_list import (
    check_markets,
    check_markets_at_hand,
    markets,
    require_market_column,
)
from parcelsearch.planning import plans as planning
from parcelsearch.planning import reuse as plan_reuse
from parcelsearch.planning import survey
from parcelsearch.planning.plans import Plan, suggest_tolerance, suggests_at_once
from parcelsearch.planning.population import people_in
from parcelsearch.planning.splitting import halves
from parcelsearch.result import SearchResult, skipped_frame
from parcelsearch.stores.history import History
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.local.spending import LocalSpending
from parcelsearch.stores.quotas import Quota
from parcelsearch.stores.spending import Spending

T = TypeVar("T")
S = TypeVar("S")

__all__ = ["search", "search_with", "price", "DEFAULT_WORKERS"]

_log = logging.getLogger(__name__)


def _first_pages(states: list[PieceState], run: Run) -> list[PieceState]:
    """Read stored page 1s; returns the pieces whose page 1 must be fetched."""
    todo = []
    for state in states:
        hit = run.cached(state, 1)
        if hit is None:
            todo.append(state)
            continue
        state.stored(1, hit)
    return todo


def _later_pages(states: list[PieceState], run: Run) -> list[tuple[PieceState, int]]:
    """Read stored pages 2..n; returns the (piece, page) jobs that must be fetched."""
    jobs = []
    for state in states:
        if state.pages is None:
            continue
        for k in state.missing():
            hit = run.cached(state, k)
            if hit is not None and (hit.rows, hit.pages) == (state.rows, state.pages):
                state.stored(k, hit)
            else:
                jobs.append((state, k))
    return jobs


def _by_area(items: Iterable[Any], area_of: Any) -> dict[Hashable, list[Any]]:
    grouped: dict[Hashable, list[Any]] = {}
    for item in items:
        grouped.setdefault(area_of(item), []).append(item)
    return grouped


def _cheapest_whole_areas(costs: dict[Hashable, int], allowed: int) -> set[Hashable]:
    """Areas to finish within ``allowed`` calls: the cheapest first, whole areas only."""
    chosen: set[Hashable] = set()
    left = allowed
    for area, cost in sorted(costs.items(), key=lambda item: (item[1], str(item[0]))):
        if cost <= left:
            chosen.add(area)
            left -= cost
    return chosen


# -- messages -------------------------------------------------------------------------------


def _noun(n: int) -> str:
    return "call" if n == 1 else "calls"


def _calls(n: int) -> str:
    return f"{n:,} {_noun(n)}"


def _noun_pieces(n: int) -> str:
    return f"{n:,} piece" + ("" if n == 1 else "s")


def _areas(n: int) -> str:
    return f"{n} area is" if n == 1 else f"{n} areas are"


def _limit_text(run: Run, what: str, allowed: int) -> str:
    if what == "budget":
        return f"the budget allows {allowed:,} more"
    if what == "user budget":
        return f"{run.options.user}'s team budget allows {allowed:,} more"
    if what == "vendor header" and run.vendor_cap is not None:
        return f"the vendor's {run.vendor_cap[1]} header leaves the key {allowed:,} more"
    if what == "vendor refusal" and run.refused is not None:
        return f"{run.refused.describe()} (kept in the ledger)"
    quota = run.spending.stored_quota() if what == "team quota" else run.quota
    assert quota is not None
    text = f"the key has {allowed:,} left of its quota ({quota.describe()})"
    if quota.period == "month":
        reset = next_month_start(pd.Timestamp.now(tz="UTC").to_pydatetime())
        text += f", which resets on {reset:%Y-%m-%d} 00:00 UTC"
    else:
        text += ", which never resets"
    return text


def _refusal(
    run: Run,
    plan: Plan,
    needed: int,
    allowed: int,
    what: str,
    *,
    spent_first: bool,
    price: pricing.Price | None = None,
) -> QuotaWouldExceedError:
    """The error of a run that cannot finish within what it is allowed; ``price`` (the
    whole run's, as far as it is known) is named in full."""
    if spent_first:
        head = (
            f"this search needs exactly {needed:,} more {_noun(needed)} to finish "
            f"(exactly {_calls(needed + run.calls)} in all), but "
            f"{_limit_text(run, what, allowed)}; stopped before spending them (page 1 of "
            "every piece is fetched and cached)."
        )
    else:
        price = price or pricing.Price(first=needed, later=0, known="lower", pieces=needed)
        head = (
            f"this search needs {price.refusal()}, but "
            f"{_limit_text(run, what, allowed)}; nothing was spent."
        )
    hints: list[Hint] = []
    areas = len(plan.areas)
    if not spent_first and 0 < allowed < areas:  # no tolerance can help: say so, suggest none
        head += (
            f" Each area needs at least one call whatever the tolerance: {areas} areas "
            f"need at least {_calls(areas)}."
        )
    elif not spent_first and allowed < plan.min_calls:
        if suggests_at_once(plan):
            suggested = suggest_tolerance(plan, allowed)  # reuses what the refused plan made
            if suggested is not None and suggested > plan.tolerance:
                hints.append(
                    Hint("tolerance", f"{suggested:g}", "try {knob} (metres), whose plan fits")
                )
        else:  # large areas: a suggestion would cost more than the plan did
            hints.append(
                Hint(
                    "max_calls", allowed, "find the smallest tolerance whose plan fits with {knob}"
                )
            )
    if what == "budget":
        hints.append(
            Hint(
                "budget",
                needed + run.calls
                if spent_first
                else max(needed, price.needed if price is not None else 0),
                "raise {knob}",
            )
        )
    hints.append(Hint("allow_partial", None, "pass {knob} to finish the areas that fit"))
    return QuotaWouldExceedError(head, needed=needed, allowed=allowed, hints=hints, price=price)


def _areas_failed(
    failed: dict[Hashable, str], result: SearchResult, areas: int
) -> AreasFailedError:
    """The error of a run whose other areas finished but these failed (one piece each)."""
    named = "; ".join(f"area {area!r}: {why}" for area, why in list(failed.items())[:5])
    more = f" … and {len(failed) - 5} more" if len(failed) > 5 else ""
    return AreasFailedError(
        f"{len(failed)} of {areas} areas failed ({named}{more}); the other areas are "
        "complete. Everything fetched is cached: running the same search again pays only "
        "for what is missing.",
        failures=dict(failed),
        result=result,
    )


def _learnt_text(learnt: density.Learnt | None) -> str:
    """``" (the other 40 priced from 54 earlier pieces nearby)"``, or nothing."""
    if learnt is None:
        return ""
    return f" (the other {learnt.pieces:,} priced from {learnt.earlier:,} earlier pieces nearby)"


def _with_learnt(estimate: survey.Estimate, learnt: density.Learnt) -> survey.Estimate:
    """The survey's estimate and the learnt one together (independent: the half-widths
    add in quadrature)."""
    value = estimate.value + learnt.value
    half = math.hypot(estimate.value - estimate.low, learnt.value - learnt.low)
    above = math.hypot(estimate.high - estimate.value, learnt.high - learnt.value)
    # One call at least a piece; a census's part is exact.
    floor = learnt.pieces + (
        estimate.value if estimate.surveyed == estimate.pieces else estimate.pieces
    )
    return survey.Estimate(
        value=value,
        low=max(floor, math.floor(value - half)),
        high=max(floor, math.ceil(value + above)),
        surveyed=estimate.surveyed,
        pieces=estimate.pieces + learnt.pieces,
        measure=estimate.measure,
    )


# -- frames ---------------------------------------------------------------------------------


def _frames(plan: Plan, states: list[PieceState]) -> tuple[pd.DataFrame, gpd.GeoDataFrame]:
    """Deduplicate (area id, group_id) once, and tabulate the tiles sent."""
    id_name = plan.id_name
    areas: list[Hashable] = []
    groups: list[str] = []
    rows = []
    for state in states:
        piece = state.piece
        for data in state.data.values():
            areas.extend([piece.area_id] * len(data))
            groups.extend(data)
        rows.append(
            {
                id_name: piece.area_id,
                "piece_id": piece.piece_id,
                "rows": state.rows,
                "pages": state.pages,
                "pages_fetched": len(state.data),
                "calls": state.calls,
                "cached_pages": state.cached_pages,
                "from_cache": bool(state.data) and state.calls == 0,
                "geometry": piece.geometry,
            }
        )
    id_values = pd.Series(areas, dtype=plan.areas.index.dtype if areas else object)
    ids = (
        pd.DataFrame({id_name: id_values, "group_id": pd.Series(groups, dtype="string")})
        .drop_duplicates()
        .sort_values([id_name, "group_id"], kind="stable")
        .reset_index(drop=True)
    )
    shared = _found_in_shared_band(plan, states, ids)
    if plan.tolerance > 0:
        ids["may_lie_outside"] = _may_lie_outside(plan, states, ids) | shared
    elif shared.any():
        ids["may_lie_outside"] = shared
    columns = [
        id_name,
        "piece_id",
        "rows",
        "pages",
        "pages_fetched",
        "calls",
        "cached_pages",
        "from_cache",
        "geometry",
    ]
    tiles = gpd.GeoDataFrame(
        pd.DataFrame(rows, columns=columns), geometry="geometry", crs="EPSG:4326"
    )
    for column in ("rows", "pages"):
        tiles[column] = tiles[column].astype("Int64")
    for column in ("piece_id", "pages_fetched", "calls", "cached_pages"):
        tiles[column] = tiles[column].astype("int64")
    tiles["from_cache"] = tiles["from_cache"].astype(bool)
    return ids, tiles


#: How far (degrees) a piece may reach beyond its area and still count as inside it: the
#: exact pieces' allowance (two 6-decimal grid steps) and a half.
_INSIDE_REACH = 2.5e-6


def _may_lie_outside(plan: Plan, states: list[PieceState], ids: pd.DataFrame) -> pd.Series:
    """With a tolerance: for each (area, GroupID), whether every piece that found it reaches
    beyond its area (so its parcel may lie up to the tolerance outside); False when a piece
    within the area found it. The search answers GroupIDs, not positions: a True is "may".
    """
    inside: set[tuple[Hashable, str]] = set()
    grown: dict[Hashable, Any] = {}
    for state in states:
        piece = state.piece
        if not state.data:
            continue
        if piece.area_id not in grown:
            grown[piece.area_id] = shapely.prepared.prep(
                plan.areas.geometry.loc[piece.area_id].buffer(_INSIDE_REACH)
            )
        if grown[piece.area_id].contains(piece.geometry):
            inside.update((piece.area_id, g) for data in state.data.values() for g in data)
    keys = zip(ids[plan.id_name], ids["group_id"].astype(str), strict=True)
    return pd.Series([k not in inside for k in keys], index=ids.index, dtype=bool)


def _found_in_shared_band(plan: Plan, states: list[PieceState], ids: pd.DataFrame) -> pd.Series:
    """For each (area, GroupID): True when the GroupID is listed for another area too and
    the pieces that found it do not meet wholly inside this area.

    Under the point rule a parcel's point lies in every piece that found it, so one listed
    for an area it lies beyond (in the band its pieces reach past the boundary, at most two
    grid steps) and for a neighbour is always marked. A True is "may": a parcel a
    millimetre inside is marked too, as the service answers GroupIDs, not positions; where
    areas overlap, a GroupID they share is marked unless the pieces that found it meet
    wholly inside the area.
    """
    areas_per_id = ids.groupby("group_id", sort=False)[plan.id_name].transform("size")
    shared = (areas_per_id > 1).to_numpy(copy=True)
    twice = ids.index[shared]
    if not len(twice):
        return pd.Series(shared, index=ids.index, dtype=bool)
    found = _finders(states, set(ids.loc[twice, "group_id"].astype(str)))
    meets: dict[tuple[int, ...], Any] = {}
    areas: dict[Hashable, Any] = {}
    answers: dict[tuple[Hashable, tuple[int, ...]], bool] = {}
    marks = []
    for area_id, group in zip(
        ids.loc[twice, plan.id_name], ids.loc[twice, "group_id"].astype(str), strict=True
    ):
        found_by = found[group]
        if (area_id, found_by) not in answers:
            if found_by not in meets:
                meets[found_by] = shapely.intersection_all(
                    [states[number].piece.geometry for number in found_by]
                )
            if area_id not in areas:
                areas[area_id] = shapely.prepared.prep(plan.areas.geometry.loc[area_id])
            answers[area_id, found_by] = not areas[area_id].contains(meets[found_by])
        marks.append(answers[area_id, found_by])
    shared[shared] = marks
    return pd.Series(shared, index=ids.index, dtype=bool)


def _finders(states: list[PieceState], groups: set[str]) -> dict[str, tuple[int, ...]]:
    """For each of ``groups``, the numbers (in ``states``) of the pieces that found it."""
    finders: dict[str, set[int]] = {}
    for number, state in enumerate(states):
        for data in state.data.values():
            for group in groups.intersection(data):
                finders.setdefault(group, set()).add(number)
    return {group: tuple(sorted(numbers)) for group, numbers in finders.items()}


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
    # The keywords above that are options (a test holds them to SearchOptions' fields):
    given = {name: value for name, value in locals().items() if name in SearchOptions.names()}
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


def price(
    areas: Any = None,
    *,
    client: Client | None = None,
    plan: Plan | None = None,
    id_column: str | None = None,
    tolerance: float | None = None,
    match: str | None = None,
    quota: Quota | str | None = None,
    refresh: bool | str = False,
    progress: bool = False,
    trust_markets: bool = False,
    survey_share: float | None = None,
) -> pricing.Price:
    """The price of a search before its bulk, paying only for its survey.

    What :func:`search` with the same arguments would spend in all, with its 95 % interval
    where it is estimated: page 1 of a sample of the pieces never searched (all of them
    when they are fewer than 30) is fetched and cached, so the search that follows reuses
    those pages and pays only the rest (``price.remaining``). Nothing is spent when every
    count is known from the cache or the run history. The price is kept in the process
    (:mod:`parcelsearch._run.priced_jobs`): the :func:`search` of the same job that
    follows (same areas or plan, client and options) asks at once with these figures, 0
    calls between, its ``spent`` this job's.

    Parameters
    ----------
    areas, client, plan, id_column, tolerance, match, quota
        As for :func:`search`.
    refresh
        ``False`` or ``True``/``"all"`` as for :func:`search` (``"changed"`` re-reads page 1
        of every piece, which is its price's minimum: use :func:`search`).
    progress
        Show the survey's bar and the price lines (off by default: the price is returned).
    trust_markets, survey_share
        As for :func:`search`.

    Returns
    -------
    Price
        ``total`` calls (``word``: exactly, about), ``low``/``high`` its interval after a
        survey, ``spent`` on the survey, ``remaining`` for the search that follows;
        ``str(price)`` is the price line.

    Raises
    ------
    QuotaWouldExceedError
        Page 1 of every piece, or the estimate, does not fit the known quota.
    ConfigurationError
        ``refresh="changed"``.
    """
    if refresh == "changed":
        raise ConfigurationError(
            "price() prices a search that reads what is not cached (refresh=False or "
            "'all'); a changed-refresh's price is page 1 of every piece, then what changed",
            hints=[Hint("refresh", "all", "use {knob}, or search with refresh='changed'")],
        )
    told: list[pricing.Price] = []

    def tell(price: pricing.Price) -> bool:
        told.append(price)
        return False

    try:
        with priced_jobs.pricing_only():  # the search that follows reuses this price
            result = search(
                areas,
                client=client,
                plan=plan,
                id_column=id_column,
                tolerance=tolerance,
                match=match,
                quota=quota,
                refresh=refresh,
                progress=progress,
                ask_above=0,
                confirm=tell,
                trust_markets=trust_markets,
                survey_share=survey_share,
            )
    except PriceNotConfirmedError:
        return told[-1]
    return pricing.Price(first=0, later=0, known="exact", spent=result.calls)


def known_price(
    plan: Plan, client: Client | None = None, *, quota: Quota | str | None = None
) -> pricing.Price:
    """The price of searching ``plan`` known without spending (no call is made), kept in
    ``plan.price`` so that the plan's repr and map show it: page 1 of
    every piece not cached, the later pages told by cached page 1s or the run history, the
    pieces never searched learnt from earlier pieces nearby where they surround them.

    Parameters
    ----------
    plan
        The plan (:func:`parcelsearch.plan`).
    client
        Whose cache folder, ledger and run history are read (default :class:`Client`).
    quota
        As for :func:`search` (the quota line, :attr:`Price.quota`).

    Returns
    -------
    Price
        ``known`` ``"exact"``, ``"estimated"`` (the run history), ``"learnt"`` (with its 95 %
        interval), or ``"lower"`` (some pieces unpriced: :attr:`Price.survey` is the
        survey's first round that would price them).
    """
    client = client if client is not None else Client()
    options = SearchOptions.resolve(plan, quota=quota, progress=False)
    cache = ResponseCache(client.cache_dir)
    opened = stores.open_store(
        options.team,
        client.fingerprint,
        member=options.user or "",
        cache=cache,
        ledger=Ledger.in_folder(client.cache_dir),
        workers=options.workers,
    )
    try:
        refresh = refreshing.RunRefresh(
            options.refresh,
            options.verify_sample,
            opened.history,
            base_url=client.base_url,
            path=plan.path,
            run_id=uuid.uuid4().hex,
        )
        run = Run(
            client,
            opened.spending,
            options,
            path=plan.path,
            run_id=refresh.run_id,
            rereads=refresh.rereads,
        )
        price = plan.price = _Search(run, plan, False, refresh).free_price()
        return price
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


class _Search:
    """One call of :func:`search`: the phases, the stop, and what is left when it ends."""

    def __init__(
        self, run: Run, plan: Plan, markets_cache: Any, refresh: refreshing.RunRefresh
    ) -> None:
        self.run_state = run
        self.refresh = refresh
        self.options = run.options
        self.plan = plan
        self.markets_cache = markets_cache
        self.states = [PieceState(piece) for piece in plan.pieces]
        self.skipped = skipped_frame(plan.areas.iloc[:0])
        self.areas_wanted: set[Hashable] | None = None  # None: every area
        #: Under ``allow_partial``: what limited the run, and the calls the whole run needed.
        self.limited: tuple[str, int] | None = None
        #: The run's price as last known (before phase 1: estimated; after: exact).
        self.price: pricing.Price | None = None
        #: The most this job may spend in all, as the user chose it at the last decision
        #: (the interval's top shown, or ``ask_above`` past what was spent when nothing was
        #: asked); ``None``: not limited there (``confirm=True``, or a ``budget``, which the
        #: run enforces itself).
        self.chosen: int | None = None
        #: Calls spent for this job before this run: the survey of the :func:`price` whose
        #: price this run reuses (:mod:`parcelsearch._run.priced_jobs`).
        self.before = 0
        #: The result, once made (:meth:`_result`): a run ends once.
        self.result: SearchResult | None = None
        self.progress = Progress(self.options.progress)

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

    def _partial(self, error: BudgetExhaustedError) -> SearchResult:
        """``allow_partial``: the partial result, returned with a warning naming what is
        missing and how to resume (the command line writes it and exits as the error)."""
        result = error.result
        assert isinstance(result, SearchResult)
        left = sum(len(s.missing()) for s in self.states)
        warning = notices.PartialResultWarning(
            f"{error.message} The result is partial (result.complete is False): "
            f"{_areas(len(self.plan.areas) - len(result.areas_complete or []))} not "
            f"complete, at least {_calls(left)} missing.",
            hints=[
                Hint(
                    "budget",
                    max(left, 1),
                    "to resume, search again with {knob} or more "
                    "(what is cached is not paid again)",
                )
            ],
        )
        warning.error = error  # type: ignore[attr-defined]  # the command line raises it
        notices.warn(warning)
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

    def _remember_refusal(self) -> None:
        """The vendor refused the key for its quota: kept in the ledger by fingerprint, until
        the quota resets (a monthly or unknown quota: the next month, UTC, the earliest
        either resets; a lifetime quota: never), so that the next search prices with 0 left
        and spends nothing instead of meeting the refusal again."""
        run = self.run_state
        if not isinstance(run.spending, LocalSpending):
            return  # a team store counts the key's calls for all its members itself
        quota = run.quota
        until = (
            None
            if quota is not None and quota.period == "lifetime"
            else next_month_start(pd.Timestamp.now(tz="UTC").to_pydatetime())
        )
        try:
            run.spending.refused(until)
        except (ParcelSearchError, OSError, sqlite3.Error) as exc:  # said, not raised
            _log.warning("the vendor's quota refusal was not kept in the ledger: %s", exc)

    def _still_needed(self, result: Any) -> str:
        """What a search the vendor refused for its quota still needs, and when the quota
        resets (the key's kind says how often, when known)."""
        left = sum(len(s.missing()) for s in self._wanted(self.states))
        word = (
            "at least "
            if any(s.pages is None and s.failure is None for s in self._wanted(self.states))
            else "exactly "
        )
        done = len(result.areas_complete or []) if isinstance(result, SearchResult) else 0
        reset = next_month_start(pd.Timestamp.now(tz="UTC").to_pydatetime())
        quota = self.run_state.quota
        when = (
            f"the key's quota ({quota.describe()}) resets on {reset:%Y-%m-%d} 00:00 UTC"
            if quota is not None and quota.period == "month"
            else f"the key's quota ({quota.describe()}) never resets"
            if quota is not None
            else f"a monthly quota (a production key's) resets on {reset:%Y-%m-%d} 00:00 UTC, a "
            "lifetime one (a demo key's) never"
        )
        return (
            f" This search still needs {word}{_calls(left)} to finish ({done} of "
            f"{len(self.plan.areas)} areas complete, everything fetched cached); {when}."
        )

    def _partial_stop(self, result: SearchResult) -> BudgetExhaustedError:
        """The error of an ``allow_partial`` run that finished only the areas that fit."""
        what, needed = self.limited or ("budget", 0)
        run = self.run_state
        left = sum(len(s.missing()) for s in self.states)
        done, total = len(result.areas_complete or []), len(self.plan.areas)
        limit = {
            "budget": f"budget of {_calls(run.budget or 0)}",
            "user budget": f"{run.options.user}'s team budget",
        }.get(what, "the known quota")
        if what == "vendor refusal" and run.refused is not None:
            limit = f"the vendor's quota refusal kept in the ledger ({run.refused.left()})"
        error = BudgetExhaustedError(
            f"{limit} reached: {done} of {total} areas are complete (the cheapest first), "
            f"{_calls(run.calls)} spent; at least {left:,} more {_noun(left)} finish the rest. "
            "Everything fetched is cached: running the same search again resumes without "
            "re-spending.",
            spent=run.calls,
            budget=run.budget if run.budget is not None else needed,
        )
        error.result = result
        return error

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

    def free_price(self) -> pricing.Price:
        """The price known before any call (see :func:`known_price`), with its quota line."""
        run = self.run_state
        self.refresh.start(self.states, run.cached)
        todo = _first_pages(self.states, run)
        previous = {id(s): self.refresh.check(s).previous for s in todo}
        known_later = len(_later_pages([s for s in self.states if s.pages is not None], run))
        self.price = pricing.estimate(
            [(None, previous[id(s)]) for s in todo], mode="all", known_later=known_later
        )
        unknown = [s for s in todo if previous[id(s)] is None]
        learnt = self._learnt(unknown) if unknown else None
        if learnt is not None and learnt.pieces == len(unknown):
            estimate = survey.Estimate(
                value=learnt.value,
                low=learnt.low,
                high=learnt.high,
                surveyed=0,
                pieces=learnt.pieces,
            )
            self.price = self._surveyed_price(
                estimate, {}, unknown, todo, previous, learnt_from=learnt.earlier
            )
        elif unknown:
            rest = len(unknown) - (learnt.pieces if learnt is not None else 0)
            self.price = dataclasses.replace(self.price, survey=survey.pilot_size(rest))
        return dataclasses.replace(self.price, quota=self._quota_line())

    # -- the survey and the decision point -----------------------------------------------

    def _survey(
        self,
        fetcher: Fetcher,
        unknown: list[PieceState],
        todo: list[PieceState],
        previous: dict[int, Any],
    ) -> None:
        """Page 1 of a random sample of the pieces never searched (every one of them when
        they are few; :mod:`parcelsearch.planning.survey`), in rounds until the price's interval
        is useful; then the price with its interval (:attr:`price`)."""
        run = self.run_state
        learnt = self._learnt(unknown)
        members = set(learnt.members) if learnt is not None else set()
        rest = [s for i, s in enumerate(unknown) if i not in members]
        # Seeded by the pieces themselves: the same search surveys the same sample.
        seed = hashlib.sha256("\n".join(s.piece.polygon_json for s in rest).encode())
        share = self.options.survey_share
        geometries = [s.piece.geometry for s in rest]
        drawn = survey.sample(
            [density.area_m2(g) for g in geometries],
            [g.centroid.coords[0] for g in geometries],
            seed.hexdigest(),
            share,
            populations=people_in(geometries),
        )
        history = sum(max(1, previous[id(s)].pages) for s in todo if previous[id(s)] is not None)
        history += learnt.value if learnt is not None else 0
        step = survey.pilot_size(len(rest), share)
        if step < len(rest):
            self._say(
                f"survey: page 1 of {step:,} of the {len(rest):,} pieces never "
                f"searched{_learnt_text(learnt)} ({_calls(step)}, more in rounds while "
                f"the interval is wide, {pricing.share_text(share)} the estimate at most; "
                "the search's own pages, cached and used, never waste) to price the rest"
            )
        costs: dict[int, int] = {}
        rows: dict[int, int | None] = {}
        estimate = survey.estimate(drawn, costs) if not rest else None
        while step:
            chosen = drawn.take(step)
            if not chosen:
                break
            self.progress.start(
                "survey" if len(costs) + len(chosen) < len(rest) else "page 1", len(chosen)
            )
            fetcher.fetch((rest[i], 1) for i in chosen)
            if fetcher.failure is not None or run.stop.is_set():
                return
            costs.update({i: max(1, rest[i].pages or 1) for i in chosen})
            rows.update({i: rest[i].rows for i in chosen})
            estimate = survey.estimate(drawn, costs, rows, run.client.page_size)
            step = survey.next_round(estimate, history, share)
        assert estimate is not None
        capped = survey.capped(estimate, history, share)
        wider = survey.wider_share(estimate, history, share) if capped else None
        if learnt is not None:
            estimate = _with_learnt(estimate, learnt)
        self.price = self._surveyed_price(
            estimate, costs, unknown, todo, previous, learnt_from=learnt.earlier if learnt else 0
        )
        if capped:
            self.price = dataclasses.replace(
                self.price, capped=True, share=share, wider_share=wider
            )
        self._say_price()
        quota = self._quota_line()
        if quota:
            self._say(quota)

    def _learnt(self, unknown: list[PieceState]) -> density.Learnt | None:
        """The price of the pieces never searched that earlier pieces nearby in the run
        history surround, learnt from them (:mod:`parcelsearch._run.density`) without a
        survey; ``None`` when the history surrounds none of them."""
        history = self.refresh.history
        if history is None:
            return None
        geometries = [s.piece.geometry for s in unknown]
        x0, y0, x1, y1 = shapely.total_bounds(geometries)
        margin = max(x1 - x0, y1 - y0) / 2
        near = history.nearby(
            self.refresh.base_url,
            self.refresh.path,
            (x0 - margin, y0 - margin, x1 + margin, y1 + margin),
        )
        # This job's own pieces (an earlier survey of it) are no independent history: the
        # complete ones are the cheap ones (issue 56).
        own = {s.piece.polygon_json for s in self.states}
        near = [n for n in near if n.polygon_json not in own]
        return density.learn(
            geometries, [(shapely.Polygon(json.loads(n.polygon_json)), n.pages) for n in near]
        )

    def _surveyed_price(
        self,
        estimate: survey.Estimate,
        costs: dict[int, int],
        unknown: list[PieceState],
        todo: list[PieceState],
        previous: dict[int, Any],
        learnt_from: int = 0,
    ) -> pricing.Price:
        """The whole run's price after the survey (or learnt from ``learnt_from`` earlier
        pieces nearby)."""
        run = self.run_state
        exact_later = sum(
            len(s.missing()) for s in self.states if s.pages is not None and s.failure is None
        )
        waiting = [s for s in todo if s.pages is None and s.failure is None]
        history = [s for s in waiting if previous[id(s)] is not None]
        history_later = sum(max(0, previous[id(s)].pages - 1) for s in history)
        if estimate.surveyed == estimate.pieces:  # a census: every count is known
            return pricing.Price(
                first=len(history),
                later=exact_later + history_later,
                known="estimated" if history else "exact",
                pieces=len(history),
                spent=run.calls,
            )
        told = sum(costs.values())
        others = len(unknown) - len(costs)
        price = pricing.surveyed(
            spent=run.calls,
            first=len(waiting),
            exact_later=exact_later,
            history_later=history_later,
            estimated=max(0, estimate.value - told - others),
            low=max(0, estimate.low - told - others),
            high=max(0, estimate.high - told - others),
            surveyed_pieces=len(costs),
            unknown=len(unknown),
            learnt_from=learnt_from,
        )
        # The survey's measure, where the estimator names it (shown in the price block).
        return dataclasses.replace(price, measure=str(getattr(estimate, "measure", "") or ""))

    def _quota_line(self) -> str:
        """What the price would leave of the key's quota (empty when none is known)."""
        run = self.run_state
        quota = run.quota
        if run.refused is not None and self.price is not None:
            return (
                f"quota: {run.refused.left()} (the vendor's refusal of {run.refused.at:%Y-%m-%d})"
            )
        if quota is None or self.price is None:
            return ""
        left = dict((what, n) for n, what in run.spending.limits(quota)).get("quota")
        if left is None:
            return ""
        return pricing.quota_line(
            self.price, left, quota.limit, quota.period, source=run.quota_source
        )

    def _decide(self) -> None:
        """The decision point, before the bulk: refused when the estimate does not fit the
        budget or quota (unless ``allow_partial``; a price known exactly is refused after
        phase 1, as before); stopped when the interval's top (the most the price says may
        still be spent) is above ``ask_above`` and neither ``confirm`` nor a budget
        (covering the interval's top, or with ``allow_partial`` the cap the user chose)
        says to go on. What was chosen here is the most the job may spend
        (:attr:`chosen`): the interval's top confirmed, else ``ask_above`` past what was
        spent."""
        price, run, options = self.price, self.run_state, self.options
        assert price is not None
        allowed, what = run.allowance()
        if allowed is not None and price.remaining > allowed and not options.allow_partial:
            if price.known not in ("surveyed", "learnt"):
                return  # known exactly: refused after phase 1, naming the exact calls
            raise self._with_result(
                QuotaWouldExceedError(
                    f"this search needs {price.refusal()}, but {_limit_text(run, what, allowed)}; "
                    + (
                        f"stopped after the survey ({_calls(price.spent)} spent, its pages cached: "
                        "running the search again reuses them)."
                        if price.known == "surveyed"
                        else f"stopped before spending ({_calls(price.spent)} spent)."
                    ),
                    needed=price.remaining,
                    price=price,
                    allowed=allowed,
                    hints=[
                        *(
                            [Hint("budget", price.upper - price.spent, "raise {knob}")]
                            if what == "budget"
                            else []
                        ),
                        Hint("allow_partial", None, "pass {knob} to finish the areas that fit"),
                    ],
                )
            )
        if (
            options.allow_partial
            and allowed is not None
            and price.remaining > allowed
            and what in ("quota", "team quota", "vendor refusal")
        ):
            price = self.price = self._month_plan(price, allowed, what)
            for line in price.block()[-2:]:
                self._say(line)  # the plan's two lines
        if options.confirm is True:
            return
        top = price.upper - price.spent  # the most still to spend, as far as the price knows
        if price.planned is not None:
            top = min(top, price.planned)
        if options.budget is not None and (
            options.allow_partial or options.budget - run.calls >= top
        ):
            return  # the budget given covers the price to the interval's top, or is the cap
        if top <= options.ask_above:  # nothing asked: what may be spent without asking
            self._choose(options.ask_above)
            return
        self._ask(price)

    def _choose(self, more: int) -> None:
        """The job may spend at most ``more`` calls beyond what it spent so far (before this
        run and in it: a market list's call too, which a price may not count); the run
        refuses any call past that (:attr:`Run.chosen`)."""
        run = self.run_state
        self.chosen = self.before + run.calls + more
        run.chosen = run.calls + more

    def _ask(self, price: pricing.Price, *, rose_past: int | None = None) -> None:
        """Ask ``confirm`` whether to spend ``price`` (to its interval's top); stop with
        :class:`PriceNotConfirmedError` when it does not say yes. ``rose_past``: what was
        chosen before, which a later, better price passed."""
        options = self.options
        if callable(options.confirm) and options.confirm(price):
            top = price.upper - price.spent
            self._choose(top if price.planned is None else min(top, price.planned))
            return
        top = price.upper - price.spent if price.planned is None else price.planned
        if self._pricing_only() and rose_past is None:
            priced_jobs.keep(self._job_key(), price, options.survey_share)
        learnt = (
            f" (learnt from {price.learnt_from:,} earlier pieces nearby)"
            if price.learnt_from
            else ""
        )
        at_top = " at the interval's top" if price.high is not None else ""
        spent = f"{_calls(price.spent)} spent" + (
            ""
            if not price.spent
            else ", their pages cached"
            if rose_past is not None
            else " on the survey, its pages cached"
        )
        if rose_past is not None:
            head = (
                f"the price rose past what was chosen: this search needs {price.needs()} "
                f"in all, more than the {rose_past:,} calls chosen at the price; stopped "
                f"before spending past them ({spent}: running the search again reuses "
                "them)."
            )
        else:
            head = (
                f"this search needs {price.needs()}{learnt}: {_calls(top)} still to "
                f"spend{at_top}, "
                f"more than the {options.ask_above:,} a search spends without asking; "
                f"stopped before spending them ({spent}: running the search again reuses "
                "them)."
            )
        raise self._with_result(
            PriceNotConfirmedError(
                head,
                needed=price.remaining,
                threshold=options.ask_above,
                survey_share=price.wider_share,
                price=price,
                hints=[
                    Hint("yes", None, "pass {knob} to spend them"),
                    Hint(
                        "budget",
                        top,
                        "or set {knob}"
                        + (" (the interval's top less what was spent)" if price.high else "")
                        + " to spend at most that",
                    ),
                    Hint("ask_above", top, "or raise {knob}"),
                    *(
                        [
                            Hint(
                                "survey_share",
                                price.wider_share,
                                "or narrow the interval to about ±20% first with {knob}",
                            )
                        ]
                        if price.wider_share is not None
                        else []
                    ),
                ],
            )
        )

    def _month_plan(self, price: pricing.Price, allowed: int, what: str) -> pricing.Price:
        """The price with its month plan: the quota left cannot hold the job, so
        ``allow_partial`` spends it on the whole areas that fit, the cheapest first (each
        area's calls: its later pages page 1 told, not cached, and one a page 1 still to
        fetch; where later pages are not known yet, at least that); the rest after the
        quota resets."""
        run = self.run_state
        costs: dict[Hashable, int] = {}
        for state in self._wanted(self.states):
            if state.failure is None:
                costs[state.piece.area_id] = costs.get(state.piece.area_id, 0)
        for state, _ in _later_pages(
            [s for s in self._wanted(self.states) if s.pages is not None and s.failure is None], run
        ):
            costs[state.piece.area_id] += 1
        unknown = False
        for state in self._wanted(self.states):
            if state.pages is None and state.failure is None:
                costs[state.piece.area_id] += 1
                unknown = True
        chosen = _cheapest_whole_areas({a: c for a, c in costs.items() if c}, allowed)
        planned = sum(costs[a] for a in chosen)
        rest = max(0, price.remaining - planned) if unknown else sum(costs.values()) - planned
        quota = run.spending.stored_quota() if what == "team quota" else run.quota
        names = ", ".join(repr(a) for a in sorted(chosen, key=str)[:5])
        if len(chosen) > 5:
            names += f" and {len(chosen) - 5:,} more"
        word = "about " if unknown else ""
        now = (
            f"this month: {planned:,} more {_noun(planned)} (areas {names}, complete)"
            if chosen
            else "this month: nothing (no whole area fits)"
        )
        reset = next_month_start(pd.Timestamp.now(tz="UTC").to_pydatetime())
        monthly = quota is not None and quota.period == "month"
        if what == "vendor refusal" and run.refused is not None:  # its reset, as kept
            monthly, reset = run.refused.until is not None, run.refused.until or reset
        if monthly:
            later = f"the other {word}{rest:,} after {reset:%Y-%m-%d %H:%M} UTC"
        else:
            now = now.replace("this month", "now")
            later = f"the other {word}{rest:,} never (the key's quota does not reset)"
        return dataclasses.replace(price, plan=f"{now}; {later}", planned=planned)

    def _ask_again(self, price: pricing.Price) -> None:
        """After phase 1, the exact price of the rest: when it passes what was chosen at the
        decision point, the run stops before spending past it and asks again."""
        if self.chosen is not None and price.total > self.chosen:
            self._ask(price, rose_past=self.chosen)

    @staticmethod
    def _pricing_only() -> bool:
        return priced_jobs.is_pricing_only()

    def _job_key(self) -> str:
        """This job's digest (:func:`parcelsearch._run.priced_jobs.job_key`)."""
        client = self.run_state.client
        return priced_jobs.job_key(
            base_url=client.base_url,
            path=self.plan.path,
            fingerprint=client.fingerprint,
            refresh=self.refresh.mode,
            pieces=((s.piece.polygon_json, s.pages) for s in self.states),
        )

    def _say_price(self) -> None:
        """The price as a block of short lines (:meth:`pricing.Price.block`)."""
        assert self.price is not None
        for line in self.price.block():
            self._say(line)

    def _say(self, line: str) -> None:
        """A whole line before the next bar (a price, a survey, the quota), when shown."""
        self.progress.say(line)

    def _wanted(self, states: list[PieceState]) -> list[PieceState]:
        if self.areas_wanted is None:
            return states
        return [s for s in states if s.piece.area_id in self.areas_wanted]

    def _affordable(
        self,
        items: list[T],
        area_of: Callable[[T], Hashable],
        allowance: tuple[int | None, str],
        *,
        spent_first: bool,
    ) -> list[T]:
        """``items`` (one call each) if the run may spend that many (``allowance``: what it
        may spend and why); else, under ``allow_partial``, the items of the whole areas that
        fit, cheapest first; else the refusal (``spent_first``: page 1 of every piece was
        fetched before this price). Before phase 1, a run whose whole price is estimated
        from the run history (every piece searched before) and does not fit is refused
        before spending too, unless ``allow_partial``."""
        run = self.run_state
        allowed, what = allowance
        estimated = (
            not spent_first
            and self.price is not None
            and self.price.known == "estimated"
            and not self.options.allow_partial
        )
        if allowed is None or (
            len(items) <= allowed
            and not (estimated and self.price is not None and self.price.needed > allowed)
        ):
            return items
        if not self.options.allow_partial:
            raise self._with_result(
                _refusal(
                    run,
                    self.plan,
                    len(items),
                    allowed,
                    what,
                    spent_first=spent_first,
                    price=self.price,
                )
            )
        self.limited = (what, len(items))
        chosen = self._finish_cheapest(items, area_of, allowed)
        return [item for item in items if area_of(item) in chosen]

    def _finish_cheapest(
        self, items: list[T], area_of: Callable[[T], Hashable], allowed: int
    ) -> set[Hashable]:
        """Under ``allow_partial``: the areas whose outstanding calls (one per item) fit in
        ``allowed``, the cheapest first; from now on the run wants those and the areas
        already finished."""
        per_area = _by_area(items, area_of)
        chosen = _cheapest_whole_areas({a: len(v) for a, v in per_area.items()}, allowed)
        finished = {s.piece.area_id for s in self._wanted(self.states)} - set(per_area)
        self.areas_wanted = chosen | finished
        return chosen

    def _with_result(self, error: BudgetError) -> BudgetError:
        """Attach what was found (a refusal before spending: the empty, incomplete result,
        so that it is written like any other stop)."""
        error.result = self._result(stopping=True)
        return error

    def _result(self, stopping: bool = False) -> SearchResult:
        """The result: made once, when the run ends (every later call returns it)."""
        if self.result is None:
            self.result = self._make_result(stopping)
        return self.result

    def _make_result(self, stopping: bool) -> SearchResult:
        """The result so far: every count summed from the pieces' states (areas complete
        computed by the result from its tiles), recorded in the run history. When the run
        is ``stopping`` for another reason (e.g. the team store lost), a failure to record is
        logged and that reason stays the one reported."""
        ids, tiles = _frames(self.plan, self.states)
        verification = self.refresh.verification(self.states)
        status, changed = self.refresh.columns(self.states)
        tiles["status"] = status
        tiles["changed"] = pd.array(changed, dtype="boolean")
        result = SearchResult(
            ids=ids,
            tiles=tiles,
            plan=self.plan,
            calls=self.run_state.calls,
            probes=sum(s.probes for s in self.states),
            cached_pages=sum(s.cached_pages for s in self.states),
            skipped=self.skipped,
            complete=all(s.done for s in self.states),
            refetched_pieces=sum(s.refetches for s in self.states),
            run_id=self.run_state.run_id if self.refresh.history is not None else "",
            refresh=self.refresh.mode,
            verification=verification,
            oldest_page=min((s.oldest for s in self.states if s.oldest is not None), default=None),
        )
        try:
            self.refresh.record(result, self.states, self.run_state.client.fingerprint)
        except ParcelSearchError as exc:
            if not stopping:
                exc.result = result
                raise
            result.run_id = ""  # plainly not recorded: nothing says it was
            _log.warning(
                "this stopped run is not recorded in the run history (%s)",
                "the team store is lost"
                if isinstance(exc, TeamStoreError)
                else " ".join(str(exc).split())[:200],
            )
        return result
