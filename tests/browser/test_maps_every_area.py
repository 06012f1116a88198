"""Issue 59, point 3: the offline HTML map opens on every area, in headless Chromium.

Three area sets as a user brings them (16 tiny polygons in the British grid, 144 cells of a
neighbourhood in Web Mercator, a county with two small cities in NAD83): the page opens with
every area's box inside the map and under none of its controls, the header or the legend
(each box as Leaflet places it on screen); an area far from all the others is left out of
the first view and listed in the page's go-to list, which goes to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from _chromium import chromium, require_chromium, screenshot_path
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

import parcelsearch
from parcelsearch.maps import save_html

#: Each study area's box on screen, and what covers the map: the header, the controls, the
#: legend (rectangles in the page's pixels).
BOXES_JS = """
var e = window.psMaps[0], map = e.map, box = map.getContainer().getBoundingClientRect();
var areas = e.layers["Study areas"].getLayers().map(function (l) {
  var b = l.getBounds();
  var nw = map.latLngToContainerPoint(b.getNorthWest());
  var se = map.latLngToContainerPoint(b.getSouthEast());
  return {tooltip: l.feature.properties.tooltip,
          box: [box.left + nw.x, box.top + nw.y, box.left + se.x, box.top + se.y]};
});
var covers = [];
document.querySelectorAll("header, .leaflet-control, aside.ps-legend").forEach(function (c) {
  var r = c.getBoundingClientRect();
  if (r.width && r.height) {
    covers.push({what: c.tagName + "." + c.className, box: [r.left, r.top, r.right, r.bottom]});
  }
});
return {map: [box.left, box.top, box.right, box.bottom], areas: areas, covers: covers};
"""


def _squares(
    points: list[tuple[float, float]], side: float, crs: str, ids: list[str]
) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {"area_id": ids},
        geometry=[shapely.box(x, y, x + side, y + side) for x, y in points],
        crs=crs,
    )


def british_grid() -> gpd.GeoDataFrame:
    """16 plots of 30 m, scattered over 3 km of south London (EPSG:27700)."""
    points = [(530_000 + 190 * ((7 * k) % 16), 175_000 + 170 * ((5 * k) % 16)) for k in range(16)]
    return _squares(points, 30.0, "EPSG:27700", [f"plot-{k:02d}" for k in range(16)])


def mercator_cells() -> gpd.GeoDataFrame:
    """A neighbourhood in 144 cells of 150 m (12 × 12, EPSG:3857, in Paris)."""
    points = [(261_000 + 150 * i, 6_250_000 + 150 * j) for j in range(12) for i in range(12)]
    return _squares(points, 150.0, "EPSG:3857", [f"cell-{k:03d}" for k in range(144)])


def county_and_cities() -> gpd.GeoDataFrame:
    """A county 40 km across with two independent cities of 2 km beside it (NAD83)."""
    county = shapely.Polygon([(-78.0, 37.3), (-77.55, 37.32), (-77.5, 37.62), (-77.9, 37.66)])
    cities = [shapely.box(-77.78, 37.45, -77.76, 37.47), shapely.box(-77.70, 37.50, -77.68, 37.52)]
    return gpd.GeoDataFrame(
        {"area_id": ["county", "city-a", "city-b"]},
        geometry=[county.difference(shapely.union_all(cities)), *cities],
        crs="EPSG:4269",
    )


CASES = {
    "british-grid": british_grid,
    "mercator-cells": mercator_cells,
    "county-and-cities": county_and_cities,
}


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    require_chromium()
    with chromium() as driver:
        yield driver


def _open(driver: webdriver.Chrome, path: Path) -> dict[str, Any]:
    driver.get(path.as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return !!window.psMaps && window.psMaps.length > 0")
    )
    seen: dict[str, Any] = driver.execute_script(BOXES_JS)
    return seen


def _inside(inner: list[float], outer: list[float]) -> bool:
    return (
        inner[0] >= outer[0] - 0.5
        and inner[1] >= outer[1] - 0.5
        and inner[2] <= outer[2] + 0.5
        and inner[3] <= outer[3] + 0.5
    )


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _free(seen: dict[str, Any], area: dict[str, Any]) -> bool:
    """Inside the map and under nothing that covers it."""
    return _inside(area["box"], seen["map"]) and not any(
        _overlap(area["box"], c["box"]) for c in seen["covers"]
    )


@pytest.mark.parametrize("kind", ["areas", "plan"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_map_opens_on_every_area_under_no_control(
    browser: webdriver.Chrome, tmp_path: Path, case: str, kind: str
) -> None:
    areas = CASES[case]()
    obj = (
        areas.set_index("area_id")
        if kind == "areas"
        else parcelsearch.plan(areas, id_column="area_id")
    )
    path = save_html(obj, tmp_path / f"{case}.html", context=None)
    seen = _open(browser, path)
    browser.save_screenshot(str(screenshot_path(f"every_area_{case}_{kind}")))
    assert len(seen["areas"]) == len(areas)
    hidden = [a["tooltip"] for a in seen["areas"] if not _free(seen, a)]
    assert not hidden, (hidden[:5], seen["covers"])


def test_an_area_far_from_the_others_is_listed_and_reached(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    """15 plots in London and one in Leeds: the page opens on the 15, and its go-to list
    (the notebook map's) reaches the one in Leeds."""
    areas = british_grid().iloc[:15]
    leeds = _squares([(430_000.0, 433_000.0)], 30.0, "EPSG:27700", ["leeds"])
    areas = gpd.GeoDataFrame(pd.concat([areas, leeds], ignore_index=True), crs="EPSG:27700")
    path = save_html(areas.set_index("area_id"), tmp_path / "far.html", context=None)
    seen = _open(browser, path)
    free = {a["tooltip"] for a in seen["areas"] if _free(seen, a)}
    assert len(free) == 15 and not any("leeds" in t for t in free)
    chooser = Select(browser.find_element(By.CSS_SELECTOR, "header .ps-go-to select"))
    titles = [o.text for o in chooser.options]
    assert titles[0] == "all areas" and "leeds" in titles
    assert chooser.first_selected_option.text == titles[1]  # the view opened on: the 15
    chooser.select_by_visible_text("leeds")
    WebDriverWait(browser, 10).until(
        lambda d: any(
            "leeds" in a["tooltip"] and _free(s, a)
            for s in [d.execute_script(BOXES_JS)]
            for a in s["areas"]
        )
    )
