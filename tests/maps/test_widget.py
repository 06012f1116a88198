"""The ipyleaflet renderer: layers, controls, first view, clicks."""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import ipyleaflet
import pandas as pd
import pytest
from shapely.geometry import box

from parcelsearch import maps
from parcelsearch.maps.classification import PALETTE
from parcelsearch.maps.offline_html import OSM_TILES
from parcelsearch.maps.spec import SKIPPED_STYLE

from ._helpers import geojson_layers, popup_table


@pytest.mark.parametrize(
    ("make", "names"),
    [
        pytest.param(lambda a, p, r: maps.areas_map(a), ["Study areas"], id="areas"),
        pytest.param(lambda a, p, r: maps.plan_map(p), ["Pieces", "Study areas"], id="plan"),
        pytest.param(lambda a, p, r: maps.result_map(r), ["Pieces", "Study areas"],
                     id="result-without-areas"),
        pytest.param(lambda a, p, r: maps.result_map(r, areas=a),
                     ["Pieces", "Study areas", "Skipped areas"], id="result-with-skipped"),
    ],
)
def test_layers_are_named_and_drawn_in_order(make: Any, names: list[str], areas: Any,
                                             plan: Any, result: Any) -> None:
    m = make(areas, plan, result)
    assert list(geojson_layers(m)) == names
    assert any(isinstance(c, ipyleaflet.LayersControl) for c in m.controls)

@pytest.mark.parametrize(
    ("basemap", "tiles"),
    [pytest.param(True, [OSM_TILES], id="osm"), pytest.param(False, [], id="plain")],
)
def test_basemap_is_osm_or_nothing(basemap: bool, tiles: list[str], result: Any) -> None:
    m = maps.result_map(result, basemap=basemap)
    assert [x.url for x in m.layers if isinstance(x, ipyleaflet.TileLayer)] == tiles

def test_map_is_centred_on_the_areas(areas: gpd.GeoDataFrame) -> None:
    m = maps.areas_map(areas.loc[["a1"]])
    assert m.center == pytest.approx([0.5, 0.5], abs=1e-3)
    assert 6 <= m.zoom <= 9

def test_clicking_a_piece_shows_its_popup(result: Any) -> None:
    layer = geojson_layers(maps.result_map(result))["Pieces"]
    feature = layer.data["features"][2]
    layer._handle_mouse_events(None, {"event": "click", "feature": feature,
                                      "properties": feature["properties"]}, None)
    assert popup_table(layer.popup.value)["parcels matched"] == "250"

def test_result_legend_lists_bins_and_outline_styles(areas: Any, result: Any) -> None:
    legend = next(c for c in maps.result_map(result, areas=areas).controls
                  if isinstance(c, ipyleaflet.LegendControl))
    assert legend.title == "Parcels matched per piece"
    assert legend.legend == {
        "0": PALETTE[0], "1–12": PALETTE[1], "13–40": PALETTE[3],
        "41–250": PALETTE[4], "not searched (dashed)": "#ffffff",
        "all pages from cache (dashed)": "#ffffff",
        "skipped area (dashed)": SKIPPED_STYLE["fillColor"],
    }


def test_far_apart_areas_can_be_visited_from_a_list() -> None:
    far = gpd.GeoDataFrame(
        geometry=[box(x, 32, x + 0.005, 32.005) for x in (-100.0, -97.0)],
        index=pd.Index(["a", "b"], name="area_id"), crs=4326,
    )
    m = maps.areas_map(far)
    control = next(c for c in m.controls if isinstance(c, ipyleaflet.WidgetControl))
    assert list(control.widget.options) == ["all areas", "a", "b"]
    control.widget.value = "b"
    assert m.center == pytest.approx([32.0025, -96.9975], abs=1e-3)
    assert m.zoom >= 14


def test_context_is_drawn_first_and_not_clickable(areas: gpd.GeoDataFrame) -> None:
    blocks = gpd.GeoDataFrame(geometry=[box(0.1, 0.1, 0.2, 0.2)], crs=4326)
    m = maps.areas_map(areas, context=blocks)
    assert list(geojson_layers(m)) == ["Context (offline)", "Study areas"]
    assert geojson_layers(m)["Context (offline)"].style["interactive"] is False
