"""Specs of areas, plans and results: popups, styles, skipped areas, markers."""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import box

from parcelsearch import maps
from parcelsearch.maps.classification import PALETTE
from parcelsearch.maps.spec import SKIPPED_STYLE

from ._helpers import EVIL, geojson_layers, piece, popup_table, popups


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
        index=pd.Index([f"a{i}" for i in range(len(centres))], name="area_id"),
        crs=4326,
    )
    m = maps.areas_map(tiny)
    layer = geojson_layers(m).get("Area markers")
    shown = [] if layer is None else [p["area_id"] for p in popups(layer)]
    assert shown == markers
    if layer is not None:
        assert {f["geometry"]["type"] for f in layer.data["features"]} == {"Point"}


def test_area_popups_show_id_name_market_and_size(areas: gpd.GeoDataFrame) -> None:
    first = popups(maps.areas_map(areas).parcelsearch_spec.layer("Study areas"))[0]
    assert first == {
        "area_id": "a1",
        "name": "North",
        "market": "Abilene",
        "area (km²)": "12,308.78",
    }  # 1°×1° at the equator


def test_area_id_may_be_a_column(areas: gpd.GeoDataFrame) -> None:
    spec = maps.areas_map(areas.reset_index(), id_name="area_id").parcelsearch_spec
    assert [p["area_id"] for p in popups(spec.layer("Study areas"))] == ["a1", "a2", "a3", "a4"]


def test_plan_popups_show_request_figures(plan: Any) -> None:
    table = popups(maps.plan_map(plan).parcelsearch_spec.layer("Pieces"))[2]
    assert table == {
        "area": f"{EVIL} (a2)",
        "piece": "0",
        "vertices": "10",
        "request bytes": "6,840",
        "min calls": "1",
    }


@pytest.mark.parametrize(
    ("area", "piece_id", "expected"),
    [
        pytest.param(
            "a1",
            0,
            {"parcels matched": "0", "pages": "1", "calls": "1", "cached": "no"},
            id="nothing-matched",
        ),
        pytest.param(
            "a2",
            0,
            {"parcels matched": "250", "pages": "3", "calls": "2", "cached": "1 of 3 pages"},
            id="partly-cached",
        ),
        pytest.param(
            "a3",
            0,
            {"parcels matched": "40", "pages": "1", "calls": "0", "cached": "yes"},
            id="all-cached",
        ),
        pytest.param(
            "a3",
            1,
            {"parcels matched": "not searched", "pages": "—", "calls": "0", "cached": "no"},
            id="not-searched",
        ),
    ],
)
def test_result_popups_show_the_figures(
    result: Any, area: str, piece_id: int, expected: dict[str, str]
) -> None:
    table = popup_table(piece(maps.result_map(result), area, piece_id)["properties"]["popup"])
    assert {k: table[k] for k in expected} == expected


def test_missing_cache_flags_read_as_not_cached(result: Any) -> None:
    result.tiles["from_cache"] = pd.array([None, False, None, True, None], dtype="boolean")
    m = maps.result_map(result)
    assert popup_table(piece(m, "a1", 0)["properties"]["popup"])["cached"] == "no"
    assert popup_table(piece(m, "a3", 0)["properties"]["popup"])["cached"] == "yes"


@pytest.mark.parametrize(
    ("area", "piece_id", "fill", "dashed"),
    [
        pytest.param("a1", 0, PALETTE[0], False, id="zero"),
        pytest.param("a1", 1, PALETTE[1], False, id="low"),
        pytest.param("a2", 0, PALETTE[4], False, id="high"),
        pytest.param("a3", 0, PALETTE[3], True, id="cached-is-dashed"),
    ],
)
def test_pieces_are_coloured_by_parcels_matched(
    result: Any, area: str, piece_id: int, fill: str, dashed: bool
) -> None:
    style = piece(maps.result_map(result), area, piece_id)["properties"]["style"]
    assert (style["fillColor"], "dashArray" in style) == (fill, dashed)


def test_skipped_areas_say_why(areas: Any, result: Any) -> None:
    spec = maps.result_map(result, areas=areas).parcelsearch_spec
    assert popups(spec.layer("Skipped areas")) == [
        {
            "area_id": "a4",
            "name": "Ranch",
            "market": "Marfa",
            "reason": "market not active",
            "suggestion": "Alpine",
        }
    ]
    assert (
        spec.layer("Skipped areas").geojson["features"][0]["properties"]["style"]["dashArray"]
        == SKIPPED_STYLE["dashArray"]
    )


def test_a_connector_has_its_word_in_the_legend() -> None:
    """Issue 41: under the point rule the demo's twin sites share a piece through a
    connector, drawn as a thin line; the legend says what it is (and says nothing of
    connectors when there are none)."""
    import parcelsearch
    from parcelsearch.maps import plan_spec
    from parcelsearch.maps.describe import CONNECTOR_LABEL, connector_pieces

    areas = parcelsearch.demo_areas()
    joined = parcelsearch.plan(areas, id_column="area_id", match="representative-point")
    assert connector_pieces(joined.areas, joined.tiles, joined.id_name) == 1
    assert CONNECTOR_LABEL in [e.label for e in plan_spec(joined).legend.entries]
    apart = parcelsearch.plan(areas, id_column="area_id", connectors=False)
    assert CONNECTOR_LABEL not in [e.label for e in plan_spec(apart).legend.entries]


def _refreshed(changed: list[bool]) -> Any:
    """A refresh's result over three far-apart areas (one piece each), some pieces changed."""
    from types import SimpleNamespace

    corners = [(-100.0, 32.0), (-100.02, 32.0), (-90.0, 40.0)]
    areas = gpd.GeoDataFrame(
        {"name": ["West", "West 2", "East"]},
        geometry=[box(x, y, x + 0.01, y + 0.01) for x, y in corners],
        index=pd.Index(["w1", "w2", "e1"], name="area_id"),
        crs=4326,
    )
    tiles = gpd.GeoDataFrame(
        {
            "area_id": list(areas.index),
            "piece_id": [0, 0, 0],
            "rows": pd.array([3, 4, 5], dtype="Int64"),
            "pages": [1, 1, 1],
            "pages_fetched": [1, 1, 1],
            "calls": [1, 1, 1],
            "changed": changed,
        },
        geometry=list(areas.geometry),
        crs=4326,
    )
    plan = SimpleNamespace(areas=areas, id_name="area_id", tiles=tiles)
    return SimpleNamespace(
        plan=plan,
        id_name="area_id",
        tiles=tiles,
        skipped=pd.DataFrame(index=pd.Index([], name="area_id")),
    )


@pytest.mark.parametrize(
    ("changed", "opens_on"),
    [
        pytest.param([False, False, False], "West (w1), West 2 (w2)", id="densest-group"),
        pytest.param([False, False, True], "East (e1)", id="the-changed-piece"),
    ],
)
def test_a_refresh_map_opens_on_the_changed_pieces(changed: list[bool], opens_on: str) -> None:
    """Far-apart areas: a map opens on the densest group, a refresh's map on what changed."""
    spec = maps.result_spec(_refreshed(changed), context=None)
    assert spec.focus is not None and spec.focus.title == opens_on
    if any(changed):
        assert len(spec.layer("Changed pieces").geojson["features"]) == 1
    m = maps.result_map(_refreshed(changed), context=None)
    west, south, east, north = spec.focus.bounds
    assert m.center == pytest.approx([(south + north) / 2, (west + east) / 2], abs=1e-3)
