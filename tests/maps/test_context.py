"""The offline context layer: only shapes near the views, quiet and not clickable; and the
bundled demo context matches its generator."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import geopandas as gpd
import pytest
import shapely
from shapely.geometry import box

from parcelsearch import maps
from parcelsearch.demo import demo_areas, demo_context
from parcelsearch.maps.context import CONTEXT_NAME, context_layer
from parcelsearch.maps.spec import CONTEXT_STYLE

ROOT = Path(__file__).resolve().parents[2]


def test_only_shapes_near_the_views_are_kept() -> None:
    blocks = gpd.GeoDataFrame(
        geometry=[box(0, 0, 1, 1), box(1.2, 0, 2, 1), box(50, 50, 51, 51)], crs=4326
    )
    layer = context_layer(blocks, [(0.0, 0.0, 1.0, 1.0)])
    assert layer is not None and layer.name == CONTEXT_NAME
    assert [f["geometry"]["coordinates"][0][0][0] for f in layer.geojson["features"]] == [1, 2]
    assert {f["properties"]["style"]["interactive"] for f in layer.geojson["features"]} == {False}
    assert context_layer(blocks, [(10.0, 10.0, 11.0, 11.0)]) is None


def test_context_in_metres_is_drawn_in_lon_lat() -> None:
    blocks = gpd.GeoDataFrame(geometry=[box(0, 0, 1, 1)], crs=4326).to_crs(3857)
    layer = context_layer(blocks, [(0.0, 0.0, 1.0, 1.0)])
    assert layer is not None
    assert shapely.geometry.shape(layer.geojson["features"][0]["geometry"]).bounds == (
        0.0,
        0.0,
        1.0,
        1.0,
    )


def test_maps_draw_the_context_under_everything() -> None:
    areas = demo_areas().set_index("area_id")
    spec = maps.areas_map(areas, context=demo_context()).parcelsearch_spec
    assert spec.context is not None
    assert spec.context.geojson["features"][0]["properties"]["style"] == CONTEXT_STYLE
    under = demo_context().sindex.query(shapely.union_all(areas.geometry.values), "intersects")
    drawn = len(spec.context.geojson["features"])
    assert 40 <= len(under) < drawn <= len(demo_context())  # the blocks under and around


@pytest.mark.slow
def test_the_demo_context_is_small_and_matches_its_generator(tmp_path: Path) -> None:
    committed = ROOT / "data" / "demo_context.geojson"
    assert committed.stat().st_size < 300_000
    spec = importlib.util.spec_from_file_location(
        "make_demo_context", ROOT / "data" / "make_demo_context.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(tmp_path / "context.geojson")]) == 0
    fresh, bundled = gpd.read_file(tmp_path / "context.geojson"), demo_context()
    assert len(fresh) == len(bundled) == 304
    assert list(fresh["market"]) == list(bundled["market"])
    a, b = fresh.geometry.values, bundled.geometry.values
    moved = shapely.area(shapely.symmetric_difference(a, b)) / shapely.area(b)
    assert float(moved.max()) < 1e-3  # the same blocks, up to GEOS rounding
