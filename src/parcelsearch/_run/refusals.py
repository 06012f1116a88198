"""The texts of a search that stops: a refusal before spending (the budget, the quota, the
vendor's headers or refusal), and the areas that failed.
"""

from __future__ import annotations

from collections.abc import Hashable

import pandas as pd

from parcelsearch._run import pricing
from parcelsearch._run.fetching import Run
from parcelsearch._run.pricing import _calls, _noun
from parcelsearch._shared import next_month_start
from parcelsearch.errors import (
    AreasFailedError,
    Hint,
    QuotaWouldExceedError,
)
from parcelsearch.planning.plans import Plan, suggest_tolerance, suggests_at_once
from parcelsearch.result import SearchResult


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
