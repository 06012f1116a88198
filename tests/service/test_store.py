"""ParcelStore: loading checks, matching rules, ordering, the hit-list cache."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import shapely
from geopandas.testing import assert_geodataframe_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from parcelsearch._shared import data_path
from parcelsearch.errors import ConfigurationError
from parcelsearch_service import synth
from parcelsearch_service.polygon import parse_polygon
from parcelsearch_service.store import (
    ParcelStore,
    load_markets,
    load_parcels,
)


@pytest.fixture(scope="module")
def example() -> synth.Example:
    return synth.example_fabric()


@pytest.fixture(scope="module")
def demo() -> ParcelStore:
    return ParcelStore()


def _hits(store: ParcelStore, ring: list[list[float]]) -> list[str]:
    parsed = parse_polygon(json.dumps(ring))
    hits = store.hits(parsed)
    return [gid for page in range(1, len(hits) // 100 + 2) for gid in store.page(hits, page)]


def test_example_answer_in_parcel_id_order(example: synth.Example) -> None:
    store = ParcelStore(example.parcels)
    assert _hits(store, example.ring) == example.expected
    assert list(store.parcel_ids) == sorted(example.parcels.parcel_id)


def test_any_crs_is_reprojected(example: synth.Example) -> None:
    projected = example.parcels.to_crs("EPSG:32614")
    assert _hits(ParcelStore(projected), example.ring) == example.expected


def test_bundled_data_is_found_through_the_package() -> None:
    assert data_path().joinpath("demo_parcels.parquet").is_file()
    assert data_path().joinpath("markets.txt").is_file()
    assert data_path().joinpath("demo_areas.geojson").is_file()


def test_bundled_parcels_equal_the_generator() -> None:
    bundled = load_parcels()
    generated = load_parcels(synth.demo_parcels())
    assert_geodataframe_equal(bundled, generated)


def test_representative_point_on_the_boundary_matches(example: synth.Example) -> None:
    store = ParcelStore(example.parcels)
    x, y = store.x[5], store.y[5]
    ring = [[x, y], [x + 1e-3, y], [x + 1e-3, y + 1e-3], [x, y + 1e-3], [x, y]]
    assert store.group_ids[5] in _hits(store, ring)


def test_intersects_mode_counts_footprints(example: synth.Example) -> None:
    rp = ParcelStore(example.parcels)
    fp = ParcelStore(example.parcels, match="intersects")
    assert len(fp.hits(parse_polygon(json.dumps(example.ring)))) == 276
    x, y = rp.x[0], rp.y[0]
    tiny = [[x, y], [x + 1e-4, y], [x + 1e-4, y + 1e-4], [x, y]]
    parsed = parse_polygon(json.dumps(tiny))
    assert len(fp.hits(parsed)) >= len(rp.hits(parsed))


def test_hit_lists_are_cached_and_evicted(example: synth.Example) -> None:
    store = ParcelStore(example.parcels, cache_size=1)
    first = parse_polygon(json.dumps(example.ring))
    hits = store.hits(first)
    assert store.hits(parse_polygon(json.dumps([example.ring]))) is hits
    assert not hits.flags.writeable
    store.hits(parse_polygon("[[0,0],[1,0],[1,1],[0,0]]"))
    assert store.hits(first) is not hits


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0005, 0.01), st.floats(0.0005, 0.01))
def test_matches_equal_brute_force_covers(
    demo: ParcelStore, fx: float, fy: float, w: float, h: float
) -> None:
    xmin, ymin, xmax, ymax = -99.745, 32.44, -99.70, 32.465
    x, y = xmin + fx * (xmax - xmin), ymin + fy * (ymax - ymin)
    ring = [[x, y], [x + w, y + h / 3], [x + w / 2, y + h], [x, y]]
    parsed = parse_polygon(json.dumps(ring))
    expected = np.flatnonzero(shapely.covers(parsed.polygon, shapely.points(demo.x, demo.y)))
    assert np.array_equal(demo.hits(parsed), expected)


def _frame(**columns: object) -> gpd.GeoDataFrame:
    square = shapely.box(-99.7, 32.4, -99.69, 32.41)
    base = {"parcel_id": [1, 2], "group_id": ["0123456789abcdef0", "0123456789abcdef1"]}
    base.update(columns)  # type: ignore[arg-type]
    geometry = base.pop("geometry", [square, square])
    return gpd.GeoDataFrame(base, geometry=geometry, crs=base.pop("crs", "EPSG:4326"))


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        pytest.param(
            _frame().drop(columns="group_id"), "lacks column\\(s\\) group_id", id="no-group-id"
        ),
        pytest.param(_frame(parcel_id=[7, 7]), "parcel_id 7 appears 2 times", id="duplicate"),
        pytest.param(
            _frame(group_id=["0123456789ABCDEF0", "0123456789abcdef1"]),
            "17 lowercase hexadecimal",
            id="uppercase-group-id",
        ),
        pytest.param(
            _frame(group_id=["abc", "0123456789abcdef1"]),
            "parcel_id 1 has group_id 'abc'",
            id="short-group-id",
        ),
        pytest.param(
            _frame(geometry=[shapely.Point(0, 0), shapely.box(0, 0, 1, 1)]),
            "parcel_id 1 has Point",
            id="point",
        ),
        pytest.param(
            _frame(geometry=[None, shapely.box(0, 0, 1, 1)]),
            "parcel_id 1 has no geometry",
            id="missing-geometry",
        ),
    ],
)
def test_bad_parcels_are_refused(frame: gpd.GeoDataFrame, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        load_parcels(frame)


def test_no_crs_and_projected_coordinates_is_refused() -> None:
    frame = _frame().to_crs("EPSG:3857").set_crs(None, allow_override=True)
    with pytest.raises(ConfigurationError, match="no CRS"):
        load_parcels(frame)


def test_parcels_from_files(tmp_path: Path, example: synth.Example) -> None:
    example.parcels.to_parquet(tmp_path / "p.parquet")
    example.parcels.to_file(tmp_path / "p.gpkg")
    a, b = load_parcels(tmp_path / "p.parquet"), load_parcels(tmp_path / "p.gpkg")
    assert a.parcel_id.tolist() == b.parcel_id.tolist()
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_parcels(tmp_path / "missing.parquet")


def test_markets_from_lines_json_and_lists(tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text("# comment\nWaco, TX\n\n Abilene, TX \nWaco, TX\n")
    (tmp_path / "m.json").write_text('["Waco, TX", "Abilene, TX"]')
    assert load_markets(tmp_path / "m.txt") == ["Abilene, TX", "Waco, TX"]
    assert load_markets(tmp_path / "m.json") == ["Abilene, TX", "Waco, TX"]
    assert load_markets(["b", "a"]) == ["a", "b"]
    assert load_markets() == list(synth.MARKET_NAMES)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ConfigurationError, match="JSON list of strings"):
        load_markets(tmp_path / "bad.json")
