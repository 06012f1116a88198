"""Refresh decisions: modes, fractions, classification, the sample and the estimate."""

from __future__ import annotations

import pytest

import parcelsearch
from parcelsearch._run.options import check_fraction, refresh_mode
from parcelsearch._run.refreshing import PieceCheck, classify, estimate_missed, sample
from parcelsearch.stores.history import Previous, page_digest

PAGE = ("1" * 17, "2" * 17)


@pytest.mark.parametrize(
    ("value", "mode"),
    [(False, "cached"), (None, "cached"), (True, "all"), ("all", "all"), ("changed", "changed")],
)
def test_refresh_modes(value: object, mode: str) -> None:
    assert refresh_mode(value) == mode


def test_a_bad_refresh_names_the_values_in_both_dialects() -> None:
    with pytest.raises(parcelsearch.ConfigurationError, match="'all' or 'changed'") as caught:
        refresh_mode("some")
    assert "--refresh changed" in caught.value.render("cli")
    assert "refresh='changed'" in str(caught.value)


def test_verify_sample_is_a_fraction_meant_for_changed() -> None:
    assert check_fraction(None, "changed") == 0.0 and check_fraction(None, "all") == 0.0
    assert check_fraction(0, "changed") == 0.0
    with pytest.raises(parcelsearch.ConfigurationError, match="between 0 and 1"):
        check_fraction(1.5, "changed")
    with pytest.raises(
        parcelsearch.ConfigurationError, match="means nothing with refresh='cached'"
    ):
        check_fraction(0.1, "cached")


def test_search_refuses_bad_refresh_options_before_anything() -> None:
    with pytest.raises(parcelsearch.ConfigurationError, match="verify_sample"):
        parcelsearch.search(
            None,
            plan=None,
            refresh=True,
            verify_sample=0.2,
            client=parcelsearch.Client(api_key="k" * 32, base_url="https://127.0.0.1:9"),
        )


def test_classify_compares_counts_and_page_1() -> None:
    previous = Previous(150, 2, (page_digest(150, 2, PAGE), "later"))
    same = PieceCheck(previous)
    classify(same, 150, 2, PAGE)
    assert (same.changed, same.reread) == (False, False)
    for rows, page1 in ((151, PAGE), (150, PAGE[::-1])):
        check = PieceCheck(previous)
        classify(check, rows, 2, page1)
        assert (check.changed, check.reread) == (True, True)
    new = PieceCheck(None)
    classify(new, 150, 2, PAGE)
    assert (new.changed, new.reread) == (None, True)


def test_the_sample_is_seeded_and_never_empty_when_asked() -> None:
    items = list(range(100))
    assert sample(items, 0.05, "run") == sample(items, 0.05, "run")
    assert len(sample(items, 0.05, "run")) == 5 and len(sample(items[:3], 0.01, "r")) == 1
    assert sample(items, 0.0, "run") == [] and sample([], 0.5, "run") == []


def test_the_estimate_is_a_wilson_interval_scaled_to_the_unsampled() -> None:
    none_found = estimate_missed(sampled=20, found=0, population=180)
    assert none_found["missed_estimate"] == 0.0
    assert none_found["missed_interval"] == [0.0, 29.0]  # z² / (n + z²) = 0.1611, × 180
    some = estimate_missed(sampled=10, found=5, population=100)
    assert some["missed_estimate"] == 50.0
    assert some["missed_interval"] == [23.7, 76.3]
    unknown = estimate_missed(sampled=0, found=0, population=40)
    assert unknown["missed_estimate"] is None and unknown["missed_interval"] == [0.0, 40.0]


def test_doctests() -> None:
    import doctest

    from parcelsearch._run import refreshing
    from parcelsearch_service import fabric_changes

    for module in (refreshing, fabric_changes):
        failures, tried = doctest.testmod(module)
        assert tried and not failures, module.__name__


def test_refresh_decisions_are_derived_and_its_reads_change_nothing() -> None:
    """Whether a piece is re-read follows from refresh's checks (nothing kept in step by
    hand); verification() and columns() are reads: asked twice, the same, nothing changed."""
    import copy
    from types import SimpleNamespace

    from shapely import box

    from parcelsearch._run.piece_state import PieceState
    from parcelsearch._run.refreshing import RunRefresh
    from parcelsearch.planning.plans import Piece

    later, other = ("3" * 17,), ("4" * 17,)

    def page(data: tuple[str, ...]) -> SimpleNamespace:
        return SimpleNamespace(rows=101, pages=2, data=data)

    # Piece 0 of area a is in the cache (its last record); piece 0 of area b is new.
    stored = {("a", 1): page(PAGE), ("a", 2): page(later)}
    states = [PieceState(Piece(a, 0, f"[{a}]", box(0, 0, 1, 1), 10)) for a in "ab"]
    refresh = RunRefresh("changed", 1.0, None, base_url="https://x", path="/v1/search", run_id="r")
    refresh.start(states, lambda state, k: stored.get((state.piece.area_id, k)))  # type: ignore[arg-type,return-value]
    assert [refresh.rereads(s) for s in states] == [True, True]  # every page 1, afresh
    for state in states:
        state.fetched(1)
        state.counted(page(PAGE))  # type: ignore[arg-type]
        state.keep(1, page(PAGE))  # type: ignore[arg-type]
    refresh.decide(states)  # a: page 1 unchanged, inferred and sampled; b: never seen
    assert [refresh.rereads(s) for s in states] == [True, True]
    states[0].keep(2, page(other))  # type: ignore[arg-type]  # changed beyond page 1
    states[1].keep(2, page(later))  # type: ignore[arg-type]
    checks = copy.deepcopy(refresh.checks)
    told = refresh.verification(states), refresh.columns(states)
    assert told == (refresh.verification(states), refresh.columns(states))
    assert refresh.checks == checks
    assert (told[0]["sampled"], told[0]["found_changed"]) == (1, 1)
    assert told[1] == (["sampled", "read"], [True, None])
    assert refresh.shrink_sample(states, "did not fit")
    assert [refresh.rereads(s) for s in states] == [False, True]  # the sample dropped
