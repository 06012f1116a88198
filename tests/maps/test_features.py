"""Rows → GeoJSON features: CRS, rounding, escaping."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import geopandas as gpd
import pytest

from parcelsearch import maps
from parcelsearch.errors import InputError

from ._helpers import EVIL


def test_areas_in_another_crs_are_drawn_in_lon_lat(areas: gpd.GeoDataFrame) -> None:
    spec = maps.areas_map(areas.to_crs(3857)).parcelsearch_spec
    assert spec.bounds == pytest.approx(tuple(areas.total_bounds), abs=1e-6)


def test_areas_without_crs_in_metres_are_refused(areas: gpd.GeoDataFrame) -> None:
    metres = areas.to_crs(3857).set_crs(None, allow_override=True)
    with pytest.raises(InputError, match="no CRS"):
        maps.areas_map(metres)


def test_coordinates_are_rounded_to_six_decimals(areas: gpd.GeoDataFrame) -> None:
    wobbly = areas.set_geometry(areas.geometry.translate(1e-9 / 3, 1 / 3))
    text = json.dumps(maps.areas_map(wobbly).parcelsearch_spec.layer("Study areas").geojson)
    assert re.findall(r"\d\.\d{7,}", text) == []
    assert "0.333333" in text


def test_user_text_is_escaped_in_popups_and_tooltips(plan: Any) -> None:
    feature = maps.plan_map(plan).parcelsearch_spec.layer("Study areas").geojson["features"][1]
    shown = feature["properties"]["popup"] + feature["properties"]["tooltip"]
    assert EVIL not in shown
    assert html.escape(EVIL) in shown
