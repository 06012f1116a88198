"""The decision point: before the bulk, a price that does not fit the budget or quota is
refused, one above ``ask_above`` is asked about; under ``allow_partial`` the whole areas that
fit are chosen, the cheapest first (the month plan).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import pandas as pd

from parcelsearch._run import priced_jobs, pricing
from parcelsearch._run.pricing import _calls, _noun
from parcelsearch._run.refusals import _limit_text, _refusal
from parcelsearch._run.search_state import SearchState, _later_pages
from parcelsearch._shared import next_month_start
from parcelsearch.errors import (
    Hint,
    PriceNotConfirmedError,
    QuotaWouldExceedError,
)

T = TypeVar("T")


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


class Deciding(SearchState):
    """The decision point of one search, and what it chose (:attr:`chosen`)."""

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
