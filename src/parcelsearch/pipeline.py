"""The search pipeline: plan → fetch (cache → ledger → limiter → HTTP → check → cache) → dedupe.

One generator-free, readable sequence per request (:meth:`_Run.fetch`), a thread pool that
sends page 1 of every piece first and pages 2..n as they become known, and one dedupe at
the end.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Hashable
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import geopandas as gpd
import pandas as pd
from tqdm.auto import tqdm

from parcelsearch import _wire, planning
from parcelsearch.cache import ResponseCache
from parcelsearch.client import Cancelled, Client
from parcelsearch.errors import (
    BudgetExhaustedError,
    Hint,
    MalformedResponseError,
    ParcelSearchError,
    QuotaWouldExceedError,
)
from parcelsearch.ledger import Ledger, Quota, resume_message
from parcelsearch.page import Page
from parcelsearch.planning import Piece, Plan, suggest_tolerance
from parcelsearch.result import SearchResult

__all__ = ["search"]

#: Threads sending requests; the client's shared limiter paces them all.
DEFAULT_WORKERS = 8


class _Stopped(Exception):  # noqa: N818 - a signal, not an error
    """Raised before an attempt once the run is stopping after a failure."""


@dataclass
class _PieceState:
    """What one piece has produced so far."""

    piece: Piece
    rows: int | None = None
    pages: int | None = None
    data: dict[int, tuple[str, ...]] = field(default_factory=dict)
    calls: int = 0
    cached_pages: int = 0


class _Run:
    """One search run: shared state of the worker threads."""

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
        #: Set on the first failure: no request is started after it.
        self.stopping = threading.Event()

    def key(self, piece: Piece, page: int) -> str:
        return _wire.request_key(self.client.base_url, self.path, piece.polygon_json, page)

    def cached(self, piece: Piece, page: int) -> Page | None:
        if self.cache is None or self.refresh:
            return None
        return self.cache.get(self.key(piece, page), max_age=self.max_age)

    def reserve_call(self) -> None:
        """Before every attempt: refuse once the run is stopping, else reserve one call."""
        if self.stopping.is_set():
            raise _Stopped()
        if self.ledger is not None:
            self.ledger.reserve(
                self.client.fingerprint, run_id=self.run_id, budget=self.budget, quota=self.quota
            )
        with self.lock:  # check and count in one critical section: threads race for the last call
            if self.ledger is None and self.budget is not None and self.calls >= self.budget:
                raise BudgetExhaustedError(
                    resume_message(self.budget), spent=self.calls, budget=self.budget
                )
            self.calls += 1

    def release_call(self) -> None:
        """Take back a reservation that was never sent."""
        if self.ledger is not None:
            self.ledger.release(self.client.fingerprint, run_id=self.run_id)
        with self.lock:
            self.calls -= 1

    def fetch(self, piece: Piece, page: int) -> tuple[Page, int]:
        """One page of one piece: from the cache, else from the network (then cached)."""
        hit = self.cached(piece, page)
        if hit is not None:
            with self.lock:
                self.cached_pages += 1
            return hit, 0
        attempts = 0

        def before_attempt() -> None:
            nonlocal attempts
            self.reserve_call()
            attempts += 1

        try:
            fresh = self.client.search_page(
                piece.polygon_json, page, path=self.path, before_attempt=before_attempt,
                cancel=self.stopping,
            )
        except Cancelled:
            self.release_call()  # reserved, then stopped before sending
            raise
        if self.cache is not None:
            self.cache.put(fresh)
        return fresh, max(attempts, 1)


def _check_consistent(state: _PieceState, page: Page) -> None:
    if state.rows is None:
        state.rows, state.pages = page.rows, page.pages
    elif (page.rows, page.pages) != (state.rows, state.pages):
        raise MalformedResponseError(
            f"area {state.piece.area_id!r} piece {state.piece.piece_id}: page {page.page} "
            f"reports rows={page.rows}, pages={page.pages} but page 1 reported "
            f"rows={state.rows}, pages={state.pages}; the data changed between pages. "
            "Search again with refresh=True."
        )


def _estimate_calls(run: _Run, pieces: list[Piece]) -> int:
    """Calls still needed at least: uncached page 1s, plus known uncached later pages."""
    needed = 0
    for piece in pieces:
        first = run.cached(piece, 1)
        if first is None:
            needed += 1
            continue
        needed += sum(run.cached(piece, k) is None for k in range(2, first.pages + 1))
    return needed


def _refuse_if_over(run: _Run, plan: Plan, needed: int, *, allow_partial: bool) -> None:
    """Say before spending anything when the run cannot fit the budget or known quota."""
    limits: list[tuple[str, int]] = []
    if run.budget is not None and not allow_partial:
        limits.append(("budget", run.budget))
    if run.quota is not None and run.ledger is not None:
        left = run.ledger.remaining(run.client.fingerprint, run.quota)
        if left is not None:
            limits.append(("remaining quota", left))
    for what, allowed in limits:
        if needed <= allowed:
            continue
        hints: list[Hint] = []
        suggested = (
            suggest_tolerance(plan.areas, allowed, max_request_bytes=plan.max_request_bytes,
                              path=plan.path)
            if allowed > 0 else None
        )
        if suggested is not None and suggested > plan.tolerance:
            hints = [Hint("tolerance", f"{suggested:g}", "try {knob} (metres), whose plan fits")]
        elif what == "budget":
            hints = [Hint("budget", needed, "raise {knob}"),
                     Hint("allow_partial", phrase="or pass {knob} to spend it and resume later")]
        raise QuotaWouldExceedError(
            f"this search needs at least {needed} calls but the {what} allows {allowed}; "
            "nothing was spent.",
            needed=needed,
            allowed=allowed,
            hints=hints,
        )


def _fetch_all(
    run: _Run, pieces: list[Piece], progress: bool, workers: int
) -> tuple[dict[int, _PieceState], BaseException | None]:
    """Page 1 of every piece, then pages 2..n, concurrently; stop cleanly on the first error.

    Returns what was fetched and the first failure (``None`` when complete): requests under
    way when a failure happens are finished and kept, none is started after it.
    """
    states = {i: _PieceState(p) for i, p in enumerate(pieces)}
    bar = tqdm(total=len(pieces), desc="search", unit="page", disable=not progress)
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parcelsearch") as pool:
        pending: dict[Future[tuple[Page, int]], tuple[int, int]] = {
            pool.submit(run.fetch, s.piece, 1): (i, 1) for i, s in states.items()
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index, page_no = pending.pop(future)
                try:
                    page, calls = future.result()
                except (_Stopped, Cancelled, CancelledError):
                    continue  # not started, or stopped before sending: nothing was spent
                except BaseException as exc:  # noqa: BLE001 - re-raised after draining
                    failure = failure or exc
                    if not isinstance(exc, BudgetExhaustedError):
                        run.stopping.set()  # calls reserved within a budget still go out
                    continue
                state = states[index]
                try:
                    _check_consistent(state, page)
                except ParcelSearchError as exc:
                    failure = failure or exc
                    run.stopping.set()
                    continue
                state.data[page_no] = page.data
                state.calls += calls
                state.cached_pages += calls == 0
                bar.update(1)
                if page_no == 1 and page.pages > 1 and failure is None:
                    bar.total += page.pages - 1
                    bar.refresh()
                    for k in range(2, page.pages + 1):
                        pending[pool.submit(run.fetch, state.piece, k)] = (index, k)
            if failure is not None:
                for future in pending:
                    future.cancel()
    bar.close()
    return states, failure


def _frames(plan: Plan, states: dict[int, _PieceState]) -> tuple[pd.DataFrame, gpd.GeoDataFrame]:
    """Deduplicate (area id, group_id) once, and tabulate the tiles sent."""
    id_name = plan.id_name
    areas: list[Hashable] = []
    groups: list[str] = []
    rows = []
    for state in states.values():
        piece = state.piece
        for data in state.data.values():
            areas.extend([piece.area_id] * len(data))
            groups.extend(data)
        rows.append(
            {
                id_name: piece.area_id,
                "piece_id": piece.piece_id,
                "rows": state.rows if state.rows is not None else pd.NA,
                "pages": state.pages if state.pages is not None else pd.NA,
                "pages_fetched": len(state.data),
                "calls": state.calls,
                "cached_pages": state.cached_pages,
                "from_cache": bool(state.data) and state.calls == 0,
                "geometry": piece.geometry,
            }
        )
    ids = (
        pd.DataFrame({id_name: areas, "group_id": pd.Series(groups, dtype="string")})
        .drop_duplicates()
        .sort_values([id_name, "group_id"], kind="stable")
        .reset_index(drop=True)
    )
    tiles = gpd.GeoDataFrame(rows, geometry="geometry", crs="EPSG:4326")
    for column in ("rows", "pages"):
        tiles[column] = tiles[column].astype("Int64")
    return ids, tiles


def _skip_inactive(plan: Plan, run: _Run, column: str) -> tuple[Plan, pd.DataFrame]:
    """Drop areas whose market is not active before anything is spent on them."""
    from parcelsearch.market_list import check_markets, markets

    active = markets(
        run.client, cache=run.cache.directory if run.cache is not None else False,
        before_attempt=run.reserve_call,
    )
    checked = check_markets(plan.areas, column, active)
    inactive = checked.index[~checked["market_active"]]
    skipped = gpd.GeoDataFrame(
        {
            "market": checked.loc[inactive, column],
            "reason": "market not active",
            "suggestion": checked.loc[inactive, "market_suggestion"],
        },
        geometry=plan.areas.geometry.loc[inactive],
        crs=plan.areas.crs,
        index=inactive,
    )
    return plan.without(inactive), skipped


def search(
    areas: Any,
    *,
    client: Client | None = None,
    tolerance: float = 0.0,
    id_column: str | None = None,
    budget: int | None = None,
    quota: Quota | str | None = None,
    allow_partial: bool = False,
    cache: ResponseCache | bool | None = None,
    ledger: Ledger | bool | None = None,
    max_age: float | None = None,
    refresh: bool = False,
    active_markets_only: bool = False,
    market_column: str = "market",
    progress: bool = True,
    workers: int = DEFAULT_WORKERS,
    plan: Plan | None = None,
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
    id_column
        Column identifying areas (default: the index).
    budget
        At most this many calls in this run. If the plan needs more than ``budget`` at least,
        nothing is spent and :class:`~parcelsearch.QuotaWouldExceedError` says what would fit,
        unless ``allow_partial=True``. When extra pages reach the budget mid-run the search stops
        cleanly, keeps everything fetched (cached) and raises
        :class:`~parcelsearch.BudgetExhaustedError`; rerunning resumes without re-spending.
    quota
        The key's quota if known (``"demo"``, ``"production"``, ``"500/month"``,
        ``"50/lifetime"``; default ``PARCELSEARCH_QUOTA``): runs that cannot fit what is left
        are refused before spending.
    cache, ledger
        Response cache and quota ledger: ``None`` for the defaults (in
        ``PARCELSEARCH_CACHE_DIR``), ``False`` to go without, or an instance.
    max_age, refresh
        Ignore cached pages older than ``max_age`` seconds, or all of them (``refresh=True``).
    active_markets_only, market_column
        Skip, before spending, areas whose ``market_column`` is not an active market.
    progress
        Show a tqdm progress bar.
    workers
        Threads sending requests (all paced by the client's one limiter).
    plan
        A plan made earlier with :func:`parcelsearch.plan` (then ``areas`` may be ``None``).

    Returns
    -------
    SearchResult
        ``ids``, ``tiles``, ``summary()``, ``zoning_cost()``, calls and cached pages.

    Examples
    --------
    >>> import parcelsearch
    >>> result = parcelsearch.search(areas)  # doctest: +SKIP
    >>> result.ids.head()  # doctest: +SKIP
    """
    client = client if client is not None else Client()
    quota_obj = Quota.parse(quota) if not isinstance(quota, Quota) else quota
    # None/True: the defaults beside the client's cache folder; False: go without.
    # (An empty ResponseCache is falsy, so test identity and type, never truth.)
    cache_obj = cache if isinstance(cache, ResponseCache) else (
        None if cache is False else ResponseCache(client.cache_dir))
    ledger_obj = ledger if isinstance(ledger, Ledger) else (
        None if ledger is False else Ledger.in_folder(client.cache_dir))
    chosen = plan if plan is not None else planning.plan(areas, tolerance, id_column=id_column)
    run = _Run(
        client, cache_obj, ledger_obj, budget=budget, quota=quota_obj,
        max_age=max_age, refresh=refresh, path=chosen.path,
    )
    skipped = pd.DataFrame(columns=["market", "reason", "suggestion"])
    if active_markets_only:
        chosen, skipped = _skip_inactive(chosen, run, market_column)
    needed = _estimate_calls(run, chosen.pieces)
    _refuse_if_over(run, chosen, needed, allow_partial=allow_partial)
    states, failure = _fetch_all(run, chosen.pieces, progress, workers)
    ids, tiles = _frames(chosen, states)
    result = SearchResult(
        ids=ids, tiles=tiles, plan=chosen, calls=run.calls, cached_pages=run.cached_pages,
        skipped=skipped, complete=failure is None,
    )
    if isinstance(failure, BudgetExhaustedError):
        raise BudgetExhaustedError(
            resume_message(failure.budget), spent=run.calls, budget=failure.budget, result=result
        ) from None
    if failure is not None:
        if isinstance(failure, ParcelSearchError):
            failure.result = result
        raise failure
    return result

