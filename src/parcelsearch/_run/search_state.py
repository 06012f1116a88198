"""What one search holds while it runs, and how it ends: the pieces' states, the price, the
lines said, the result made once, and the errors of a partial or refused stop.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Hashable
from typing import Any, TypeVar

import pandas as pd

from parcelsearch import notices
from parcelsearch._run import priced_jobs, pricing, refreshing
from parcelsearch._run.fetching import Run
from parcelsearch._run.piece_state import PieceState
from parcelsearch._run.pricing import _calls, _noun
from parcelsearch._run.progress import Progress
from parcelsearch._run.refusals import _areas
from parcelsearch._run.result_frames import _frames
from parcelsearch._shared import next_month_start
from parcelsearch.errors import (
    BudgetError,
    BudgetExhaustedError,
    Hint,
    ParcelSearchError,
    TeamStoreError,
)
from parcelsearch.planning.plans import Plan
from parcelsearch.result import SearchResult, skipped_frame
from parcelsearch.stores.local.spending import LocalSpending

S = TypeVar("S")
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


class SearchState:
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
