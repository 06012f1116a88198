"""The survey: the price before the bulk, from page 1 of a sample of the pieces never
searched, what earlier pieces nearby teach, and the run history; the price known before any
call; the quota line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

import shapely
import shapely.prepared

from parcelsearch._run import density, pricing
from parcelsearch._run.page_pool import Fetcher
from parcelsearch._run.piece_state import PieceState
from parcelsearch._run.pricing import _calls
from parcelsearch._run.search_state import SearchState, _first_pages, _later_pages
from parcelsearch.planning import survey
from parcelsearch.planning.population import people_in


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


class Surveying(SearchState):
    """The survey of one search (:class:`SearchState`'s price, made before the bulk)."""

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
