"""The ipyleaflet renderer: layers, controls, first view, clicks."""

from __future__ import annotations

import html
import re
from typing import Any

import geopandas as gpd
import ipyleaflet
import ipywidgets
import pandas as pd
import pytest
from shapely.geometry import box

from parcelsearch import maps
from parcelsearch.demo import demo_areas
from parcelsearch.errors import InputError
from parcelsearch.maps import Legend, LegendEntry
from parcelsearch.maps.classification import PALETTE
from parcelsearch.maps.describe import CONNECTOR_LABEL
from parcelsearch.maps.offline_html import OSM_TILES
from parcelsearch.maps.spec import SKIPPED_STYLE, pixels
from parcelsearch.maps.widget import LEGEND_CLASS, LEGEND_OPEN_MAX_PX, legend_height, legend_html

from ._helpers import geojson_layers, popup_table


@pytest.mark.parametrize(
    ("make", "names"),
    [
        pytest.param(lambda a, p, r: maps.areas_map(a), ["Study areas"], id="areas"),
        pytest.param(lambda a, p, r: maps.plan_map(p), ["Pieces", "Study areas"], id="plan"),
        pytest.param(
            lambda a, p, r: maps.result_map(r), ["Pieces", "Study areas"], id="result-without-areas"
        ),
        pytest.param(
            lambda a, p, r: maps.result_map(r, areas=a),
            ["Pieces", "Study areas", "Skipped areas"],
            id="result-with-skipped",
        ),
    ],
)
def test_layers_are_named_and_drawn_in_order(
    make: Any, names: list[str], areas: Any, plan: Any, result: Any
) -> None:
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
    layer._handle_mouse_events(
        None, {"event": "click", "feature": feature, "properties": feature["properties"]}, None
    )
    assert popup_table(layer.popup.value)["parcels matched"] == "250"


def _legend(m: ipyleaflet.Map) -> str:
    """The HTML of a map's legend (a widget control holding a ``<details>`` block)."""
    found = [
        c.widget.value
        for c in m.controls
        if isinstance(c, ipyleaflet.WidgetControl)
        and isinstance(c.widget, ipywidgets.HTML)
        and LEGEND_CLASS in c.widget.value
    ]
    assert len(found) == 1, found
    return str(found[0])


def _legend_entries(legend: str) -> dict[str, str]:
    """Label → swatch colour, "(dashed)" after dashed ones."""
    rows = re.findall(r'background:([^;]+);border:1.5px (\w+) #4d4d4d"></i>(.*?)</div>', legend)
    return {
        html.unescape(label) + (" (dashed)" if style == "dashed" else ""): colour
        for colour, style, label in rows
    }


def test_result_legend_lists_bins_and_outline_styles(areas: Any, result: Any) -> None:
    legend = _legend(maps.result_map(result, areas=areas))
    assert "<summary" in legend and "Parcels matched per piece</summary>" in legend
    assert _legend_entries(legend) == {
        "0": PALETTE[0],
        "1–12": PALETTE[1],
        "13–40": PALETTE[3],
        "41–250": PALETTE[4],
        "not searched (dashed)": "#ffffff",
        "all pages from cache (dashed)": "#ffffff",
        "skipped area (dashed)": SKIPPED_STYLE["fillColor"],
    }


def test_a_short_legend_starts_open_and_a_tall_one_folded(areas: Any, result: Any) -> None:
    short = _legend(maps.areas_map(areas))
    assert re.search(r"<details [^>]* open>", short)
    tall = Legend(
        "Parcels matched per piece",
        tuple(LegendEntry(f"class {i}", "#123456") for i in range(8))
        + (LegendEntry(CONNECTOR_LABEL, "#1a1a1a"),),
    )
    assert legend_height(tall) > LEGEND_OPEN_MAX_PX
    assert not re.search(r"<details [^>]* open>", legend_html(tall))
    assert "max-height:" in legend_html(tall)  # and scrolls when opened


def test_maps_draw_offline_by_default_with_the_bundled_context(result: Any) -> None:
    """No tile layer by default; the bundled context is drawn under areas near it."""
    assert not [x for x in maps.result_map(result).layers if isinstance(x, ipyleaflet.TileLayer)]
    demo = demo_areas().set_index("area_id")
    layers = geojson_layers(maps.areas_map(demo))
    assert list(layers) == ["Context (offline)", "Study areas", "Area markers"]
    assert len(layers["Context (offline)"].data["features"]) > 50
    assert list(geojson_layers(maps.areas_map(demo, context=None))) == [
        "Study areas",
        "Area markers",
    ]


def test_a_context_that_is_not_a_frame_is_refused_naming_the_argument(areas: Any) -> None:
    with pytest.raises(InputError, match=r"context='blocks' .*GeoDataFrame.*\"bundled\""):
        maps.areas_map(areas, context="blocks")  # type: ignore[arg-type]


def test_far_apart_areas_can_be_visited_from_a_list() -> None:
    far = gpd.GeoDataFrame(
        geometry=[box(x, 32, x + 0.005, 32.005) for x in (-100.0, -97.0)],
        index=pd.Index(["a", "b"], name="area_id"),
        crs=4326,
    )
    m = maps.areas_map(far)
    control = next(
        c
        for c in m.controls
        if isinstance(c, ipyleaflet.WidgetControl) and isinstance(c.widget, ipywidgets.Dropdown)
    )
    assert list(control.widget.options) == ["all areas", "a", "b"]
    assert control.widget.value == "a"  # opened on a group, not on 300 km of nothing
    assert m.center == pytest.approx([32.0025, -99.9975], abs=1e-3)
    control.widget.value = "b"
    assert m.center == pytest.approx([32.0025, -96.9975], abs=1e-3)
    assert m.zoom >= 14
    control.widget.value = "all areas"
    assert m.zoom <= 8


def test_far_apart_areas_open_on_the_densest_group() -> None:
    """Three areas near Austin, one near Dallas: the map opens on the three, each readable."""
    near = [(-97.74 + 0.02 * i, 30.27) for i in range(3)]
    far = gpd.GeoDataFrame(
        geometry=[box(x, y, x + 0.01, y + 0.01) for x, y in [(-96.8, 32.78), *near]],
        index=pd.Index(["dallas", "austin-1", "austin-2", "austin-3"], name="area_id"),
        crs=4326,
    )
    m = maps.areas_map(far, context=None)
    west, south, east, north = -97.74, 30.27, -97.69, 30.28
    assert m.center == pytest.approx([(south + north) / 2, (west + east) / 2], abs=0.01)
    assert pixels((-97.74, 30.27, -97.73, 30.28), m.zoom) >= 40  # each area readable


def test_context_is_drawn_first_and_not_clickable(areas: gpd.GeoDataFrame) -> None:
    blocks = gpd.GeoDataFrame(geometry=[box(0.1, 0.1, 0.2, 0.2)], crs=4326)
    m = maps.areas_map(areas, context=blocks)
    assert list(geojson_layers(m)) == ["Context (offline)", "Study areas"]
    assert geojson_layers(m)["Context (offline)"].style["interactive"] is False


def test_without_the_front_end_a_map_shows_as_text(areas: gpd.GeoDataFrame) -> None:
    """The install guide's warning: a JupyterLab without jupyter-leaflet shows the widget's
    text, ``Map(center=[…], …)``, instead of the map."""
    bundle = maps.areas_map(areas)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("Map(center=[")
