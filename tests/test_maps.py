"""Maps: the layer specs, the ipyleaflet renderer and the self-contained HTML writer."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import geopandas as gpd
import ipyleaflet
import pandas as pd
import pytest
from shapely.geometry import MultiPolygon, Polygon, box

from parcelsearch import maps

EVIL = "<script>alert(1)</script>"


# ---------------------------------------------------------------------------- stand-ins


@pytest.fixture
def areas() -> gpd.GeoDataFrame:
    """Four study areas: a square, one with a hole, a two-part one and one to be skipped."""
    holed = Polygon(box(1, 0, 2, 1).exterior.coords, [box(1.4, 0.4, 1.6, 0.6).exterior.coords])
    return gpd.GeoDataFrame(
        {
            "name": ["North", EVIL, "Twin sites", "Ranch"],
            "market": ["Abilene", "Abilene", "Boise", "Marfa"],
        },
        geometry=[box(0, 0, 1, 1), holed,
                  MultiPolygon([box(3, 0, 3.5, 0.5), box(4, 0, 4.5, 0.5)]), box(6, 6, 7, 7)],
        index=pd.Index(["a1", "a2", "a3", "a4"], name="area_id"),
        crs=4326,
    )


@pytest.fixture
def plan(areas: gpd.GeoDataFrame) -> SimpleNamespace:
    """A plan over the first three areas: a1 in two halves, a2 whole, a3 one piece per part."""
    geometry = [box(0, 0, 0.5, 1), box(0.5, 0, 1, 1), areas.geometry["a2"],
                box(3, 0, 3.5, 0.5), box(4, 0, 4.5, 0.5)]
    tiles = gpd.GeoDataFrame(
        {
            "area_id": ["a1", "a1", "a2", "a3", "a3"],
            "piece_id": [0, 1, 0, 0, 1],
            "vertices": [5, 5, 10, 5, 5],
            "request_bytes": [310, 312, 6840, 309, 311],
            "min_calls": [1, 1, 1, 1, 1],
        },
        geometry=geometry, crs=4326,
    )
    return SimpleNamespace(areas=areas.loc[["a1", "a2", "a3"]], id_name="area_id", tiles=tiles)


@pytest.fixture
def result(plan: SimpleNamespace) -> SimpleNamespace:
    """Matched 0, 12, 250 (3 pages, 1 cached), 40 (all cached) parcels; one piece not searched."""
    tiles = plan.tiles[["area_id", "piece_id", "geometry"]].copy()
    tiles["rows"] = pd.array([0, 12, 250, 40, None], dtype="Int64")
    tiles["pages"] = pd.array([1, 1, 3, 1, None], dtype="Int64")
    tiles["pages_fetched"] = [1, 1, 3, 1, 0]
    tiles["calls"] = [1, 1, 2, 0, 0]
    tiles["cached_pages"] = [0, 0, 1, 1, 0]
    tiles["from_cache"] = [False, False, False, True, False]
    skipped = pd.DataFrame(
        {"market": ["Marfa"], "reason": ["market not active"], "suggestion": ["Alpine"]},
        index=pd.Index(["a4"], name="area_id"),
    )
    return SimpleNamespace(plan=plan, id_name="area_id", tiles=tiles, skipped=skipped)


# ---------------------------------------------------------------------------- helpers


def geojson_layers(m: ipyleaflet.Map) -> dict[str, ipyleaflet.GeoJSON]:
    return {layer.name: layer for layer in m.layers if isinstance(layer, ipyleaflet.GeoJSON)}


def popup_table(popup: str) -> dict[str, str]:
    """A popup's table as {label: text}, unescaped."""
    cells = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", popup)
    return {html.unescape(k): html.unescape(v) for k, v in cells}


def popups(layer: maps.LayerSpec | ipyleaflet.GeoJSON) -> list[dict[str, str]]:
    data = layer.geojson if isinstance(layer, maps.LayerSpec) else layer.data
    return [popup_table(f["properties"]["popup"]) for f in data["features"]]


