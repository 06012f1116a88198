"""Areas far from any land, or from every state with an active market, refused for free;
real coasts and islands (the bundled land is coarse) never (issue 49)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyarrow.parquet as pq
import pyproj
import pytest
import shapely
from shapely import box

from parcelsearch._shared import data_path
from parcelsearch.errors import InputError
from parcelsearch.planning import land
from parcelsearch.planning.areas import validate_areas

TRACTS = Path(__file__).resolve().parent / "data" / "sf_tracts_2020.geojson"

#: Real places on coasts and islands, lon/lat: the 1:110m coast misses most of them (Key
#: West 94 km from it, Guam 1,800 km, Pitcairn 5,000 km), the island and state boxes do not.
ISLANDS = {
    "Key West": (-81.78, 24.555),
    "Dry Tortugas": (-82.87, 24.63),
    "Niihau": (-160.15, 21.9),
    "Hilo": (-155.09, 19.72),
    "Guam": (144.79, 13.44),
    "Pago Pago": (-170.70, -14.28),
    "Saipan": (145.75, 15.18),
    "Bermuda": (-64.78, 32.30),
    "St Croix": (-64.75, 17.73),
    "Midway": (-177.37, 28.21),
    "Farallon Islands": (-123.0, 37.70),
    "San Clemente Island": (-118.5, 32.9),
    "Nantucket": (-70.1, 41.28),
    "Male": (73.51, 4.175),
    "Tarawa": (173.0, 1.42),
    "Pitcairn": (-130.1, -25.07),
    "Wake": (166.63, 19.29),
    "Attu": (173.2, 52.9),
    "Malta": (14.5, 35.9),
    "Taveuni": (-179.97, -16.8),
}


def _square(lon: float, lat: float, half: float = 0.004) -> shapely.Polygon:
    return box(lon - half, lat - half, lon + half, lat + half)


def _in(crs: str, geoms: list[shapely.Geometry], ids: list[str]) -> gpd.GeoDataFrame:
    frame = gpd.GeoDataFrame({"area_id": ids}, geometry=geoms, crs=4326)
    return frame.to_crs(crs)


def test_real_coasts_and_islands_are_not_refused() -> None:
    """Each island, declared in web mercator (metres) as a file would be: no refusal."""
    names = list(ISLANDS)
    areas = _in("EPSG:3857", [_square(*ISLANDS[n]) for n in names], names)
    assert list(validate_areas(areas).index) == names
    tracts = gpd.read_file(TRACTS).to_crs("EPSG:2227")  # a state plane, in feet
    assert len(validate_areas(tracts, id_column="tract")) == len(tracts)


def test_an_area_across_the_antimeridian_is_not_refused() -> None:
    """Fiji's Taveuni, a box drawn across ±180° in a CRS centred on the Pacific."""
    across = gpd.GeoDataFrame(
        {"area_id": ["taveuni"]}, geometry=[box(179.95, -16.9, 180.05, -16.7)], crs=4326
    )
    pacific = across.to_crs("EPSG:3832")  # PDC Mercator, metres, centred at 150°E
    validated = validate_areas(pacific)
    assert validated.geometry.iloc[0].geom_type == "MultiPolygon"  # split at ±180°


def test_kilometres_declared_as_metres_land_at_sea_and_are_refused_naming_the_rows() -> None:
    """SF tracts in web mercator kilometres, declared in metres: 557 km from land, near
    0, 0; refused naming the row, the distance, the CRS to declare and trust_crs."""
    tracts = gpd.read_file(TRACTS).to_crs("EPSG:3857").iloc[:1]
    tracts["geometry"] = tracts.geometry.scale(1e-3, 1e-3, origin=(0, 0))
    row = tracts["tract"].iloc[0]
    with pytest.raises(InputError) as caught:
        validate_areas(tracts, id_column="tract")
    error = caught.value
    assert error.row == row and error.field == "crs"
    assert (
        f"area {row!r} lies about 557 km from the nearest land (farther than 50 km) once "
        "read in EPSG:3857: out at sea" in str(error)
    )
    assert "Declare the CRS they are really in with --crs EPSG:CODE." in error.render("cli")
    assert "If the CRS is right, pass --trust-crs." in error.render("cli")
    assert "If the CRS is right, pass trust_crs=True." in error.render("python")
    assert len(validate_areas(tracts, id_column="tract", trust_crs=True)) == 1


