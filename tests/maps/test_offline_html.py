"""The self-contained HTML page."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import geopandas as gpd
import ipyleaflet
import pandas as pd
import pytest
from shapely.geometry import box

from parcelsearch import maps
from parcelsearch.maps.offline_html import OSM_TILES

from ._helpers import EVIL, geojson_layers, parse_page


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a, p, r: a, id="areas"),
        pytest.param(lambda a, p, r: p, id="plan"),
        pytest.param(lambda a, p, r: r, id="result"),
        pytest.param(lambda a, p, r: maps.result_map(r, areas=a), id="map"),
    ],
)
@pytest.mark.parametrize("basemap", [pytest.param(True, id="osm"), pytest.param(False, id="plain")])
def test_html_is_self_contained(
    make: Any, basemap: bool, areas: Any, plan: Any, result: Any, tmp_path: Path
) -> None:
    path = maps.save_html(
        make(areas, plan, result), tmp_path / "map.html", basemap=basemap, areas=areas
    )
    page, data = parse_page(path)
    text = path.read_text(encoding="utf-8")
    assert [t for t, attrs in page.tags if t in {"link", "iframe", "img", "object", "embed"}] == []
    assert [attrs for attrs, _ in page.scripts if "src" in attrs] == []
    assert re.findall(r"url\((?!data:|#default#VML)", text) == []
    assert "@import" not in text and "sourceMappingURL" not in text
    allowed = {"http://www.w3.org/2000/svg", "https://leafletjs.com"}  # inside leaflet.js
    if basemap:
        allowed |= {OSM_TILES, "https://www.openstreetmap.org/copyright"}
    assert set(re.findall(r"https?://[^\"'\s<>\\]+", text)) <= allowed
    assert (data["tiles"] == OSM_TILES) is basemap


def test_html_draws_the_same_map_as_the_notebook(areas: Any, result: Any, tmp_path: Path) -> None:
    m = maps.result_map(result, areas=areas)
    _, data = parse_page(maps.save_html(m, tmp_path / "map.html"))
    assert [x["name"] for x in data["layers"]] == ["Pieces", "Study areas", "Skipped areas"]
    assert [x["geojson"] for x in data["layers"]] == json.loads(
        json.dumps([geojson_layers(m)[x].data for x in geojson_layers(m)])
    )
    assert data["bounds"] == [[0.0, 0.0], [7.0, 7.0]]
    assert "41–250" in data["legend"]


def test_saving_a_map_or_its_result_writes_the_same_file(
    areas: Any, result: Any, tmp_path: Path
) -> None:
    from_map = maps.save_html(maps.result_map(result, areas=areas), tmp_path / "a.html")
    from_result = maps.save_html(result, tmp_path / "b.html", areas=areas)
    assert from_map.read_bytes() == from_result.read_bytes()


def test_html_data_cannot_close_its_script(tmp_path: Path) -> None:
    nasty = "</script><script>alert(1)</script><!--"
    feature = {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [0, 0]},
        "properties": {"style": {}, "popup": "", "tooltip": "", "note": nasty},
    }
    spec = maps.MapSpec(
        "t",
        (maps.LayerSpec("x", {"type": "FeatureCollection", "features": [feature]}),),
        None,
        None,
    )
    page, data = parse_page(maps.save_html(spec, tmp_path / "map.html"))
    assert len(page.scripts) == 3
    assert data["layers"][0]["geojson"]["features"][0]["properties"]["note"] == nasty


def test_html_escapes_user_text(areas: Any, result: Any, tmp_path: Path) -> None:
    path = maps.save_html(result, tmp_path / "map.html", title=f"Study {EVIL}", areas=areas)
    page, data = parse_page(path)
    assert EVIL not in path.read_text(encoding="utf-8")
    assert [t for t, _ in page.tags].count("script") == 3
    assert html.escape(EVIL) in data["layers"][1]["geojson"]["features"][1]["properties"]["popup"]


def test_html_inlines_the_vendored_leaflet_with_its_licence(areas: Any, tmp_path: Path) -> None:
    static = resources.files("parcelsearch") / "_static"
    assert "BSD 2-Clause" in (static / "LICENSE-leaflet").read_text(encoding="utf-8")
    _, data = parse_page(maps.save_html(areas, tmp_path / "map.html"))
    page = (tmp_path / "map.html").read_text(encoding="utf-8")
    assert 'version="1.9.4"' in page
    assert data["layers"][0]["name"] == "Study areas"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(ipyleaflet.Map(), "not made by parcelsearch", id="foreign-map"),
        pytest.param(pd.DataFrame({"x": [1]}), "cannot map a DataFrame", id="plain-frame"),
    ],
)
def test_save_html_refuses_what_it_cannot_draw(obj: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=message):
        maps.save_html(obj, tmp_path / "map.html")
    assert not (tmp_path / "map.html").exists()


def far_apart() -> gpd.GeoDataFrame:
    """Three 500 m squares a few hundred kilometres apart."""
    return gpd.GeoDataFrame(
        {"name": ["A", "B", "C"]},
        geometry=[box(x, 32, x + 0.005, 32.005) for x in (-100.0, -97.0, -104.0)],
        index=pd.Index(["a", "b", "c"], name="area_id"),
        crs=4326,
    )


def test_far_apart_areas_get_one_panel_each_without_markers(tmp_path: Path) -> None:
    spec = maps.areas_map(far_apart()).parcelsearch_spec
    assert "Area markers" in [x.name for x in spec.layers]  # the widget's overview needs them
    _, data = parse_page(maps.save_html(spec, tmp_path / "map.html"))
    assert [p["title"] for p in data["panels"]] == ["A (a)", "B (b)", "C (c)"]
    assert data["panels"][0]["bounds"] == [[32.0, -100.0], [32.005, -99.995]]
    assert [x["name"] for x in data["layers"]] == ["Study areas"]
    assert "area marker" not in data["legend"]
    assert '<div id="panels">' in (tmp_path / "map.html").read_text(encoding="utf-8")


def test_close_areas_get_one_map(areas: Any, tmp_path: Path) -> None:
    _, data = parse_page(maps.save_html(areas, tmp_path / "map.html"))
    assert data["panels"] == []
    assert '<div id="map">' in (tmp_path / "map.html").read_text(encoding="utf-8")


def test_context_is_kept_from_a_map_or_added_when_saving(areas: Any, tmp_path: Path) -> None:
    blocks = gpd.GeoDataFrame(geometry=[box(0.1, 0.1, 0.2, 0.2)], crs=4326)
    _, plain = parse_page(maps.save_html(areas, tmp_path / "a.html"))
    _, added = parse_page(maps.save_html(areas, tmp_path / "b.html", context=blocks))
    _, kept = parse_page(maps.save_html(maps.areas_map(areas, context=blocks), tmp_path / "c.html"))
    assert plain["context"] is None
    assert added["context"] == kept["context"]
    assert len(kept["context"]["geojson"]["features"]) == 1


def test_the_page_offers_the_notebook_maps_go_to_list(tmp_path: Path) -> None:
    """Issue 59: an area far from all the others is left out of the first view and listed;
    the offline page's go-to list is the widget's, the view opened on first."""
    import ipywidgets

    plots = [
        box(
            530_000 + 190 * ((7 * k) % 16),
            175_000 + 170 * ((5 * k) % 16),
            530_030 + 190 * ((7 * k) % 16),
            175_030 + 170 * ((5 * k) % 16),
        )
        for k in range(15)
    ]  # 15 plots of 30 m over 3 km of London, one in Leeds
    frame = gpd.GeoDataFrame(
        geometry=[*plots, box(430_000, 433_000, 430_030, 433_030)],
        index=pd.Index([*(f"p{k}" for k in range(15)), "leeds"], name="area_id"),
        crs=27700,
    )
    m = maps.areas_map(frame, context=None)
    spec = m.parcelsearch_spec
    assert [v.title for v in spec.listed] == ["leeds"]
    dropdown = next(
        c.widget
        for c in m.controls
        if isinstance(c, ipyleaflet.WidgetControl) and isinstance(c.widget, ipywidgets.Dropdown)
    )
    _, data = parse_page(maps.save_html(m, tmp_path / "map.html"))
    assert data["panels"] == []  # one map, opened on the 15 in London
    assert [g["title"] for g in data["go_to"]] == list(dropdown.options)
    assert dropdown.options[:2] == ("all areas", spec.focus.title) and "leeds" in dropdown.options
    assert dropdown.value == spec.focus.title and data["go_to_start"] == 1
    (south, west), (north, east) = data["focus"]
    assert 51.4 < south < north < 51.5 and -0.2 < west < east < 0.0
