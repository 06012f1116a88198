"""The same areas cost the same in any CRS (issue 41, point 2): real boundaries (24 census
tracts of San Francisco) arriving in lon/lat, UTM and a state plane in feet get the same
pieces, so the second and third searches are served from the cache — the service's request
log shows no new call. In Python and on the command line."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import geopandas as gpd
import pytest
from _cli import run

import parcelsearch

TRACTS = Path(__file__).resolve().parents[1] / "data" / "sf_tracts_2020.geojson"
UTM_10N, CALIFORNIA_3_FEET = "EPSG:26910", "EPSG:2227"


@pytest.fixture(scope="module")
def tracts() -> gpd.GeoDataFrame:
    return gpd.read_file(TRACTS).set_index("tract")


def test_the_planner_alone_would_choose_other_pieces(tracts: gpd.GeoDataFrame) -> None:
    """What makes the reuse necessary: the tiler's pieces differ between the CRSs."""
    rings = {
        crs: {p.polygon_json for p in parcelsearch.plan(tracts.to_crs(crs)).pieces}
        for crs in ("EPSG:4326", UTM_10N, CALIFORNIA_3_FEET)
    }
    assert rings[UTM_10N] != rings["EPSG:4326"] != rings[CALIFORNIA_3_FEET]


@pytest.fixture
def searcher(
    make_key, service, ca_bundle, tmp_path: Path
) -> tuple[str, parcelsearch.Client, Callable[[], int]]:
    """A fresh key, a client with its own cache folder, and the calls the service counted
    for the key (its request log: the witness)."""
    key = make_key("production", quota=1_000, per_second=50)
    client = parcelsearch.Client(
        api_key=key, base_url=service.base_url, ca_bundle=ca_bundle, cache_dir=tmp_path / "cache"
    )
    return key, client, lambda: len(service.keys.requests(key.name))


@pytest.mark.slow
def test_three_crss_one_price(
    tracts, searcher, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, service, ca_bundle
) -> None:
    key, client, served = searcher

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", parcelsearch.notices.NothingMatchedWarning)
        first = parcelsearch.search(tracts, client=client, progress=False)
        assert served() == first.calls >= len(tracts)
        again = parcelsearch.search(tracts.to_crs(UTM_10N), client=client, progress=False)
    assert served() == first.calls and again.calls == 0  # the witness: no new call
    assert [p.polygon_json for p in again.plan.pieces] == [
        p.polygon_json for p in first.plan.pieces
    ]
    assert again.ids.equals(first.ids)

    feet = tmp_path / "tracts_feet.gpkg"
    tracts.to_crs(CALIFORNIA_3_FEET).reset_index().to_file(feet)
    monkeypatch.setenv("PARCELSEARCH_API_KEY", key)
    code, out, err = run(
        [
            "search",
            str(feet),
            "--id-column",
            "tract",
            "--quiet",
            "--out",
            str(tmp_path / "ids.parquet"),
            "--base-url",
            service.base_url,
            "--ca-bundle",
            ca_bundle,
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capsys,
    )
    assert code == 0, err
    assert "0 calls made" in out and served() == first.calls
    # 'plan' shows the pieces the search sends: the kept plan, in this CRS too.
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = run(
        ["plan", str(feet), "--id-column", "tract", "--out-tiles", str(tmp_path / "tiles.parquet")],
        capsys,
    )
    assert code == 0, err
    shown = gpd.read_parquet(tmp_path / "tiles.parquet").geometry.to_wkb().tolist()
    assert shown == first.plan.tiles.geometry.to_wkb().tolist()


@pytest.mark.slow
def test_last_weeks_tracts_within_this_weeks_cost_nothing_again(tracts, searcher) -> None:
    """A month of use: 8 tracts searched in lon/lat, then all 24 in a state plane in feet:
    the 8 are served from the cache (their pieces reused area by area), and the calls the
    service counts are those of the 16 new tracts alone."""
    _, client, served = searcher

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", parcelsearch.notices.NothingMatchedWarning)
        week1 = parcelsearch.search(tracts.iloc[:8], client=client, progress=False)
        before = served()
        week2 = parcelsearch.search(tracts.to_crs(CALIFORNIA_3_FEET), client=client, progress=False)
    tiles = week2.tiles
    old = tiles["tract"].isin(week1.plan.areas.index)
    assert int(tiles.loc[old, "calls"].sum()) == 0  # last week's 8: all from the cache
    assert int(tiles.loc[old, "cached_pages"].sum()) == week1.calls
    assert served() - before == week2.calls == int(tiles.loc[~old, "calls"].sum()) > 0
    assert (
        week2.ids[week2.ids["tract"].isin(week1.plan.areas.index)]
        .reset_index(drop=True)
        .equals(week1.ids.reset_index(drop=True))
    )