def test_many_far_areas_are_named_five_and_not_all_measured() -> None:
    """Thousands of areas out at sea: the first five named with their distances, the rest
    not measured (refusing needs only those)."""
    rng = np.random.default_rng(7)
    xs, ys = rng.uniform(-30, -15, 2_000), rng.uniform(-40, -20, 2_000)  # South Atlantic
    geoms = shapely.box(xs, ys, xs + 0.01, ys + 0.01)
    with pytest.raises(InputError) as caught:
        land.check_near_land(geoms, list(range(2_000)), "EPSG:3857")
    text = str(caught.value)
    assert text.startswith(
        "areas 0, 1, 2, 3, 4 (and maybe others of the 1,995 not measured) lie about "
    )
    assert caught.value.row == 0


def test_latitude_and_longitude_swapped_are_refused_bare_geometries_are_not() -> None:
    """Paris written (latitude, longitude) in a frame declared EPSG:4326 lies off Somalia:
    refused, saying so. Bare shapely geometries declare no CRS (they are taken as
    longitude/latitude): not checked."""
    swapped = gpd.GeoDataFrame({"area_id": ["paris"]}, geometry=[_square(48.85, 2.35)], crs=4326)
    with pytest.raises(
        InputError,
        match=r"area 'paris' lies about 229 km from the nearest "
        r"land .* once read in EPSG:4326: out at sea, .*"
        r"\(latitude and longitude swapped, a sign dropped\)",
    ):
        validate_areas(swapped)
    assert len(validate_areas(swapped, trust_crs=True)) == 1
    assert len(validate_areas([box(0, 0, 0.01, 0.01)])) == 1


def test_areas_far_from_every_market_state_are_refused_naming_the_states() -> None:
    sf = np.array([_square(-122.44, 37.76)])
    abilene = np.array([_square(-99.74, 32.45)])
    markets = ["Abilene, TX", "Boise, ID", "Tarrant County Unincorporated, TX"]
    land.check_near_markets(abilene, ["a"], markets)
    with pytest.raises(InputError) as caught:
        land.check_near_markets(sf, ["sf"], markets)
    assert str(caught.value).startswith(
        "area 'sf' lies about 646 km from every state with an active market (farther than "
        "50 km from ID, TX: 3 markets in the cached market list)"
    )
    assert "If the areas are right, pass --trust-markets." in caught.value.render("cli")
    assert "pass trust_markets=True" in caught.value.render("python")
    land.check_near_markets(sf, ["sf"], ["San Jose, CA", *markets])
    land.check_near_markets(sf, ["sf"], ["Somewhere", "Elsewhere, ZZ"])  # no state: no word


def test_market_states_are_the_boxed_two_letter_codes() -> None:
    assert land.market_states(["Abilene, TX", "Washington, DC", "Honolulu, HI", "x, ZZ"]) == [
        "DC",
        "HI",
        "TX",
    ]


def test_the_bundled_state_boxes_are_the_epsg_databases() -> None:
    """land.parquet's states are the EPSG database's "USA - <state>" boxes (pyproj's
    proj.db), so a newer database shows here first."""
    table = pq.read_table(data_path("land.parquet")).to_pandas()
    states = table[table["kind"] == "state"]
    assert len(set(states["name"])) == 51  # 50 states and DC
    database = os.path.join(pyproj.datadir.get_data_dir(), "proj.db")
    with sqlite3.connect(database) as connection:
        south, north, west, east = connection.execute(
            "SELECT south_lat, north_lat, west_lon, east_lon FROM extent "
            "WHERE name = 'USA - Texas' AND deprecated = 0"
        ).fetchone()
    texas = shapely.from_wkb(states.loc[states["name"] == "TX", "wkb"].iloc[0])
    assert texas.bounds == pytest.approx((west, south, east, north), abs=0.006)
    kinds = table["kind"].value_counts().to_dict()
    assert kinds["country"] > 250 and kinds["capital"] > 200 and kinds["extent"] > 400
