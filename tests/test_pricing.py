"""The price before spending: page 1 exactly, the later pages from the run history."""

from __future__ import annotations

import dataclasses

from parcelsearch._run.pricing import BLOCK_WIDTH, Price, estimate, exact_rest, surveyed
from parcelsearch.stores.history import Previous


def _seen(pages: int) -> Previous:
    return Previous(rows=pages * 10, pages=pages, digests=("d",) * pages)


def test_never_searched_pieces_give_a_lower_bound() -> None:
    price = estimate([(None, None), (None, _seen(3))], mode="cached")
    assert (price.first, price.later, price.word) == (2, 2, "at least")
    assert price.line().startswith("price: at least 4 calls (exactly 2 for page 1 of 2 pieces;")
    bare = estimate([(None, None)] * 6, mode="cached")
    assert bare.refusal() == "at least 6 calls"  # only the page 1s are known


def test_pieces_searched_before_are_estimated_from_the_history() -> None:
    price = estimate([(None, _seen(3)), (None, _seen(1))], mode="all")
    assert (price.total, price.word) == (4, "about")
    assert "about 2 for the later pages, from what earlier runs found" in price.line()


def test_refresh_changed_expects_no_change_and_names_the_worst_case() -> None:
    seen = [(None, _seen(5))] * 4
    assert estimate(seen, mode="changed").total == 4
    assert "16 if every piece changed" in estimate(seen, mode="changed").line()
    sampled = estimate(seen, mode="changed", fraction=0.25)  # one piece of four: 4 pages
    assert (sampled.total, sampled.needed) == (8, 4)
    assert "(4 of them the verify sample, dropped first when short)" in sampled.line()


def test_after_phase_1_the_price_is_exact() -> None:
    price = exact_rest(11, spent=6)
    assert price.line() == (
        "price: exactly 17 calls (6 already spent; exactly 11 for the later pages)"
    )
    assert Price(first=0, later=0).word == "exactly"
    assert estimate([], mode="cached", cached_later=2).word == "about"


def test_a_surveyed_price_states_its_interval_and_the_survey() -> None:
    from parcelsearch._run.pricing import surveyed

    price = surveyed(
        spent=24,
        first=83,
        exact_later=71,
        history_later=0,
        estimated=109,
        low=81,
        high=137,
        surveyed_pieces=24,
        unknown=107,
    )
    assert (price.total, price.remaining, price.low, price.high) == (287, 263, 259, 315)
    assert price.needs() == "about 287 calls, 95% interval 259–315"
    line = price.line()
    assert line.startswith(
        "price: about 287 calls, 95% interval 259–315 (24 already spent, "
        "24 of them a survey (page 1 of 24 of the 107 pieces never searched"
    )
    assert "never waste" not in line  # the survey line says it, once
    assert "about 109 for the other pieces' later pages" in line
    assert price.upper == 315


def test_a_learnt_price_states_its_interval_and_where_it_was_learnt() -> None:
    from parcelsearch._run.pricing import quota_line, surveyed

    price = surveyed(
        spent=0,
        first=44,
        exact_later=0,
        history_later=0,
        estimated=179,
        low=150,
        high=208,
        surveyed_pieces=0,
        unknown=44,
        learnt_from=54,
    )
    assert price.known == "learnt" and price.word == "about"
    assert (price.total, price.low, price.high) == (223, 194, 252)
    assert price.line() == (
        "price: about 223 calls, 95% interval 194–252 (exactly 44 for page 1 of 44 pieces; "
        "about 179 for the later pages of the 44 pieces never searched, learnt from 54 "
        "earlier pieces nearby (no survey))"
    )
    assert quota_line(price, 500, 500, "month") == (
        "quota: it would leave about 277 of the 500 left this month"
    )
    # Some pieces surveyed, the others learnt: both named.
    mixed = surveyed(
        spent=1,
        first=43,
        exact_later=2,
        history_later=0,
        estimated=177,
        low=150,
        high=205,
        surveyed_pieces=1,
        unknown=44,
        learnt_from=54,
    )
    assert mixed.known == "surveyed"
    assert "from the survey and 54 earlier pieces nearby" in mixed.line()


def test_the_quota_line_says_what_is_left_and_the_months_the_rest_needs() -> None:
    from parcelsearch._run.pricing import quota_line

    price = Price(first=0, later=263, known="exact", spent=24)
    assert (
        quota_line(price, 476, 500, "month")
        == "quota: it would leave exactly 213 of the 476 left this month"
    )
    assert (
        quota_line(price, 100, 500, "month") == "quota: 100 left this month, exactly 163 short: "
        "the rest needs 1 more month at 500 a month"
    )
    assert quota_line(Price(first=0, later=1_300, known="exact"), 100, 500, "month").endswith(
        "the rest needs 3 more months at 500 a month"
    )
    assert quota_line(price, 50, 50, "lifetime") == "quota: 50 left for good, exactly 213 short"
    assert quota_line(price, None, None, None) == ""


def test_a_resume_prices_the_cached_pieces_missing_pages_exactly() -> None:
    """Issue 49: a resume's first price said 'about 0' with 547 calls known needed."""
    price = estimate([], mode="cached", known_later=547)
    assert price.line() == "price: exactly 547 calls (exactly 547 for the later pages)"


def test_the_price_block_is_short_lines_in_a_fixed_order() -> None:
    price = dataclasses.replace(
        surveyed(
            spent=1_332,
            first=12_055,
            exact_later=40,
            history_later=0,
            estimated=1_201,
            low=900,
            high=2_100,
            surveyed_pieces=1_332,
            unknown=13_387,
        ),
        capped=True,
        wider_share=0.43,
        measure="population",
        quota="quota: 497 left this month, about 13,799 short: the rest needs 28 more months",
    )
    block = price.block()
    assert [line.split(":")[0] for line in block] == [
        "price",
        "spent",
        "exact",
        "estimated",
        "interval",
        "narrower",
        "quota",
    ]
    assert block[0] == (
        "price: about 14,628 calls, 95% interval 14,327–15,527 (survey drawn by population)"
    )
    assert block[1] == (
        "spent: 1,332 calls so far, on a survey: page 1 of 1,332 of 13,387 pieces never searched"
    )
    assert block[2] == "exact: 12,055 for page 1 of 12,055 pieces; 40 for later pages page 1 told"
    assert block[3] == "estimated: about 1,201 for later pages, from the survey"
    assert all(len(line) <= BLOCK_WIDTH for line in block)
    assert exact_rest(3, 7).block() == [
        "price: exactly 10 calls",
        "spent: 7 calls so far",
        "exact: 3 for later pages page 1 told",
    ]
