"""Markets: close-name suggestions, the market check, and the day-long cached list."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import Point

import parcelsearch.accessor  # noqa: F401  (registers gdf.parcels, which a test uses)
from parcelsearch.client import Client
from parcelsearch.errors import CacheError, InputError
from parcelsearch.market_list import check_markets, markets, suggest_market
from parcelsearch.stores.local.cache import CacheFolder

ACTIVE = ["Abilene, TX", "Boise, ID", "Tarrant County Unincorporated, TX", "Fort Worth, TX"]
OFFLINE = "https://markets.invalid"  # never contacted: every test here reads the cache


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("Abilene, Tx", "Abilene, TX", id="case"),
        pytest.param("Abilene TX", "Abilene, TX", id="no-comma"),
        pytest.param(" abilene ,  tx ", "Abilene, TX", id="spacing"),
        pytest.param("Abilene, Texas", "Abilene, TX", id="state-spelled-out"),
        pytest.param("Abilen, TX", "Abilene, TX", id="typo"),
        pytest.param("Boise Idaho", "Boise, ID", id="state-spelled-out-no-comma"),
        pytest.param("FortWorth, TX", "Fort Worth, TX", id="missing-space"),
        pytest.param("Marfa, TX", None, id="not-close"),
        pytest.param("", None, id="empty"),
    ],
)
def test_suggest_market(name: str, expected: str | None) -> None:
    assert suggest_market(name, ACTIVE) == expected


@pytest.fixture
def areas() -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {
            "area_id": ["a", "b", "c", "d", "e"],
            "market": ["Abilene, TX", "Abilene Tx", "Marfa, TX", None, "Boise, ID "],
        },
        geometry=[Point(k, k).buffer(0.1) for k in range(5)],
        crs="EPSG:4326",
        index=pd.Index([10, 11, 12, 13, 14], name="row"),
    )


def test_check_markets(areas: gpd.GeoDataFrame) -> None:
    checked = check_markets(areas, "market", ACTIVE)
    assert isinstance(checked, gpd.GeoDataFrame) and checked.crs == areas.crs
    assert checked.index.equals(areas.index)
    assert checked["market_active"].tolist() == [True, False, False, False, True]
    assert checked["market_active"].dtype == bool
    assert checked["market_suggestion"].tolist() == [None, "Abilene, TX", None, None, None]
    assert "market_active" not in areas.columns  # the input is left alone


def test_missing_column_is_named(areas: gpd.GeoDataFrame) -> None:
    with pytest.raises(InputError, match=r"no column 'City'.*: 'area_id', 'market'") as caught:
        check_markets(areas, "City", ACTIVE)
    assert caught.value.field == "City"
    assert "--market-column COLUMN" in caught.value.render("cli")


def test_markets_reads_a_fresh_cached_list(tmp_path: Path) -> None:
    CacheFolder(tmp_path).keep_markets(OFFLINE, ACTIVE)
    client = Client("offline-key", OFFLINE)
    assert markets(client, cache=tmp_path) == ACTIVE


def test_cached_lists_are_per_service(tmp_path: Path) -> None:
    folder = CacheFolder(tmp_path)
    assert folder.markets_path("https://a.example") != folder.markets_path("https://b.example")


def test_clearing_the_folder_keeps_the_ledger(tmp_path: Path) -> None:
    folder = CacheFolder(tmp_path)
    folder.keep_markets(OFFLINE, ACTIVE)
    folder.ledger_path.write_bytes(b"calls already spent")
    assert folder.clear() == 1
    assert folder.ledger_path.exists() and not folder.markets_path(OFFLINE).exists()


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param(json.dumps({"markets": ACTIVE}), id="missing-fields"),
        pytest.param(
            json.dumps(
                {
                    "base_url": "https://other.example",
                    "markets": ACTIVE,
                    "fetched_at": "2030-01-01T00:00:00+00:00",
                }
            ),
            id="other-service",
        ),
    ],
)
def test_unreadable_cached_list_is_a_loud_error(tmp_path: Path, content: str) -> None:
    path = CacheFolder(tmp_path).markets_path(OFFLINE)
    path.write_text(content)
    with pytest.raises(CacheError, match=path.name):
        markets(Client("offline-key", OFFLINE), cache=tmp_path)


def test_checking_needs_the_list_and_never_calls_by_itself(areas: gpd.GeoDataFrame) -> None:
    with pytest.raises(TypeError):
        check_markets(areas, "market")  # type: ignore[call-arg]
    with pytest.raises(InputError, match="must be a list of market names"):
        check_markets(areas, "market", None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"markets=parcelsearch\.markets\(client\)") as caught:
        areas.parcels.check_markets("market")
    assert "parcelsearch markets" in caught.value.render("cli")
    checked = areas.parcels.check_markets("market", markets=ACTIVE)
    assert checked["market_active"].tolist() == [True, False, False, False, True]


def test_the_market_check_uses_only_a_list_at_hand(tmp_path) -> None:
    """Issue 49: areas far from every market state are refused only when the market list
    is in the cache (of any age); no list, or an unreadable one, and nothing is said."""
    import json

    import pytest
    from shapely import box

    import parcelsearch
    from parcelsearch.errors import InputError
    from parcelsearch.market_list import check_markets_at_hand
    from parcelsearch.stores.local.cache import CacheFolder

    sf = parcelsearch.plan([box(-122.45, 37.75, -122.44, 37.76)]).areas
    url = "https://vendor.example"
    check_markets_at_hand(sf, url, tmp_path)  # nothing cached: no word
    CacheFolder(tmp_path).keep_markets(url, ["Abilene, TX", "Boise, ID"])
    with pytest.raises(
        InputError,
        match=r"area 0 lies about 646 km from every state with an "
        r"active market \(farther than 50 km from ID, TX",
    ):
        check_markets_at_hand(sf, url, tmp_path)
    check_markets_at_hand(sf, "https://other.example", tmp_path)  # another service's: none
    path = CacheFolder(tmp_path).markets_path(url)
    record = json.loads(path.read_text())
    record["fetched_at"] = "2020-01-01T00:00:00+00:00"  # years old: still at hand
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match="646 km from every state"):
        check_markets_at_hand(sf, url, tmp_path)
    CacheFolder(tmp_path).markets_path(url).write_text("{not json")
    check_markets_at_hand(sf, url, tmp_path)
