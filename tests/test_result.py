"""The result object: prices, summary, parquet, reprs (built from a real plan, no network)."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyarrow.parquet as pq
import pytest
import shapely

import parcelsearch
from parcelsearch.result import SearchResult, zoning_price


@pytest.mark.parametrize(
    ("count", "tier", "price"),
    [
        pytest.param(100, "basic", 29.0, id="basic"),
        pytest.param(100, "Enhanced", 49.0, id="enhanced-any-case"),
        pytest.param(3, "premium", 2.07, id="premium"),
        pytest.param(0, "basic", 0.0, id="none"),
    ],
)
def test_zoning_price(count: int, tier: str, price: float) -> None:
    assert zoning_price(count, tier) == price


def test_unknown_tier_names_the_tiers() -> None:
    with pytest.raises(parcelsearch.InputError, match="basic, enhanced, premium"):
        zoning_price(1, "gold")


@pytest.fixture
def result() -> SearchResult:
    areas = gpd.GeoDataFrame(
        {"area": ["a", "b"]},
        geometry=[shapely.box(-97.0, 32.0, -96.99, 32.01), shapely.box(-96.0, 32.0, -95.99, 32.01)],
        crs="EPSG:4326",
    )
    demo_plan = parcelsearch.plan(areas, id_column="area")
    ids = pd.DataFrame({"area": ["a", "a", "b"], "group_id": ["0" * 17, "1" * 17, "1" * 17]})
    tiles = demo_plan.tiles.assign(
        rows=[3, 1],
        pages=[1, 1],
        pages_fetched=[1, 1],
        calls=[1, 0],
        cached_pages=[0, 1],
        from_cache=[False, True],
    )
    return SearchResult(ids=ids, tiles=tiles, plan=demo_plan, calls=1, cached_pages=1)


def test_summary_per_area(result: SearchResult) -> None:
    summary = result.summary()
    assert summary.loc["a"].to_dict() == {
        "parcels": 3,
        "group_ids": 2,
        "pieces": 1,
        "pages": 1,
        "calls": 1,
        "cached_pages": 0,
        "complete": True,
    }
    assert summary.loc["b", "cached_pages"] == 1


def test_an_incomplete_result_says_which_areas_are_complete(result: SearchResult) -> None:
    partial = SearchResult(
        ids=result.ids,
        tiles=result.tiles,
        plan=result.plan,
        calls=1,
        complete=False,
        areas_complete=["b"],
    )
    assert partial.summary()["complete"].to_dict() == {"a": False, "b": True}
    assert partial.metadata["areas_complete"] == ["b"] and not partial.metadata["complete"]
    assert "INCOMPLETE" in repr(partial) and "1 of 2 areas complete" in partial._repr_html_()


def test_parquet_carries_the_run_metadata(result: SearchResult, tmp_path: Path) -> None:
    path = result.to_parquet(tmp_path / "ids.parquet")
    meta = json.loads(pq.read_schema(path).metadata[b"parcelsearch"])
    assert meta["complete"] is True and meta["calls"] == 1 and meta["cached_pages"] == 1
    assert meta["areas_complete"] == ["a", "b"]
    pd.testing.assert_frame_equal(pd.read_parquet(path), result.ids)


def test_unique_group_ids_and_cost(result: SearchResult) -> None:
    assert list(result.group_ids) == ["0" * 17, "1" * 17]
    assert result.zoning_cost("basic") == 0.58


def test_reprs_show_the_figures_first(result: SearchResult) -> None:
    assert "calls spent=1" in repr(result) and "unique GroupIDs=2" in repr(result)
    html = result._repr_html_()
    assert "pages from cache" in html and "$0.58" in html


def test_to_parquet_round_trips(result: SearchResult, tmp_path) -> None:
    back = pd.read_parquet(result.to_parquet(tmp_path / "sub" / "ids.parquet"))
    pd.testing.assert_frame_equal(back, result.ids)


def test_the_oldest_cached_page_is_dated_and_old_ones_get_a_notice(result) -> None:
    """Issue 49: the age of what is served — in metadata always, in words, and a notice
    naming refresh='changed' (--refresh changed) only past a day."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from parcelsearch.result import age_text

    assert [age_text(timedelta(seconds=s)) for s in (0, 59, 61, 7_200, 86_400, 31 * 86_400)] == [
        "0 seconds",
        "59 seconds",
        "1 minute",
        "2 hours",
        "1 day",
        "31 days",
    ]
    assert result.metadata["oldest_page_fetched_at"] is None
    assert result.cache_age_text() == "" and result.old_pages_warning() is None
    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    fresh = replace(result, oldest_page=now - timedelta(hours=23))
    assert fresh.cache_age_text(now) == "the oldest fetched 23 hours ago, on 2026-11-26 13:00 UTC"
    assert fresh.old_pages_warning(now) is None
    old = replace(result, oldest_page=now - timedelta(days=31))
    assert old.metadata["oldest_page_fetched_at"] == "2026-10-27T12:00:00+00:00"
    notice = old.old_pages_warning(now)
    assert notice is not None
    assert str(notice).startswith(
        "1 page came from the cache, the oldest fetched 31 days "
        "ago, on 2026-10-27 12:00 UTC: parcels may have changed"
    )
    assert "refresh='changed'" in str(notice) and "max_age='30d'" in str(notice)
    assert "--refresh changed" in notice.render("cli")