def piece(m: ipyleaflet.Map, area: str, piece_id: int) -> dict[str, Any]:
    """The feature of one piece in a map's "Pieces" layer."""
    label = {"a1": "North (a1)", "a2": f"{EVIL} (a2)", "a3": "Twin sites (a3)"}[area]
    feature: dict[str, Any]
    for feature in geojson_layers(m)["Pieces"].data["features"]:
        table = popup_table(feature["properties"]["popup"])
        if table["area"] == label and table["piece"] == str(piece_id):
            return feature
    raise LookupError((area, piece_id))


class Page(HTMLParser):
    """Collects a page's tags and the text of its scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None


def parse_page(path: Path) -> tuple[Page, dict[str, Any]]:
    """The parsed page and the map data its script reads."""
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    data = [text for attrs, text in page.scripts if attrs.get("id") == "ps-spec"]
    assert len(data) == 1
    return page, json.loads(data[0])


# ---------------------------------------------------------------------------- ipyleaflet


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
    [pytest.param(True, [maps.OSM_TILES], id="osm"), pytest.param(False, [], id="plain")],
)
def test_basemap_is_osm_or_nothing(basemap: bool, tiles: list[str], result: Any) -> None:
    m = maps.result_map(result, basemap=basemap)
    assert [x.url for x in m.layers if isinstance(x, ipyleaflet.TileLayer)] == tiles


def test_map_is_centred_on_the_areas(areas: gpd.GeoDataFrame) -> None:
    m = maps.areas_map(areas.loc[["a1"]])
    assert m.center == pytest.approx([0.5, 0.5], abs=1e-3)
    assert 6 <= m.zoom <= 9


def test_areas_in_another_crs_are_drawn_in_lon_lat(areas: gpd.GeoDataFrame) -> None:
    spec = maps.areas_map(areas.to_crs(3857)).parcelsearch_spec
    assert spec.bounds == pytest.approx(tuple(areas.total_bounds), abs=1e-6)


def test_areas_without_crs_in_metres_are_refused(areas: gpd.GeoDataFrame) -> None:
    metres = areas.to_crs(3857).set_crs(None, allow_override=True)
    with pytest.raises(ValueError, match="no CRS"):
        maps.areas_map(metres)


@pytest.mark.parametrize(
    ("centres", "markers"),
    [
        pytest.param([(0, 0)], [], id="one-area-fills-the-view"),
        pytest.param([(0, 0), (0.01, 0)], [], id="neighbours"),
        pytest.param([(0, 0), (10, 5)], ["a0", "a1"], id="far-apart"),
    ],
)
def test_specks_get_a_marker(centres: list[tuple[float, float]], markers: list[str]) -> None:
    tiny = gpd.GeoDataFrame(
        geometry=[box(x, y, x + 0.002, y + 0.002) for x, y in centres],
        index=pd.Index([f"a{i}" for i in range(len(centres))], name="area_id"), crs=4326,
    )
    m = maps.areas_map(tiny)
    layer = geojson_layers(m).get("Area markers")
    shown = [] if layer is None else [p["area_id"] for p in popups(layer)]
    assert shown == markers
    if layer is not None:
        assert {f["geometry"]["type"] for f in layer.data["features"]} == {"Point"}


def test_area_popups_show_id_name_market_and_size(areas: gpd.GeoDataFrame) -> None:
    first = popups(maps.areas_map(areas).parcelsearch_spec.layer("Study areas"))[0]
    assert first == {"area_id": "a1", "name": "North", "market": "Abilene",
                     "area (km²)": "12,308.78"}  # 1°×1° at the equator


def test_area_id_may_be_a_column(areas: gpd.GeoDataFrame) -> None:
    spec = maps.areas_map(areas.reset_index(), id_name="area_id").parcelsearch_spec
    assert [p["area_id"] for p in popups(spec.layer("Study areas"))] == ["a1", "a2", "a3", "a4"]


def test_plan_popups_show_request_figures(plan: Any) -> None:
    table = popups(maps.plan_map(plan).parcelsearch_spec.layer("Pieces"))[2]
    assert table == {"area": f"{EVIL} (a2)", "piece": "0", "vertices": "10",
                     "request bytes": "6,840", "min calls": "1"}


@pytest.mark.parametrize(
    ("area", "piece_id", "expected"),
    [
        pytest.param("a1", 0, {"parcels matched": "0", "pages": "1", "calls": "1",
                               "cached": "no"}, id="nothing-matched"),
        pytest.param("a2", 0, {"parcels matched": "250", "pages": "3", "calls": "2",
                               "cached": "1 of 3 pages"}, id="partly-cached"),
        pytest.param("a3", 0, {"parcels matched": "40", "pages": "1", "calls": "0",
                               "cached": "yes"}, id="all-cached"),
        pytest.param("a3", 1, {"parcels matched": "not searched", "pages": "—", "calls": "0",
                               "cached": "no"}, id="not-searched"),
    ],
)
def test_result_popups_show_the_figures(result: Any, area: str, piece_id: int,
                                        expected: dict[str, str]) -> None:
    table = popup_table(piece(maps.result_map(result), area, piece_id)["properties"]["popup"])
    assert {k: table[k] for k in expected} == expected


def test_missing_cache_flags_read_as_not_cached(result: Any) -> None:
    result.tiles["from_cache"] = pd.array([None, False, None, True, None], dtype="boolean")
    m = maps.result_map(result)
    assert popup_table(piece(m, "a1", 0)["properties"]["popup"])["cached"] == "no"
    assert popup_table(piece(m, "a3", 0)["properties"]["popup"])["cached"] == "yes"


def test_clicking_a_piece_shows_its_popup(result: Any) -> None:
    layer = geojson_layers(maps.result_map(result))["Pieces"]
    feature = layer.data["features"][2]
    layer._handle_mouse_events(None, {"event": "click", "feature": feature,
                                      "properties": feature["properties"]}, None)
    assert popup_table(layer.popup.value)["parcels matched"] == "250"


@pytest.mark.parametrize(
    ("values", "breaks"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([0, 0, None], [], id="only-zero-and-missing"),
        pytest.param([5, 5, 5], [(1, 5)], id="one-value"),
        pytest.param([0, 1, 2, 3, 4, 5, 6, 7, 8], [(1, 2), (3, 4), (5, 6), (7, 8)],
                     id="quartiles"),
        pytest.param([1, 1, 1, 1, 1, 1, 1, 900], [(1, 1), (2, 900)], id="skewed"),
        pytest.param([12, 250, 40], [(1, 12), (13, 40), (41, 250)], id="fewer-than-classes"),
    ],
)
def test_class_breaks(values: list[Any], breaks: list[tuple[int, int]]) -> None:
    assert maps.class_breaks(values) == breaks


def test_result_legend_lists_bins_and_outline_styles(areas: Any, result: Any) -> None:
    legend = next(c for c in maps.result_map(result, areas=areas).controls
                  if isinstance(c, ipyleaflet.LegendControl))
    assert legend.title == "Parcels matched per piece"
    assert legend.legend == {
        "0": maps.PALETTE[0], "1–12": maps.PALETTE[1], "13–40": maps.PALETTE[3],
        "41–250": maps.PALETTE[4], "not searched (dashed)": "#ffffff",
        "all pages from cache (dashed)": "#ffffff",
        "skipped area (dashed)": maps.SKIPPED_STYLE["fillColor"],
    }


@pytest.mark.parametrize(
    ("area", "piece_id", "fill", "dashed"),
    [
        pytest.param("a1", 0, maps.PALETTE[0], False, id="zero"),
        pytest.param("a1", 1, maps.PALETTE[1], False, id="low"),
        pytest.param("a2", 0, maps.PALETTE[4], False, id="high"),
        pytest.param("a3", 0, maps.PALETTE[3], True, id="cached-is-dashed"),
    ],
)
def test_pieces_are_coloured_by_parcels_matched(result: Any, area: str, piece_id: int,
                                                fill: str, dashed: bool) -> None:
    style = piece(maps.result_map(result), area, piece_id)["properties"]["style"]
    assert (style["fillColor"], "dashArray" in style) == (fill, dashed)


def test_skipped_areas_say_why(areas: Any, result: Any) -> None:
    spec = maps.result_map(result, areas=areas).parcelsearch_spec
    assert popups(spec.layer("Skipped areas")) == [
        {"area_id": "a4", "name": "Ranch", "market": "Marfa", "reason": "market not active",
         "suggestion": "Alpine"}
    ]
    assert spec.layer("Skipped areas").geojson["features"][0]["properties"]["style"][
        "dashArray"] == maps.SKIPPED_STYLE["dashArray"]


def test_user_text_is_escaped_in_popups_and_tooltips(plan: Any) -> None:
    feature = maps.plan_map(plan).parcelsearch_spec.layer("Study areas").geojson["features"][1]
    shown = feature["properties"]["popup"] + feature["properties"]["tooltip"]
    assert EVIL not in shown
    assert html.escape(EVIL) in shown


def test_coordinates_are_rounded_to_six_decimals(areas: gpd.GeoDataFrame) -> None:
    wobbly = areas.set_geometry(areas.geometry.translate(1e-9 / 3, 1 / 3))
    text = json.dumps(maps.areas_map(wobbly).parcelsearch_spec.layer("Study areas").geojson)
    assert re.findall(r"\d\.\d{7,}", text) == []
    assert "0.333333" in text


# ---------------------------------------------------------------------------- HTML


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
def test_html_is_self_contained(make: Any, basemap: bool, areas: Any, plan: Any, result: Any,
                                tmp_path: Path) -> None:
    path = maps.save_html(make(areas, plan, result), tmp_path / "map.html", basemap=basemap,
                          areas=areas)
    page, data = parse_page(path)
    text = path.read_text(encoding="utf-8")
    assert [t for t, attrs in page.tags if t in {"link", "iframe", "img", "object", "embed"}] == []
    assert [attrs for attrs, _ in page.scripts if "src" in attrs] == []
    assert re.findall(r"url\((?!data:|#default#VML)", text) == []
    assert "@import" not in text and "sourceMappingURL" not in text
    allowed = {"http://www.w3.org/2000/svg", "https://leafletjs.com"}  # inside leaflet.js
    if basemap:
        allowed |= {maps.OSM_TILES, "https://www.openstreetmap.org/copyright"}
    assert set(re.findall(r"https?://[^\"'\s<>\\]+", text)) <= allowed
    assert (data["tiles"] == maps.OSM_TILES) is basemap


def test_html_draws_the_same_map_as_the_notebook(areas: Any, result: Any,
                                                 tmp_path: Path) -> None:
    m = maps.result_map(result, areas=areas)
    _, data = parse_page(maps.save_html(m, tmp_path / "map.html"))
    assert [x["name"] for x in data["layers"]] == ["Pieces", "Study areas", "Skipped areas"]
    assert [x["geojson"] for x in data["layers"]] == json.loads(
        json.dumps([geojson_layers(m)[x].data for x in geojson_layers(m)]))
    assert data["bounds"] == [[0.0, 0.0], [7.0, 7.0]]
    assert "41–250" in data["legend"]


def test_saving_a_map_or_its_result_writes_the_same_file(areas: Any, result: Any,
                                                         tmp_path: Path) -> None:
    from_map = maps.save_html(maps.result_map(result, areas=areas), tmp_path / "a.html")
    from_result = maps.save_html(result, tmp_path / "b.html", areas=areas)
    assert from_map.read_bytes() == from_result.read_bytes()


def test_html_data_cannot_close_its_script(tmp_path: Path) -> None:
    nasty = "</script><script>alert(1)</script><!--"
    feature = {"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0]},
               "properties": {"style": {}, "popup": "", "tooltip": "", "note": nasty}}
    spec = maps.MapSpec("t", (maps.LayerSpec("x", {"type": "FeatureCollection",
                                                    "features": [feature]}),), None, None)
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
