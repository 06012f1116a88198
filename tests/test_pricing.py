"""The price before spending: page 1 exactly, the later pages from the run history."""

from __future__ import annotations

from parcelsearch._run.pricing import Price, estimate, exact_rest
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
    assert price.line() == ("price: exactly 17 calls (6 already spent; exactly 11 for the "
                            "later pages)")
    assert Price(first=0, later=0).word == "exactly"
    assert estimate([], mode="cached", cached_later=2).word == "about"
